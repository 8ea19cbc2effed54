package serverstatus

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// TestResources: the identifiers a 0.7.1 server lists are read where the
// line's facts place the list, sorted; a failure is a classified cause
// that never carries the server's own words or body.
func TestResources(t *testing.T) {
	line := stackconfig.Line07
	ds, ok := line.ResourceList("datasets")
	require.True(t, ok, "0.7.1's facts list datasets")
	ep, err := line.Endpoint(ds.Endpoint)
	require.NoError(t, err)
	tests := []struct {
		name      string
		status    int
		body      string
		want      []string
		wantCause string
	}{
		{name: "listed", status: http.StatusOK, body: `{"data": [{"identifier": "b", "type": "dataset"}, {"identifier": "a", "type": "dataset"}]}`,
			want: []string{"a", "b"}},
		{name: "empty", status: http.StatusOK, body: `{"data": []}`, want: []string{}},
		{name: "refused", status: http.StatusUnauthorized, body: `{"error": {"message": "the server's secret words"}}`,
			wantCause: ep.Method + " " + ep.Path + ": HTTP 401"},
		{name: "not JSON", status: http.StatusOK, body: `<html>the server's secret words</html>`,
			wantCause: ep.Method + " " + ep.Path + ": the answer is not a " + ep.Response},
		{name: "another shape", status: http.StatusOK, body: `{"items": ["the server's secret words"]}`,
			wantCause: ep.Method + " " + ep.Path + ": the answer is not a " + ep.Response},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.Method + " " + r.URL.Path
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := &Prober{Resolve: func(string) string { return strings.TrimPrefix(srv.URL, "http://") }}
			got, err := p.Resources(context.Background(), Target{Stack: types.NamespacedName{Namespace: "ns", Name: "s"},
				Line: line, Host: "s.ns.svc", Port: 8321}, []string{"datasets"})
			require.Equal(t, ep.Method+" "+ep.Path, asked)
			if tc.wantCause == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, got["datasets"])
				return
			}
			var le *ListError
			require.True(t, errors.As(err, &le), "error %v is a *ListError", err)
			require.Equal(t, tc.wantCause, le.Error())
			require.NotContains(t, le.Error(), "secret")
		})
	}
}
