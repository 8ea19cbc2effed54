package metricsauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/internal/metricsauth"
	"github.com/inferencestack/inferencestack/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, testenv.Options{}, &env)
}

// TestFilter: on the real API server, only a ServiceAccount granted get on
// /metrics reads it; a token it does not know, no token, and one without
// the grant (or for another path) are refused.
func TestFilter(t *testing.T) {
	ctx := context.Background()
	const ns = "metrics"
	create := func(obj client.Object) { require.NoError(t, env.Client.Create(ctx, obj)) }
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})
	create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}})
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}})
	create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}}})
	reader, err := env.Token(ctx, ns, "reader", time.Hour)
	require.NoError(t, err)
	stranger, err := env.Token(ctx, ns, "stranger", time.Hour)
	require.NoError(t, err)

	httpClient, err := rest.HTTPClientFor(env.Config)
	require.NoError(t, err)
	provider, err := metricsauth.Filter(env.Config, httpClient)
	require.NoError(t, err)
	filtered, err := provider(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "metrics")
	}))
	require.NoError(t, err)
	srv := httptest.NewServer(filtered)
	defer srv.Close()

	tests := []struct {
		name          string
		authorization string
		path          string
		want          int
	}{
		{name: "granted", authorization: "Bearer " + reader, path: "/metrics", want: http.StatusOK},
		{name: "granted, again (cached)", authorization: "Bearer " + reader, path: "/metrics", want: http.StatusOK},
		{name: "granted, lower-case scheme", authorization: "bearer " + reader, path: "/metrics", want: http.StatusOK},
		{name: "another path", authorization: "Bearer " + reader, path: "/debug", want: http.StatusForbidden},
		{name: "not granted", authorization: "Bearer " + stranger, path: "/metrics", want: http.StatusForbidden},
		{name: "unknown token", authorization: "Bearer not-a-token", path: "/metrics", want: http.StatusUnauthorized},
		{name: "no token", path: "/metrics", want: http.StatusUnauthorized},
		{name: "basic auth", authorization: "Basic dXNlcjpwYXNz", path: "/metrics", want: http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+tc.path, nil)
			require.NoError(t, err)
			if tc.authorization != "" {
				req.Header.Set("Authorization", tc.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			require.Equal(t, tc.want, resp.StatusCode, "body: %s", body)
		})
	}
}
