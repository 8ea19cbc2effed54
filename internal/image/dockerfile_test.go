package image_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/image"
)

// TestDockerfileCatalogIsEquivalent keeps Dockerfile.catalog, for users with
// Docker, equivalent to BuildCatalog: scratch, the catalog directory copied to
// ConfigsDir, and the same labels.
func TestDockerfileCatalogIsEquivalent(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile.catalog"))
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

// TestDockerfileOperatorIsEquivalent keeps the final stage of Dockerfile,
// for users with Docker, equivalent to the operator image `bundlegen image
// operator` builds: the manager at OperatorPath, run as the same non-root
// user, as its entrypoint; and the manager Deployment runs that path.
func TestDockerfileOperatorIsEquivalent(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(t, err)
	var final []string // instructions of the last stage
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		final = append(final, line)
	}
	img, err := image.BuildBinary(staticBinary(t), image.BinaryOptions{Path: image.OperatorPath})
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Contains(t, final, "USER "+cf.Config.User, "Dockerfile's final stage")
	require.Contains(t, final, `ENTRYPOINT ["`+strings.Join(cf.Config.Entrypoint, `", "`)+`"]`, "Dockerfile's final stage")
	require.True(t, slices.ContainsFunc(final, func(l string) bool {
		return strings.HasPrefix(l, "COPY ") && strings.HasSuffix(l, " "+image.OperatorPath)
	}), "Dockerfile's final stage does not COPY the manager to %s: %v", image.OperatorPath, final)

	manager, err := os.ReadFile(filepath.Join("..", "..", "operator", "config", "manager", "manager.yaml"))
	require.NoError(t, err)
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name    string   `json:"name"`
						Command []string `json:"command"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(manager, &dep))
	containers := dep.Spec.Template.Spec.Containers
	require.NotEmpty(t, containers, "manager.yaml")
	require.Equal(t, []string{image.OperatorPath}, containers[0].Command, "the command of operator/config/manager/manager.yaml")
}
