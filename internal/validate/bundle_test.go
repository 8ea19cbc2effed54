package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrs "github.com/operator-framework/api/pkg/validation/errors"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const golden = "testdata/bundle"

func copyBundle(t *testing.T, pkg string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), pkg)
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(golden, pkg, "1.0.0"))))
	return dir
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

func TestBundle(t *testing.T) {
	const csvFile = "manifests/inferencestack-operator.clusterserviceversion.yaml"
	const pinFile = "manifests/inferencestack-operator-pin_v1_configmap.yaml"
	tests := []struct {
		name           string
		pkg            string
		rbac           string
		requireDigests bool
		edit           func(t *testing.T, dir string)
		want           []Finding // matched on severity, source, file, field and a message substring
	}{
		{name: "crds bundle is valid", pkg: "inferencestack-crds"},
		{name: "operator bundle is valid", pkg: "inferencestack-operator", rbac: "testdata/rbac"},
		{
			name: "image missing from relatedImages", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, csvFile), "  - image: docker.io/llamastack/distribution-starter:", "  - image: docker.io/llamastack/other:")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile,
				Field: "spec.install.spec.deployments[0].spec.template.spec.containers[0].env[2].value", Message: "is not listed in spec.relatedImages"}},
		},
		{
			name: "pin differs from the Deployment", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, pinFile), "starter: docker.io/llamastack/distribution-starter:", "starter: docker.io/llamastack/distribution-postgres-demo:")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile,
				Field: "spec.install.spec.deployments[0].spec.template.spec.containers[0].env.RELATED_IMAGE_STARTER", Message: "the pin and the Deployment must agree"}},
		},
		{
			name: "image by tag: a warning naming image and fields", pkg: "inferencestack-operator",
			want: []Finding{{Severity: SeverityWarning, Source: "bundlegen", File: csvFile,
				Field:   "spec.install.spec.deployments[0].spec.template.spec.containers[0].env[2].value (RELATED_IMAGE_STARTER)",
				Message: "image docker.io/llamastack/distribution-starter:0.2.23 is named by tag, not digest (also in spec.relatedImages[3].image)"}},
		},
		{
			name: "image by tag under --require-digests: an error", pkg: "inferencestack-operator", requireDigests: true,
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile, Field: "metadata.annotations.containerImage",
				Message: "image quay.io/inferencestack/inferencestack-operator:v1.0.0 is named by tag, not digest (--require-digests)"}},
		},
		{
			name: "LLAMA_STACK_VERSION differs from the pin", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, csvFile), "- name: LLAMA_STACK_VERSION\n                  value: 0.2.23", "- name: LLAMA_STACK_VERSION\n                  value: 0.3.0")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile,
				Field: "spec.install.spec.deployments[0].spec.template.spec.containers[0].env.LLAMA_STACK_VERSION", Message: `is "0.3.0", but the pin says llamaStackVersion "0.2.23"`}},
		},
		{
			name: "LLAMA_STACK_VERSION missing", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, csvFile), "                - name: LLAMA_STACK_VERSION\n                  value: 0.2.23\n", "")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile,
				Field: "spec.install.spec.deployments[0].spec.template.spec.containers[0].env", Message: "has no LLAMA_STACK_VERSION"}},
		},
		{
			name: "pin without llamaStackVersion", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, pinFile), "    llamaStackVersion: 0.2.23\n", "")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: pinFile, Field: "data.versions.yaml.llamaStackVersion", Message: "is empty"}},
		},
		{
			name: "pin ConfigMap missing", pkg: "inferencestack-operator",
			edit: func(t *testing.T, dir string) { require.NoError(t, os.Remove(filepath.Join(dir, pinFile))) },
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: "manifests/", Message: "no ConfigMap inferencestack-operator-pin"}},
		},
		{
			name: "permissions differ from role.yaml", pkg: "inferencestack-operator", rbac: "testdata/rbac",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, csvFile), "          - inferencestacks/status\n", "")
			},
			want: []Finding{{Severity: SeverityError, Source: "bundlegen", File: csvFile, Field: "spec.install.spec.clusterPermissions", Message: "the RBAC manifests grant, the bundle lacks: inferencestack-operator-v1: apiGroups=inferencestack.io resources=inferencestacks/status verbs="}},
		},
		{
			name: "CSV validator error", pkg: "inferencestack-crds",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "manifests/inferencestack-crds.clusterserviceversion.yaml"), "  displayName: Inference Stack CRDs\n", "")
			},
			want: []Finding{{Severity: SeverityError, Source: "operator-framework/api", File: "manifests/inferencestack-crds.clusterserviceversion.yaml", Field: "Spec.DisplayName", Message: "required field missing"}},
		},
		{
			name: "annotations missing", pkg: "inferencestack-crds",
			edit: func(t *testing.T, dir string) {
				edit(t, filepath.Join(dir, "metadata/annotations.yaml"), "  operators.operatorframework.io.bundle.channels.v1: stable-v1\n", "")
			},
			want: []Finding{{Severity: SeverityError, Source: "operator-registry", File: "metadata/annotations.yaml", Message: `Missing annotation "operators.operatorframework.io.bundle.channels.v1"`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyBundle(t, tc.pkg)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			r, err := Bundle{Dir: dir, RBACDir: tc.rbac, RequireDigests: tc.requireDigests}.Run(context.Background())
			require.NoError(t, err)
			var b strings.Builder
			r.Print(&b)
			if len(tc.want) == 0 {
				require.False(t, r.HasErrors(), b.String())
				return
			}
			for _, w := range tc.want {
				found := false
				for _, f := range r.Findings {
					if f.Severity == w.Severity && f.Source == w.Source && f.File == w.File && f.Field == w.Field && strings.Contains(f.Message, w.Message) {
						found = true
					}
				}
				require.True(t, found, "want %s among:\n%s", w, b.String())
			}
		})
	}
}

// TestFindingsKeepTheirSubject: upstream findings that differ only in what
// they are about (four APIs without an example) stay four findings, each
// naming its API; identical ones are one.
func TestFindingsKeepTheirSubject(t *testing.T) {
	const csvFile = "manifests/demo.clusterserviceversion.yaml"
	files := map[fileKey]string{{"ClusterServiceVersion", "demo.v1.0.0"}: csvFile}
	var r Report
	for _, kind := range []string{"Alpha", "Beta", "Gamma", "Delta", "Alpha"} {
		gvk := schema.GroupVersionKind{Group: "demo.example.com", Version: "v1", Kind: kind}
		r.add(apiFinding(apierrs.WarnInvalidOperation("provided API should have an example annotation", gvk), "demo.v1.0.0", files))
	}
	// The same warning through operator-registry, which runs some of the
	// same validators: dropped as a repeat.
	r.add(registryFindings(apierrs.WarnInvalidOperation("provided API should have an example annotation", schema.GroupVersionKind{Group: "demo.example.com", Version: "v1", Kind: "Beta"}), "manifests/", files)...)
	r.sort()
	var lines []string
	for _, f := range r.Findings {
		lines = append(lines, f.String())
	}
	require.Equal(t, []string{
		"warning [operator-framework/api] " + csvFile + ": provided API should have an example annotation [Alpha demo.example.com/v1]",
		"warning [operator-framework/api] " + csvFile + ": provided API should have an example annotation [Beta demo.example.com/v1]",
		"warning [operator-framework/api] " + csvFile + ": provided API should have an example annotation [Delta demo.example.com/v1]",
		"warning [operator-framework/api] " + csvFile + ": provided API should have an example annotation [Gamma demo.example.com/v1]",
	}, lines)
}
