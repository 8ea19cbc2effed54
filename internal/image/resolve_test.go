package image

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	img, err := random.Image(512, 1)
	require.NoError(t, err)
	tag, err := name.NewTag(host + "/inferencestack/operator:v1.0.0")
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img))
	want, err := img.Digest()
	require.NoError(t, err)

	tests := []struct {
		name      string
		ref       string
		want      string
		assertion require.ErrorAssertionFunc
	}{
		{name: "tag", ref: host + "/inferencestack/operator:v1.0.0",
			want: host + "/inferencestack/operator@" + want.String(), assertion: require.NoError},
		{name: "digest needs no registry", ref: "quay.io/x/y@sha256:" + strings.Repeat("a", 64),
			want: "quay.io/x/y@sha256:" + strings.Repeat("a", 64), assertion: require.NoError},
		{name: "unknown tag", ref: host + "/inferencestack/operator:v9", assertion: require.Error},
		{name: "bad reference", ref: "Quay.io/UPPER:", assertion: require.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(context.Background(), tc.ref, ResolveOptions{})
			tc.assertion(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestWithDigest(t *testing.T) {
	d := "sha256:" + strings.Repeat("b", 64)
	got, err := WithDigest("quay.io/inferencestack/distribution-starter:0.2.0", d)
	require.NoError(t, err)
	require.Equal(t, "quay.io/inferencestack/distribution-starter@"+d, got)
	require.True(t, HasDigest(got))
	require.False(t, HasDigest("quay.io/a/b:1"))
	_, err = WithDigest("quay.io/a/b:1", "sha256:short")
	require.Error(t, err)
	require.Error(t, CheckReference("not a ref"))
	require.NoError(t, CheckReference("quay.io/a/b:1"))
}

// TestResolveRefusesWhatIsNotARegistry: an address that answers 200 with
// the same page to every request (a captive portal, a web server) yields no
// digest, and a registry that accepts the connection but never answers
// fails within registryTimeout instead of hanging.
func TestResolveRefusesWhatIsNotARegistry(t *testing.T) {
	anything := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>welcome</html>")
	}))
	t.Cleanup(anything.Close)
	host := strings.TrimPrefix(anything.URL, "http://")
	for _, ref := range []string{host + "/a/b:v1", host + "/c/d:v2"} {
		_, err := Resolve(context.Background(), ref, ResolveOptions{})
		require.ErrorContains(t, err, "is not an image manifest")
	}

	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(release) })
	defer func(d time.Duration) { registryTimeout = d }(registryTimeout)
	registryTimeout = 200 * time.Millisecond
	_, err := Resolve(context.Background(), strings.TrimPrefix(silent.URL, "http://")+"/a/b:v1", ResolveOptions{})
	require.ErrorContains(t, err, "timeout awaiting response headers")
}
