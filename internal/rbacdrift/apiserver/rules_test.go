package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/internal/manifests"
)

// TestRulesAgainstAPIServer: the RBAC manifests the release tools load
// (manifests.LoadRBAC, behind `bundlegen bundle` and `bundlegen rbac check`)
// refuse exactly the rules the API server refuses. Each case's role is
// written to a file and loaded, and created on the API server (dry run).
func TestRulesAgainstAPIServer(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	tests := []struct {
		name string
		// namespaced makes the role a Role in namespace default, else a ClusterRole.
		namespaced bool
		rule       rbacv1.PolicyRule
		// wantField is the field the refusal names; empty means accepted.
		wantField string
	}{
		{name: "resource rule", rule: rule("apps", "deployments", []string{"get"})},
		{name: "core group", rule: rule("", "configmaps", []string{"*"})},
		{name: "non-resource URL", rule: url("/healthz", "get")},
		{name: "namespaced resource rule", namespaced: true, rule: rule("", "configmaps", []string{"get"})},
		{name: "verbs: []", rule: rule("apps", "deployments", []string{}), wantField: "rules[0].verbs"},
		{name: "no verbs in a Role", namespaced: true, rule: rule("", "configmaps", nil), wantField: "rules[0].verbs"},
		{name: "apiGroups: []", rule: rbacv1.PolicyRule{Resources: []string{"pods"}, Verbs: []string{"get"}}, wantField: "rules[0].apiGroups"},
		{name: "resources: []", rule: rbacv1.PolicyRule{APIGroups: []string{""}, Verbs: []string{"get"}}, wantField: "rules[0].resources"},
		{name: "non-resource URL in a Role", namespaced: true, rule: url("/healthz", "get"), wantField: "rules[0].nonResourceURLs"},
		{name: "resources and non-resource URLs", rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"},
			NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}, wantField: "rules[0].nonResourceURLs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "rules-proof"}
			var obj any
			var serverErr error
			dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			if tc.namespaced {
				meta.Namespace = "default"
				role := &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta, Rules: []rbacv1.PolicyRule{tc.rule}}
				obj = role
				_, serverErr = cs.RbacV1().Roles("default").Create(ctx, role, dryRun)
			} else {
				role := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta, Rules: []rbacv1.PolicyRule{tc.rule}}
				obj = role
				_, serverErr = cs.RbacV1().ClusterRoles().Create(ctx, role, dryRun)
			}
			data, err := yaml.Marshal(obj)
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "role.yaml"), data, 0o644))
			_, loadErr := manifests.LoadRBAC(dir)

			if tc.wantField == "" {
				require.NoError(t, serverErr, "the API server refuses the rule")
				require.NoError(t, loadErr, "the API server accepts the rule")
				return
			}
			require.Error(t, serverErr, "the API server accepts the rule")
			require.ErrorContains(t, serverErr, tc.wantField)
			require.Error(t, loadErr, "the API server refuses the rule: %v", serverErr)
			require.ErrorContains(t, loadErr, filepath.Join(dir, "role.yaml")+": ")
			require.ErrorContains(t, loadErr, " rules-proof: "+tc.wantField+": ")
		})
	}
}
