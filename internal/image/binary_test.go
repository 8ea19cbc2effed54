package image_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
)

// staticBinary builds testdata/static for Linux with CGO_ENABLED=0.
func staticBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "static")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/static")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// tarEntry is what a layer holds for one path.
type tarEntry struct {
	mode     int64
	uid, gid int
	content  string
}

func layerEntries(t *testing.T, l interface {
	Uncompressed() (io.ReadCloser, error)
}) map[string]tarEntry {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	out := map[string]tarEntry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		require.True(t, hdr.ModTime.Equal(image.Epoch), "%s has time %s", hdr.Name, hdr.ModTime)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[hdr.Name] = tarEntry{mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, content: string(b)}
	}
}

func TestBuildBinary(t *testing.T) {
	bin := staticBinary(t)
	img, err := image.BuildBinary(bin, image.BinaryOptions{Path: "/usr/bin/app", Args: []string{"--x"}, Labels: map[string]string{"a": "b"}})
	require.NoError(t, err)

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, []string{"/usr/bin/app"}, cf.Config.Entrypoint)
	require.Equal(t, []string{"--x"}, cf.Config.Cmd)
	require.Equal(t, map[string]string{"a": "b"}, cf.Config.Labels)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, runtime.GOARCH, cf.Architecture, "the architecture of the binary, built for this machine")
	require.True(t, cf.Created.Equal(image.Epoch))

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 2, "the base layer and the binary's")
	base := layerEntries(t, layers[0])
	require.Contains(t, base["etc/passwd"].content, "nonroot:x:65532:65532:")
	require.Contains(t, base["etc/group"].content, "nonroot:x:65532:")
	require.Equal(t, tarEntry{mode: 0o700, uid: 65532, gid: 65532}, base["home/nonroot/"])
	require.Equal(t, int64(0o1777), base["tmp/"].mode)
	app := layerEntries(t, layers[1])
	want, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.Equal(t, tarEntry{mode: 0o755, content: string(want)}, app["usr/bin/app"])
	require.Contains(t, app, "usr/")
	require.Contains(t, app, "usr/bin/")

	// Aliases hold the same executable; Env follows PATH.
	aliased, err := image.BuildBinary(bin, image.BinaryOptions{Path: "/usr/bin/app", Aliases: []string{"/usr/local/bin/other"}, Env: []string{"A=b=c"}})
	require.NoError(t, err)
	cf, err = aliased.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "A=b=c"}, cf.Config.Env)
	aliasedLayers, err := aliased.Layers()
	require.NoError(t, err)
	app = layerEntries(t, aliasedLayers[1])
	require.Equal(t, tarEntry{mode: 0o755, content: string(want)}, app["usr/bin/app"])
	require.Equal(t, tarEntry{mode: 0o755, content: string(want)}, app["usr/local/bin/other"])
	require.Contains(t, app, "usr/local/")

	// Same binary and options, same digest; another path, another digest.
	again, err := image.BuildBinary(bin, image.BinaryOptions{Path: "/usr/bin/app", Args: []string{"--x"}, Labels: map[string]string{"a": "b"}})
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2)
	other, err := image.BuildBinary(bin, image.BinaryOptions{Path: "/app"})
	require.NoError(t, err)
	d3, err := other.Digest()
	require.NoError(t, err)
	require.NotEqual(t, d1, d3)
	// The base layer is the same in every binary image.
	otherLayers, err := other.Layers()
	require.NoError(t, err)
	b1, err := layers[0].Digest()
	require.NoError(t, err)
	b2, err := otherLayers[0].Digest()
	require.NoError(t, err)
	require.Equal(t, b1, b2)
}

func TestBuildBinaryRefuses(t *testing.T) {
	bin := staticBinary(t)
	text := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755))
	for _, tc := range []struct {
		name    string
		file    string
		path    string
		aliases []string
		env     []string
		wantErr string
	}{
		{name: "relative path in the image", file: bin, path: "manager", wantErr: "must be absolute and clean"},
		{name: "unclean path", file: bin, path: "/a/../manager", wantErr: "must be absolute and clean"},
		{name: "relative alias", file: bin, path: "/manager", aliases: []string{"bin/x"}, wantErr: `path "bin/x" in the image must be absolute`},
		{name: "environment without a value", file: bin, path: "/manager", env: []string{"A"}, wantErr: `environment "A" must be NAME=value`},
		{name: "PATH in the environment", file: bin, path: "/manager", env: []string{"PATH=/x"}, wantErr: "NAME not PATH"},
		{name: "missing file", file: filepath.Join(t.TempDir(), "nope"), path: "/manager", wantErr: "no such file"},
		{name: "not an executable", file: text, path: "/manager", wantErr: "is not an ELF executable"},
		{name: "dynamically linked", file: dynamicBinary(), path: "/manager", wantErr: "build it with CGO_ENABLED=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.file == "" {
				t.Skip("no dynamically linked executable on this machine (ldd)")
			}
			_, err := image.BuildBinary(tc.file, image.BinaryOptions{Path: tc.path, Aliases: tc.aliases, Env: tc.env})
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// dynamicBinary is a dynamically linked executable of this machine, or "".
func dynamicBinary() string {
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		if b, err := exec.Command("ldd", p).CombinedOutput(); err == nil && len(b) > 0 {
			return p
		}
	}
	return ""
}
