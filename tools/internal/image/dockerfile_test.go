package image_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/tools/internal/image"
)

// TestDockerfileCatalogIsEquivalent keeps Dockerfile.catalog, for users with
// Docker, equivalent to BuildCatalog: scratch, the catalog directory copied to
// ConfigsDir, and the same labels.
func TestDockerfileCatalogIsEquivalent(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "..", "Dockerfile.catalog"))
	require.NoError(t, err)
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	require.NoError(t, sc.Err())

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"demo/catalog.yaml": "schema: olm.package\nname: demo\n"})
	img, err := image.BuildCatalog(dir, image.CatalogOptions{})
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	want := []string{"FROM scratch", "COPY catalog " + image.ConfigsDir}
	for k, v := range cf.Config.Labels {
		want = append(want, "LABEL "+k+"="+v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Dockerfile.catalog instructions (-BuildCatalog +Dockerfile.catalog):\n%s", diff)
	}
}
