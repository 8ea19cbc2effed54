package release

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

// pushRandom pushes a random image to ref and returns its digest.
func pushRandom(t *testing.T, ref string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	require.NoError(t, err)
	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img))
	d, err := img.Digest()
	require.NoError(t, err)
	return d.String()
}

func TestPinResolve(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	opDigest := pushRandom(t, host+"/inferencestack/operator:v2.0.0")
	starterDigest := pushRandom(t, host+"/llamastack/distribution-starter:0.3.0")

	dir := t.TempDir()
	releases := filepath.Join(dir, "releases")
	require.NoError(t, os.MkdirAll(releases, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(releases, "2.0.0.yaml"), []byte(`version: 2.0.0
releaseDate: "2027-01-01T00:00:00Z"
minKubeVersion: 1.30.0
llamaStackVersion: 0.3.0
operatorImage: `+host+`/inferencestack/operator:v2.0.0
operands:
  starter: `+host+`/llamastack/distribution-starter:0.3.0
api: {reads: v1alpha1, served: [v1alpha1], storage: v1alpha1}
`), 0o644))
	lock := filepath.Join(dir, "images.lock")
	req := PinRequest{ReleasesDir: releases, LockPath: lock}

	_, err := req.Run(context.Background())
	require.ErrorContains(t, err, "images.lock does not exist", "offline, without a lock file")

	// Recorded as unresolved: the pin carries the tag, with a warning.
	require.NoError(t, os.WriteFile(lock, []byte("images:\n  "+host+"/inferencestack/operator:v2.0.0: unresolved\n  "+
		host+"/llamastack/distribution-starter:0.3.0: unresolved\n"), 0o644))
	var warnings strings.Builder
	req.Warnings = &warnings
	p, err := req.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, host+"/llamastack/distribution-starter:0.3.0", p.Operands["starter"])
	require.Contains(t, warnings.String(), "image "+host+"/llamastack/distribution-starter:0.3.0 is unresolved in the image lock")

	// --resolve replaces the unresolved entries with the registry's digests.
	req.Resolve = true
	p, err = req.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, Pin{OperatorVersion: "2.0.0", LlamaStackVersion: "0.3.0", Operands: map[string]string{
		"starter": host + "/llamastack/distribution-starter@" + starterDigest,
	}}, p)

	l, err := LoadLock(lock)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		host + "/inferencestack/operator:v2.0.0":        opDigest,
		host + "/llamastack/distribution-starter:0.3.0": starterDigest,
	}, l.Images)

	// Offline again: the lock now answers, and the registry is not needed.
	srv.Close()
	req.Resolve = false
	offline, err := req.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, p, offline)
}

func TestPinMarshalMatchesOperatorFormat(t *testing.T) {
	// The bytes operator/pin.Pin.Marshal gives for the same content.
	data, err := Pin{OperatorVersion: "1.0.0", Operands: map[string]string{"starter": "a/b@sha256:x", "remote-vllm": "c/d:1"}}.Marshal()
	require.NoError(t, err)
	require.Equal(t, "operands:\n  remote-vllm: c/d:1\n  starter: a/b@sha256:x\noperatorVersion: 1.0.0\n", string(data))
}

func TestLatest(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.10.0", "1.9.3"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, v+".yaml"), nil, 0o644))
	}
	got, err := Latest(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "1.10.0.yaml"), got)
}
