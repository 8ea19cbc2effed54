package csv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/inferencestack/inferencestack/internal/manifests"
)

// Permissions maps the RBAC of r bound to serviceAccount to a CSV's
// clusterPermissions (ClusterRoleBindings) and permissions (RoleBindings).
// Roles that no binding grants to serviceAccount are left out.
func Permissions(r manifests.RBAC, serviceAccount string) (cluster, namespaced []v1alpha1.StrategyDeploymentPermissions, err error) {
	var clusterRules, rules []rbacv1.PolicyRule
	for _, b := range sortedByName(r.ClusterRoleBindings, func(b rbacv1.ClusterRoleBinding) string { return b.Name }) {
		if !bindsServiceAccount(b.Subjects, serviceAccount) {
			continue
		}
		if b.RoleRef.Kind != "ClusterRole" {
			return nil, nil, fmt.Errorf("ClusterRoleBinding %s: roleRef.kind is %q, want ClusterRole", b.Name, b.RoleRef.Kind)
		}
		role, ok := find(r.ClusterRoles, func(c rbacv1.ClusterRole) bool { return c.Name == b.RoleRef.Name })
		if !ok {
			return nil, nil, fmt.Errorf("ClusterRoleBinding %s: ClusterRole %q is not among the RBAC manifests: "+
				"run `make manifests` to generate role.yaml, or fix roleRef.name", b.Name, b.RoleRef.Name)
		}
		clusterRules = append(clusterRules, role.Rules...)
	}
	for _, b := range sortedByName(r.RoleBindings, func(b rbacv1.RoleBinding) string { return b.Name }) {
		if !bindsServiceAccount(b.Subjects, serviceAccount) {
			continue
		}
		switch b.RoleRef.Kind {
		case "Role":
			role, ok := find(r.Roles, func(c rbacv1.Role) bool { return c.Name == b.RoleRef.Name })
			if !ok {
				return nil, nil, fmt.Errorf("RoleBinding %s: Role %q is not among the RBAC manifests: fix roleRef.name", b.Name, b.RoleRef.Name)
			}
			rules = append(rules, role.Rules...)
		case "ClusterRole":
			role, ok := find(r.ClusterRoles, func(c rbacv1.ClusterRole) bool { return c.Name == b.RoleRef.Name })
			if !ok {
				return nil, nil, fmt.Errorf("RoleBinding %s: ClusterRole %q is not among the RBAC manifests: fix roleRef.name", b.Name, b.RoleRef.Name)
			}
			rules = append(rules, role.Rules...)
		default:
			return nil, nil, fmt.Errorf("RoleBinding %s: roleRef.kind %q is neither Role nor ClusterRole", b.Name, b.RoleRef.Kind)
		}
	}
	if len(clusterRules) > 0 {
		cluster = []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: serviceAccount, Rules: clusterRules}}
	}
	if len(rules) > 0 {
		namespaced = []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: serviceAccount, Rules: rules}}
	}
	if cluster == nil && namespaced == nil {
		return nil, nil, fmt.Errorf("no RoleBinding or ClusterRoleBinding grants a role to ServiceAccount %q: "+
			"add operator/config/rbac/role_binding.yaml", serviceAccount)
	}
	return cluster, namespaced, nil
}

func bindsServiceAccount(subjects []rbacv1.Subject, name string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Name == name
	})
}

func find[T any](items []T, match func(T) bool) (T, bool) {
	if i := slices.IndexFunc(items, match); i >= 0 {
		return items[i], true
	}
	var zero T
	return zero, false
}

func sortedByName[T any](items []T, name func(T) string) []T {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	return out
}

// MajorServiceAccount is the name the bundles of one major version give the
// operator's ServiceAccount (name from the manager Deployment): name-v<major>.
//
// OLM v1 installs for all namespaces and turns every permissions and
// clusterPermissions entry into a ClusterRole named from a short prefix of
// "<csv>-<serviceaccount>" (18 characters for ours: the version is cut off)
// and a hash of the entry, that is of the ServiceAccount name and the rules.
// Two majors installed side by side would collide on each entry whose rules
// they share (leader election's, always) and OLM refuses the second install
// ("ClusterRole ... already exists ... and cannot be managed by
// operator-controller"); a ServiceAccount name per major keeps the hashes apart.
func MajorServiceAccount(name string, major uint64) string {
	return fmt.Sprintf("%s-v%d", name, major)
}

// WithServiceAccount returns perms with every entry's ServiceAccount set to name.
func WithServiceAccount(perms []v1alpha1.StrategyDeploymentPermissions, name string) []v1alpha1.StrategyDeploymentPermissions {
	out := slices.Clone(perms)
	for i := range out {
		out[i].ServiceAccountName = name
	}
	return out
}
