package rbac

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/internal/rbacdrift"
)

const repo = "../../.."

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCmd()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), err
}

func checkArgs(rbacDir string, extra ...string) []string {
	return append([]string{"check", "--rbac", rbacDir,
		"--source", repo + "/operator/internal", "--applied-kinds", repo + "/operator/apply/kinds.go",
		"--releases", repo + "/channels/releases", "--bundles", "."}, extra...) // a folder without bundles
}

// drifted copies the repository's RBAC manifests with patch on events
// removed: the release's bundles, made from the real role.yaml, are then
// stale against it.
func drifted(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(repo + "/operator/config/rbac")
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(repo, "operator/config/rbac", e.Name()))
		require.NoError(t, err)
		if e.Name() == "role.yaml" {
			before := string(data)
			data = []byte(strings.Replace(before, "  - events\n  verbs:\n  - create\n  - patch\n", "  - events\n  verbs:\n  - create\n", 1))
			require.NotEqual(t, before, string(data), "role.yaml changed shape: fix the test's drift")
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644))
	}
	return dir
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		assertion require.ErrorAssertionFunc
		want      []string
	}{
		{
			name:      "the repository's RBAC",
			args:      checkArgs(repo + "/operator/config/rbac"),
			assertion: require.NoError,
			want: []string{
				"note: no bundle for release ",
				"rbac check: the operator's RBAC covers its components; release ",
			},
		},
		{
			name:      "patch on events removed: the release's bundles are stale",
			args:      nil, // set below: needs t
			assertion: require.Error,
			want: []string{
				"inferencestack-operator.clusterserviceversion.yaml spec.install.spec.clusterPermissions: stale: differ from the ClusterRoles bound to inferencestack-operator-v4",
				"(the bundle grants, the RBAC manifests do not: inferencestack-operator-v4: apiGroups=events.k8s.io resources=events verbs=patch)",
				"rbac check: 0 missing rule(s), 1 stale bundle field(s)",
			},
		},
		{
			name:      "the same drift, release 1.0.0 published: frozen, not stale",
			args:      nil, // set below: needs t
			assertion: require.NoError,
			want: []string{
				"note: release 1.0.0 is published (",
				"its bundles are frozen as channels/published.sum records them (`bundlegen bundle --check` checks that) and are not compared with ",
				"rbac check: the operator's RBAC covers its components; release 1.0.0 is published: its bundles are frozen, not compared",
			},
		},
		{
			name:      "bad output format",
			args:      checkArgs(repo+"/operator/config/rbac", "-o", "yaml"),
			assertion: require.Error,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = checkArgs(drifted(t), "--bundles", repo+"/bundle")
			}
			if strings.Contains(tc.name, "published") {
				args = append(args, "--version", "1.0.0", "--releases", publishedReleases(t, "1.0.0"))
			}
			out, err := run(t, args...)
			tc.assertion(t, err)
			if err != nil {
				out += err.Error()
			}
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	out, err := run(t, checkArgs(drifted(t), "--bundles", repo+"/bundle", "-o", "json")...)
	require.ErrorContains(t, err, "1 stale bundle field(s)")
	var r rbacdrift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Empty(t, r.Missing, "no component creates RBAC, so none of its rules can be missing")
	require.NotNil(t, r.Objects, "objects is a list, empty when no component creates RBAC")
	require.Len(t, r.Stale, 1)
	require.Equal(t, "spec.install.spec.clusterPermissions", r.Stale[0].Field)
}

// publishedReleases copies the repository's release inputs with version
// published.
func publishedReleases(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(repo + "/channels/releases")
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(repo, "channels/releases", e.Name()))
		require.NoError(t, err)
		if e.Name() == version+".yaml" {
			data = append(data, "published: true\n"...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644))
	}
	return dir
}
