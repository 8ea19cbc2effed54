// Package componentrbac renders the RBAC objects the operator creates for its
// components, through the same builder functions the controller applies, so
// that the release tools can check them (bundlegen rbac check): it is the
// one list of them.
//
// Today it is empty: no component creates RBAC. The server's kubernetes
// auth checks each caller's token with a SelfSubjectReview sent with that
// token (llama_stack/core/server/auth_providers.py at v0.2.23 and v0.3.0),
// which every authenticated user may create, so the server's own
// ServiceAccount needs no permission. When a component starts creating a
// Role, ClusterRole or binding, add its builder to Objects.
package componentrbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
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

// Fixture is an InferenceStack that turns on every component that could
// create RBAC (spec.auth.kubernetes).
func Fixture() *v1alpha2.InferenceStack {
	return &v1alpha2.InferenceStack{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2.GroupVersion.String(), Kind: "InferenceStack"},
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-check", Namespace: "rbac-check"},
		Spec: v1alpha2.InferenceStackSpec{
			Distribution: v1alpha2.DistributionSpec{Name: v1alpha2.DistributionStarter},
			Auth:         &v1alpha2.AuthSpec{Kubernetes: &v1alpha2.KubernetesAuthSpec{}},
		},
	}
}

// Objects renders the RBAC objects the operator creates for stack, in the
// order the controller applies them.
func Objects(*v1alpha2.InferenceStack) ([]Object, error) {
	return []Object{}, nil
}
