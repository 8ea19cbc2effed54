package image_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/registry"
)

const annotations = `annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: demo
  operators.operatorframework.io.bundle.channels.v1: stable-v1
`

// writeFiles creates files (slash paths relative to dir) with their content.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
}

func bundleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifests/demo.clusterserviceversion.yaml": "kind: ClusterServiceVersion\n",
		"manifests/demo.crd.yaml":                   "kind: CustomResourceDefinition\n",
		"metadata/annotations.yaml":                 annotations,
		"README.md":                                 "not in the image\n",
	})
	return dir
}

// layerFiles lists the tar entries of the only layer of img, with file contents.
func layerFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.True(t, hdr.ModTime.Equal(image.Epoch), "%s has time %s", hdr.Name, hdr.ModTime)
		require.Zero(t, hdr.Uid)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		got[hdr.Name] = string(b)
	}
	return got
}

func TestBuildBundle(t *testing.T) {
	dir := bundleDir(t)
	img, err := image.BuildBundle(dir)
	require.NoError(t, err)

	again, err := image.BuildBundle(dir)
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2, "same directory, same digest")

	// A copy of the directory elsewhere, written at another time, gives the same digest.
	other := t.TempDir()
	writeFiles(t, other, map[string]string{
		"manifests/demo.clusterserviceversion.yaml": "kind: ClusterServiceVersion\n",
		"manifests/demo.crd.yaml":                   "kind: CustomResourceDefinition\n",
		"metadata/annotations.yaml":                 annotations,
	})
	copied, err := image.BuildBundle(other)
	require.NoError(t, err)
	d3, err := copied.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d3, "copy of the directory, same digest")

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	want := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
		"operators.operatorframework.io.bundle.package.v1":   "demo",
		"operators.operatorframework.io.bundle.channels.v1":  "stable-v1",
	}
	if diff := cmp.Diff(want, cf.Config.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	require.True(t, cf.Created.Equal(image.Epoch))

	wantFiles := map[string]string{
		"manifests/": "",
		"manifests/demo.clusterserviceversion.yaml": "kind: ClusterServiceVersion\n",
		"manifests/demo.crd.yaml":                   "kind: CustomResourceDefinition\n",
		"metadata/":                                 "",
		"metadata/annotations.yaml":                 annotations,
	}
	if diff := cmp.Diff(wantFiles, layerFiles(t, img)); diff != "" {
		t.Errorf("layer files (-want +got):\n%s", diff)
	}

	// A changed manifest changes the digest.
	writeFiles(t, dir, map[string]string{"manifests/demo.crd.yaml": "kind: CustomResourceDefinition # changed\n"})
	changed, err := image.BuildBundle(dir)
	require.NoError(t, err)
	d4, err := changed.Digest()
	require.NoError(t, err)
	require.NotEqual(t, d1, d4)
}

func TestBuildBundleErrors(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		assertion require.ErrorAssertionFunc
	}{
		{
			name:  "no annotations",
			files: map[string]string{"manifests/a.yaml": "a: b\n"},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "is not a bundle directory")
			},
		},
		{
			name: "no package",
			files: map[string]string{
				"manifests/a.yaml":          "a: b\n",
				"metadata/annotations.yaml": "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n",
			},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "operators.operatorframework.io.bundle.package.v1 is missing")
			},
		},
		{
			name: "not registry+v1",
			files: map[string]string{
				"manifests/a.yaml":          "a: b\n",
				"metadata/annotations.yaml": "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: helm\n  operators.operatorframework.io.bundle.package.v1: demo\n",
			},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, "registry+v1 bundles only")
			},
		},
		{
			name: "manifests elsewhere",
			files: map[string]string{
				"manifests/a.yaml":          "a: b\n",
				"metadata/annotations.yaml": "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.manifests.v1: deploy/\n",
			},
			assertion: func(t require.TestingT, err error, _ ...any) {
				require.ErrorContains(t, err, `set it to "manifests/"`)
			},
		},
		{
			name:      "valid",
			files:     map[string]string{"manifests/a.yaml": "a: b\n", "metadata/annotations.yaml": annotations},
			assertion: require.NoError,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, err := image.BuildBundle(dir)
			tc.assertion(t, err)
		})
	}
}

func TestBuildCatalog(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"demo/catalog.yaml": "schema: olm.package\nname: demo\n",
		"demo/graph.svg":    "<svg/>",
		"demo/graph.md":     "# graph\n",
		"other/index.json":  "{}",
	})
	_, err := image.BuildCatalog(dir, image.CatalogOptions{})
	require.ErrorContains(t, err, "would parse demo/graph.md, demo/graph.svg as catalog files")
	writeFiles(t, dir, map[string]string{".indexignore": "*.svg\n*.md\n"})

	img, err := image.BuildCatalog(dir, image.CatalogOptions{Labels: map[string]string{
		"org.opencontainers.image.source": "https://example.com/repo",
		image.ConfigsLabel:                "/elsewhere",
	}})
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	want := map[string]string{
		"operators.operatorframework.io.index.configs.v1": "/configs",
		"org.opencontainers.image.source":                 "https://example.com/repo",
	}
	if diff := cmp.Diff(want, cf.Config.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantFiles := map[string]string{
		"configs/":                  "",
		"configs/.indexignore":      "*.svg\n*.md\n",
		"configs/demo/":             "",
		"configs/demo/catalog.yaml": "schema: olm.package\nname: demo\n",
		"configs/demo/graph.md":     "# graph\n",
		"configs/demo/graph.svg":    "<svg/>",
		"configs/other/":            "",
		"configs/other/index.json":  "{}",
	}
	if diff := cmp.Diff(wantFiles, layerFiles(t, img)); diff != "" {
		t.Errorf("layer files (-want +got):\n%s", diff)
	}
	again, err := image.BuildCatalog(dir, image.CatalogOptions{Labels: map[string]string{
		"org.opencontainers.image.source": "https://example.com/repo",
	}})
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2)

	_, err = image.BuildCatalog(t.TempDir(), image.CatalogOptions{})
	require.ErrorContains(t, err, "holds no .yaml")
}

func TestBuildRunLayoutAndPush(t *testing.T) {
	host := registry.Registry(t)
	out := filepath.Join(t.TempDir(), "oci", "demo")
	ref := host + "/demo-bundle:v1.0.0"
	res, err := image.Build{Kind: image.KindBundle, Dir: bundleDir(t), Layout: out, Tag: "v1.0.0", Push: ref}.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, host+"/demo-bundle@"+res.Digest, res.Pushed)

	// The OCI layout holds the image, under its tag.
	idx, err := layout.ImageIndexFromPath(out)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	require.Equal(t, res.Digest, im.Manifests[0].Digest.String())
	require.Equal(t, "v1.0.0", im.Manifests[0].Annotations["org.opencontainers.image.ref.name"])

	// Pulling the tag back gives the same image.
	r, err := image.ParseReference(ref)
	require.NoError(t, err)
	pulled, err := remote.Image(r)
	require.NoError(t, err)
	d, err := pulled.Digest()
	require.NoError(t, err)
	require.Equal(t, res.Digest, d.String())
	cf, err := pulled.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "demo", cf.Config.Labels["operators.operatorframework.io.bundle.package.v1"])
	require.Contains(t, layerFiles(t, pulled), "manifests/demo.crd.yaml")

	// Writing again replaces the layout.
	_, err = image.Build{Kind: image.KindBundle, Dir: bundleDir(t), Layout: out}.Run(context.Background())
	require.NoError(t, err)

	_, err = image.Build{Kind: image.KindBundle, Dir: bundleDir(t)}.Run(context.Background())
	require.ErrorContains(t, err, "nowhere to put the image")
}

func TestParseReference(t *testing.T) {
	tests := []struct {
		ref    string
		scheme string
	}{
		{ref: "127.0.0.1:5000/a:b", scheme: "http"},
		{ref: "localhost:5000/a:b", scheme: "http"},
		{ref: "[::1]:5000/a:b", scheme: "http"},
		{ref: "quay.io/a/b:c", scheme: "https"},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			r, err := image.ParseReference(tc.ref)
			require.NoError(t, err)
			require.Equal(t, tc.scheme, r.Context().Scheme())
		})
	}
}
