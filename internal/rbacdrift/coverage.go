package rbacdrift

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/inferencestack/inferencestack/operator/componentrbac"
)

// Needs say why a missing rule is needed.
const (
	// NeedWrite: the operator writes the object (server-side apply of a new
	// object is authorized as patch and create).
	NeedWrite = "write"
	// NeedGrant: a role grants the rule, and the operator does not hold
	// escalate on the role.
	NeedGrant = "grant"
	// NeedBind: a binding references a role the operator may not bind and
	// whose rules it does not know.
	NeedBind = "bind"
)

// Owner is what the operator holds.
type Owner struct {
	// ClusterRules are the rules of the ClusterRoles bound to the operator
	// by ClusterRoleBindings: they hold everywhere.
	ClusterRules []rbacv1.PolicyRule
	// NamespaceRules are the rules bound to the operator by RoleBindings in
	// Namespace (leader election). They count only for objects in Namespace:
	// the API server resolves a cluster-scoped request with cluster rules only.
	NamespaceRules []rbacv1.PolicyRule
	// Namespace is the operator's namespace.
	Namespace string
}

func (o Owner) rulesIn(namespace string) []rbacv1.PolicyRule {
	if namespace != "" && namespace == o.Namespace {
		return append(append([]rbacv1.PolicyRule{}, o.ClusterRules...), o.NamespaceRules...)
	}
	return o.ClusterRules
}

// ObjectResult says whether the operator may create one component object,
// and how.
type ObjectResult struct {
	// Builder is the function that built the object.
	Builder string `json:"builder"`
	// Object is "<Kind> [<namespace>/]<name>".
	Object string `json:"object"`
	// Covered is true when the API server will accept the object from the operator.
	Covered bool `json:"covered"`
	// Via says why its content is allowed: "rules" (the operator holds every
	// rule it grants), "escalate" or "bind".
	Via string `json:"via,omitempty"`
	// Needs are the rules the operator must hold for it, by the way of Via.
	Needs []rbacv1.PolicyRule `json:"needs"`
}

// Missing is one rule the operator lacks, broken down to one verb, one
// resource and at most one resource name (or one non-resource URL).
type Missing struct {
	// Builder and Object name the component object that needs it.
	Builder string `json:"builder"`
	Object  string `json:"object"`
	// Need is write, grant or bind.
	Need string `json:"need"`
	// Rule is the missing rule.
	Rule rbacv1.PolicyRule `json:"rule"`
	// Alternative is the other rule that would do instead (escalate or bind), if any.
	Alternative *rbacv1.PolicyRule `json:"alternative,omitempty"`
}

// Coverage checks that owner may create every object of objs, following the
// API server's escalation checks.
func Coverage(owner Owner, objs []componentrbac.Object) ([]ObjectResult, []Missing, error) {
	roles := map[string][]rbacv1.PolicyRule{} // "<Kind>/<namespace>/<name>" of the roles among objs
	for _, o := range objs {
		switch {
		case o.ClusterRole != nil:
			roles["ClusterRole//"+o.ClusterRole.Name] = o.ClusterRole.Rules
		case o.Role != nil:
			roles["Role/"+o.Role.Namespace+"/"+o.Role.Name] = o.Role.Rules
		}
	}
	var results []ObjectResult
	var missing []Missing
	for _, o := range objs {
		kind, resource, namespace, name, err := identify(o)
		if err != nil {
			return nil, nil, err
		}
		held := owner.rulesIn(namespace)
		res := ObjectResult{Builder: o.Builder, Object: describe(kind, namespace, name)}
		add := func(need string, rules []rbacv1.PolicyRule, alt *rbacv1.PolicyRule) {
			for _, r := range rules {
				missing = append(missing, Missing{Builder: o.Builder, Object: res.Object, Need: need, Rule: r, Alternative: alt})
			}
		}

		write := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{resource}, Verbs: []string{"create", "patch"}, ResourceNames: []string{name}}
		_, lacking := validation.Covers(held, []rbacv1.PolicyRule{write})
		add(NeedWrite, lacking, nil)
		res.Needs = append(res.Needs, write)
		ok := len(lacking) == 0

		switch kind {
		case "ClusterRole", "Role":
			var rules []rbacv1.PolicyRule
			aggregated := false
			if o.ClusterRole != nil {
				rules = slices.Clone(o.ClusterRole.Rules)
				aggregated = o.ClusterRole.AggregationRule != nil && len(o.ClusterRole.AggregationRule.ClusterRoleSelectors) > 0
			} else {
				rules = slices.Clone(o.Role.Rules)
			}
			escalate := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{resource}, Verbs: []string{"escalate"}, ResourceNames: []string{name}}
			if covers(held, escalate) {
				res.Via = "escalate"
				res.Needs = append(res.Needs, escalate)
				break
			}
			if aggregated {
				// An aggregation rule can gather anything: the API server asks for * on everything.
				rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
					rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}})
			}
			_, lacking := validation.Covers(held, rules)
			add(NeedGrant, lacking, &escalate)
			res.Needs = append(res.Needs, rules...)
			ok = ok && len(lacking) == 0
			res.Via = "rules"
		case "ClusterRoleBinding", "RoleBinding":
			ref := roleRef(o)
			refResource := "clusterroles"
			if ref.Kind == "Role" {
				refResource = "roles"
			}
			bind := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{refResource}, Verbs: []string{"bind"}, ResourceNames: []string{ref.Name}}
			if covers(held, bind) {
				res.Via = "bind"
				res.Needs = append(res.Needs, bind)
				break
			}
			refNamespace := ""
			if ref.Kind == "Role" {
				refNamespace = namespace
			}
			rules, known := roles[ref.Kind+"/"+refNamespace+"/"+ref.Name]
			if !known {
				// Not a component role: its rules are unknown here, so only bind is sure to work.
				add(NeedBind, []rbacv1.PolicyRule{bind}, nil)
				res.Needs = append(res.Needs, bind)
				ok = false
				break
			}
			_, lacking := validation.Covers(held, rules)
			add(NeedGrant, lacking, &bind)
			res.Needs = append(res.Needs, rules...)
			ok = ok && len(lacking) == 0
			res.Via = "rules"
		}
		res.Covered = ok
		results = append(results, res)
	}
	return results, missing, nil
}

func covers(held []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	ok, _ := validation.Covers(held, []rbacv1.PolicyRule{r})
	return ok
}

func identify(o componentrbac.Object) (kind, resource, namespace, name string, err error) {
	switch {
	case o.ClusterRole != nil:
		return "ClusterRole", "clusterroles", "", o.ClusterRole.Name, nil
	case o.Role != nil:
		return "Role", "roles", o.Role.Namespace, o.Role.Name, nil
	case o.ClusterRoleBinding != nil:
		return "ClusterRoleBinding", "clusterrolebindings", "", o.ClusterRoleBinding.Name, nil
	case o.RoleBinding != nil:
		return "RoleBinding", "rolebindings", o.RoleBinding.Namespace, o.RoleBinding.Name, nil
	}
	return "", "", "", "", fmt.Errorf("component object from %s holds no RBAC object", o.Builder)
}

func roleRef(o componentrbac.Object) rbacv1.RoleRef {
	if o.ClusterRoleBinding != nil {
		return o.ClusterRoleBinding.RoleRef
	}
	return o.RoleBinding.RoleRef
}

func describe(kind, namespace, name string) string {
	if namespace != "" {
		return kind + " " + namespace + "/" + name
	}
	return kind + " " + name
}
