package auth_test

import (
	"testing"

	"github.com/inferencestack/inferencestack/operator/components/auth"
	"github.com/inferencestack/inferencestack/operator/internal/testutil"
)

func TestBindingGrantsTheRoleToTheServer(t *testing.T) {
	stack := testutil.Stack("s", testutil.WithNamespace("team-a"), testutil.WithKubernetesAuth())
	cr, crb := auth.ClusterRole(stack), auth.ClusterRoleBinding(stack)
	if *cr.Name != "inferencestack-auth-team-a-s" || *crb.RoleRef.Name != *cr.Name {
		t.Errorf("ClusterRole %s, binding refers to %s", *cr.Name, *crb.RoleRef.Name)
	}
	if s := crb.Subjects[0]; *s.Name != "s-server" || *s.Namespace != "team-a" {
		t.Errorf("subject %s/%s, want the server's ServiceAccount team-a/s-server", *s.Namespace, *s.Name)
	}
	if len(cr.Rules) != len(auth.Rules()) {
		t.Errorf("%d rules, want %d", len(cr.Rules), len(auth.Rules()))
	}
	if len(cr.OwnerReferences) != 0 {
		t.Error("a cluster-scoped object refers to a namespaced owner: garbage collection would delete it")
	}
}
