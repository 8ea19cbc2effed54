package validate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// permissionDiff names the rules that differ between the permissions the
// RBAC manifests give (want) and those a CSV carries (have), one verb on one
// resource (or URL) each, as the API server's escalation check breaks rules
// down: "the RBAC manifests grant, the bundle lacks: ...; the bundle grants,
// the RBAC manifests do not: ...". Empty when they grant the same, which
// can still differ in how the rules are written.
func permissionDiff(want, have []v1alpha1.StrategyDeploymentPermissions) string {
	atoms := func(perms []v1alpha1.StrategyDeploymentPermissions) []string {
		var out []string
		for _, p := range perms {
			for _, r := range p.Rules {
				for _, a := range validation.BreakdownRule(r) {
					out = append(out, p.ServiceAccountName+": "+ruleString(a))
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	w, h := atoms(want), atoms(have)
	added := slices.DeleteFunc(slices.Clone(w), func(s string) bool { _, found := slices.BinarySearch(h, s); return found })
	removed := slices.DeleteFunc(slices.Clone(h), func(s string) bool { _, found := slices.BinarySearch(w, s); return found })
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "the RBAC manifests grant, the bundle lacks: "+strings.Join(added, "; "))
	}
	if len(removed) > 0 {
		parts = append(parts, "the bundle grants, the RBAC manifests do not: "+strings.Join(removed, "; "))
	}
	if len(parts) == 0 {
		return "they grant the same verbs but are written differently (rule order or grouping)"
	}
	return strings.Join(parts, "; and ")
}

// ruleString renders one rule like kubectl describe: group, resources,
// names or URLs, verbs.
func ruleString(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return fmt.Sprintf("nonResourceURLs=%s verbs=%s", strings.Join(r.NonResourceURLs, ","), strings.Join(r.Verbs, ","))
	}
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		groups[i] = cmp.Or(g, `""`)
	}
	s := fmt.Sprintf("apiGroups=%s resources=%s", strings.Join(groups, ","), strings.Join(r.Resources, ","))
	if len(r.ResourceNames) > 0 {
		s += " resourceNames=" + strings.Join(r.ResourceNames, ",")
	}
	return s + " verbs=" + strings.Join(r.Verbs, ",")
}
