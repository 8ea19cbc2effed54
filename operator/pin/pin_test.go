package pin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/operator/pin"
)

func TestLoad(t *testing.T) {
	dists := []string{"starter", "remote-vllm"}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("operatorVersion: 1.2.3\noperands:\n  starter: quay.io/x/starter@sha256:abc\n"), 0o600))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("operatorVersion: 1.2.3\nunknown: 1\n"), 0o600))
	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, []byte("operatorVersion: 1.2.3\n"), 0o600))
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name      string
		path      string
		environ   []string
		want      pin.Pin
		assertion require.ErrorAssertionFunc
	}{
		{name: "file", path: good, environ: []string{"RELATED_IMAGE_STARTER=ignored"},
			want:      pin.Pin{OperatorVersion: "1.2.3", Operands: map[string]string{"starter": "quay.io/x/starter@sha256:abc"}},
			assertion: require.NoError},
		{name: "env fallback", path: missing, environ: []string{"OPERATOR_VERSION=1.0.0", "RELATED_IMAGE_REMOTE_VLLM=quay.io/x/vllm:1"},
			want:      pin.Pin{OperatorVersion: "1.0.0", Operands: map[string]string{"remote-vllm": "quay.io/x/vllm:1"}},
			assertion: require.NoError},
		{name: "neither", path: missing, assertion: func(t require.TestingT, err error, _ ...any) {
			require.ErrorContains(t, err, "RELATED_IMAGE_STARTER, RELATED_IMAGE_REMOTE_VLLM")
		}},
		{name: "unknown field", path: bad, assertion: func(t require.TestingT, err error, _ ...any) {
			require.ErrorContains(t, err, bad)
			require.ErrorContains(t, err, "unknown")
		}},
		{name: "env fallback with llama stack version", path: missing, environ: []string{"OPERATOR_VERSION=2.0.0", "LLAMA_STACK_VERSION=0.3.0", "RELATED_IMAGE_STARTER=docker.io/llamastack/distribution-starter:0.3.0"},
			want:      pin.Pin{OperatorVersion: "2.0.0", LlamaStackVersion: "0.3.0", Operands: map[string]string{"starter": "docker.io/llamastack/distribution-starter:0.3.0"}},
			assertion: require.NoError},
		{name: "env llama stack version not semver", path: missing, environ: []string{"LLAMA_STACK_VERSION=latest", "RELATED_IMAGE_STARTER=x"},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, `LLAMA_STACK_VERSION: "latest" is not a semantic version`)
			}},
		{name: "no operands", path: empty, assertion: func(t require.TestingT, err error, _ ...any) {
			require.ErrorContains(t, err, "operands is empty")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pin.Load(tc.path, tc.environ, dists)
			tc.assertion(t, err)
			if err == nil {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	p := pin.Pin{OperatorVersion: "1.0.0", Operands: map[string]string{"b": "img-b", "a": "img-a"}}
	data, err := p.Marshal()
	require.NoError(t, err)
	require.Equal(t, "operands:\n  a: img-a\n  b: img-b\noperatorVersion: 1.0.0\n", string(data))
	got, err := pin.Parse(data)
	require.NoError(t, err)
	require.Equal(t, p, got)

	image, err := got.Image("a")
	require.NoError(t, err)
	require.Equal(t, "img-a", image)
	_, err = got.Image("c")
	require.ErrorContains(t, err, `pins no image for distribution "c" (pinned: a, b)`)
	require.Equal(t, "RELATED_IMAGE_META_REFERENCE_GPU", pin.EnvName("meta-reference-gpu"))
	require.Equal(t, "RELATED_IMAGE_REMOTE_VLLM", pin.EnvName("remote-vllm"))
}

func TestMajor(t *testing.T) {
	for version, want := range map[string]string{"1.0.0": "1", "2.3.4": "2", "v10.0.1": "10", "2.0.0-rc.1": "2"} {
		got, err := pin.Pin{OperatorVersion: version}.Major()
		require.NoError(t, err, version)
		require.Equal(t, want, got, version)
	}
	for _, version := range []string{"unknown", "", "x.1"} {
		_, err := pin.Pin{OperatorVersion: version}.Major()
		require.ErrorContains(t, err, pin.OperatorVersionEnv, "version %q", version)
	}
}
