package conversion_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/inferencestack/inferencestack/operator/conversion"
)

// TestConversionServesNothingElse: a caller of the conversion webhook
// with no credentials at all (no client certificate, no token) gets back
// the conversion of exactly what it sent, and nothing on any other path:
// the server reads nothing from the cluster to answer (a stack and a
// Secret that exist in the cluster never show in any answer).
func TestConversionServesNothingElse(t *testing.T) {
	ctx := t.Context()
	_, core, ext, addr := conversionEnv(t)
	_, err := core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conv"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	const planted = "planted-7d1e"
	_, err = core.CoreV1().Secrets("conv").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: planted},
		StringData: map[string]string{"key": planted}}, metav1.CreateOptions{})
	require.NoError(t, err)

	s := &conversion.Server{Core: core, Extensions: ext, Namespace: "conv", SecretName: "inferencestack-conversion-tls", CRDName: crdName,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Addr: addr, Validity: time.Hour, CheckInterval: time.Minute, SwitchAfter: time.Second, Log: testr.New(t)}
	_, err = s.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	// Nobody: no client certificate, no token; the server's certificate is
	// not checked either (what it serves is the question).
	anyone := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // an anonymous caller
	call := func(method, path string, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := anyone.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	eventually(t, "the conversion server to serve", func() error {
		_, err := anyone.Get("https://" + addr + "/healthz")
		return err
	})

	review := apiextensionsv1.ConversionReview{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "u1", DesiredAPIVersion: "inferencestack.io/v1alpha2", Objects: []runtime.RawExtension{{
			Raw: []byte(`{"apiVersion":"inferencestack.io/v1alpha1","kind":"InferenceStack","metadata":{"name":"mine","namespace":"conv"},"spec":{"distribution":{"name":"starter"}}}`)}}}}
	body, err := json.Marshal(review)
	require.NoError(t, err)
	code, answer := call(http.MethodPost, conversion.Path, body)
	require.Equal(t, http.StatusOK, code, answer)
	var got apiextensionsv1.ConversionReview
	require.NoError(t, json.Unmarshal([]byte(answer), &got))
	require.Len(t, got.Response.ConvertedObjects, 1, answer)
	require.Contains(t, string(got.Response.ConvertedObjects[0].Raw), `"name":"mine"`)
	require.NotContains(t, answer, planted)

	for _, path := range []string{"/", "/metrics", "/debug/pprof/", "/api/v1/namespaces/conv/secrets/" + planted, "/convert/../metrics"} {
		code, answer := call(http.MethodGet, path, nil)
		require.Equal(t, http.StatusNotFound, code, "GET %s: %s", path, answer)
		require.NotContains(t, answer, planted)
	}
	code, answer = call(http.MethodGet, conversion.Path, nil)
	require.NotEqual(t, http.StatusOK, code, "GET %s: %s", conversion.Path, answer)
	require.NotContains(t, answer, planted)
}
