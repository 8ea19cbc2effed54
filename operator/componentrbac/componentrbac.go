// Package componentrbac renders the RBAC objects the operator creates for its
// components, through the same builder functions the controller applies, so
// that the release tools can check them (bundlegen rbac check): it is the
// one list of them.
//
// When a component starts creating a Role, ClusterRole or binding, add its
// builder to Objects.
package componentrbac

import (
	"encoding/json"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components/auth"
)

// Object is one RBAC object a component creates: exactly one of
// ClusterRole, Role, ClusterRoleBinding and RoleBinding is set.
type Object struct {
	// Builder names the function that built it, e.g. "auth.ClusterRole".
	Builder string `json:"builder"`

	ClusterRole        *rbacv1.ClusterRole        `json:"clusterRole,omitempty"`
	Role               *rbacv1.Role               `json:"role,omitempty"`
	ClusterRoleBinding *rbacv1.ClusterRoleBinding `json:"clusterRoleBinding,omitempty"`
	RoleBinding        *rbacv1.RoleBinding        `json:"roleBinding,omitempty"`
}

// Fixture is an InferenceStack that turns on every component that creates
// RBAC (spec.auth.kubernetes).
func Fixture() *v1alpha1.InferenceStack {
	return &v1alpha1.InferenceStack{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "InferenceStack"},
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-check", Namespace: "rbac-check"},
		Spec: v1alpha1.InferenceStackSpec{
			Distribution: v1alpha1.DistributionSpec{Name: v1alpha1.DistributionStarter},
			Auth:         &v1alpha1.AuthSpec{Kubernetes: &v1alpha1.KubernetesAuthSpec{}},
		},
	}
}

// Objects renders the RBAC objects the operator creates for stack, in the
// order the controller applies them.
func Objects(stack *v1alpha1.InferenceStack) ([]Object, error) {
	var cr rbacv1.ClusterRole
	if err := convert(auth.ClusterRole(stack), &cr); err != nil {
		return nil, fmt.Errorf("auth.ClusterRole: %w", err)
	}
	var crb rbacv1.ClusterRoleBinding
	if err := convert(auth.ClusterRoleBinding(stack), &crb); err != nil {
		return nil, fmt.Errorf("auth.ClusterRoleBinding: %w", err)
	}
	return []Object{
		{Builder: "auth.ClusterRole", ClusterRole: &cr},
		{Builder: "auth.ClusterRoleBinding", ClusterRoleBinding: &crb},
	}, nil
}

// convert turns an apply configuration into its typed object through JSON,
// the form server-side apply sends.
func convert(ac, obj any) error {
	data, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}
