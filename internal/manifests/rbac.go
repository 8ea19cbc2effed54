package manifests

import (
	"errors"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// RBAC is the RBAC of the operator's manifests.
type RBAC struct {
	ClusterRoles        []rbacv1.ClusterRole
	Roles               []rbacv1.Role
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	RoleBindings        []rbacv1.RoleBinding
}

// LoadRBAC reads the Roles, ClusterRoles and their bindings from the YAML
// files of dir; other kinds (ServiceAccount) are skipped. A rule the API
// server would refuse is an error naming the file, the role and the field.
func LoadRBAC(dir string) (RBAC, error) {
	docs, err := ReadDocuments(dir)
	if err != nil {
		return RBAC{}, fmt.Errorf("RBAC manifests: %w", err)
	}
	var r RBAC
	for _, d := range docs {
		switch d.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err = d.Decode(&o); err == nil {
				err = checkRules(d.File, d.Kind, o.Name, o.Rules, false)
			}
			r.ClusterRoles = append(r.ClusterRoles, o)
		case "Role":
			var o rbacv1.Role
			if err = d.Decode(&o); err == nil {
				err = checkRules(d.File, d.Kind, o.Name, o.Rules, true)
			}
			r.Roles = append(r.Roles, o)
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			err = d.Decode(&o)
			r.ClusterRoleBindings = append(r.ClusterRoleBindings, o)
		case "RoleBinding":
			var o rbacv1.RoleBinding
			err = d.Decode(&o)
			r.RoleBindings = append(r.RoleBindings, o)
		}
		if err != nil {
			return RBAC{}, err
		}
	}
	if !slices.ContainsFunc(docs, func(d Document) bool { return d.Kind == "ClusterRole" || d.Kind == "Role" }) {
		return RBAC{}, fmt.Errorf("RBAC manifests in %s: no Role or ClusterRole: run `make manifests` to generate role.yaml", dir)
	}
	return r, nil
}

// checkRules refuses the rules the API server refuses (its RBAC
// validation, ValidatePolicyRule in k8s.io/kubernetes pkg/apis/rbac/validation,
// which no importable module carries): a rule without verbs; a resource rule
// without apiGroups or resources; a rule on both resources and non-resource
// URLs; non-resource URLs in a namespaced Role.
func checkRules(file, kind, name string, rules []rbacv1.PolicyRule, namespaced bool) error {
	var errs []error
	for i, r := range rules {
		fail := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s %s: rules[%d].%s: %s; the API server refuses such a rule "+
				"(for role.yaml fix the +kubebuilder:rbac marker and run `make manifests`)", file, kind, name, i, field, fmt.Sprintf(format, args...)))
		}
		if len(r.Verbs) == 0 {
			fail("verbs", "empty: name at least one verb (get, list, create, ... or *)")
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				fail("nonResourceURLs", "a Role is namespaced and cannot grant non-resource URLs: move the rule to a ClusterRole")
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				fail("nonResourceURLs", "a rule cannot name both resources and non-resource URLs: split it in two")
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			fail("apiGroups", `empty: name at least one API group ("" for the core group)`)
		}
		if len(r.Resources) == 0 {
			fail("resources", "empty: name at least one resource")
		}
	}
	return errors.Join(errs...)
}
