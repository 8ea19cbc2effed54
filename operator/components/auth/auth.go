// Package auth is the auth component: with spec.auth.kubernetes, the
// ClusterRole and ClusterRoleBinding that let the server's ServiceAccount
// create TokenReviews and SubjectAccessReviews. They are cluster-scoped, so
// no owner reference can remove them: switching auth off removes them here,
// and the controller's finalizer removes them with the stack (Cleanup).
package auth

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// Name is the name of the stack's ClusterRole and ClusterRoleBinding; it
// holds the namespace, since cluster-scoped names are shared by all.
func Name(stack *v1alpha1.InferenceStack) string {
	return "inferencestack-auth-" + stack.Namespace + "-" + stack.Name
}

// Rules are what the server needs to authenticate and authorize callers
// against the cluster.
func Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
}

func labels(stack *v1alpha1.InferenceStack) map[string]string {
	l := components.Labels(stack, components.ComponentServer)
	l[components.LabelStackNamespace] = stack.Namespace
	return l
}

// ClusterRole grants Rules.
func ClusterRole(stack *v1alpha1.InferenceStack) *rbacv1ac.ClusterRoleApplyConfiguration {
	cr := rbacv1ac.ClusterRole(Name(stack)).WithLabels(labels(stack))
	for _, r := range Rules() {
		cr.WithRules(rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...))
	}
	return cr
}

// ClusterRoleBinding binds ClusterRole to the server's ServiceAccount.
func ClusterRoleBinding(stack *v1alpha1.InferenceStack) *rbacv1ac.ClusterRoleBindingApplyConfiguration {
	return rbacv1ac.ClusterRoleBinding(Name(stack)).
		WithLabels(labels(stack)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(Name(stack))).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).
			WithName(server.ServiceAccountName(stack)).WithNamespace(stack.Namespace))
}

// Step runs the auth component.
var Step = components.Step{Name: "auth", Run: run}

func run(ctx context.Context, s *components.State) error {
	if !server.AuthEnabled(s.Stack) {
		return Cleanup(ctx, s.Client, s.Stack)
	}
	if _, err := apply.Apply(ctx, s.Client, apply.ClusterRole, ClusterRole(s.Stack)); err != nil {
		return err
	}
	_, err := apply.Apply(ctx, s.Client, apply.ClusterRoleBinding, ClusterRoleBinding(s.Stack))
	return err
}

// Cleanup deletes the stack's ClusterRoleBinding and ClusterRole, if any.
func Cleanup(ctx context.Context, c client.Client, stack *v1alpha1.InferenceStack) error {
	meta := metav1.ObjectMeta{Name: Name(stack)}
	_, err1 := apply.Delete(ctx, c, &rbacv1.ClusterRoleBinding{ObjectMeta: meta}, components.Owned(stack))
	_, err2 := apply.Delete(ctx, c, &rbacv1.ClusterRole{ObjectMeta: meta}, components.Owned(stack))
	return errors.Join(err1, err2)
}
