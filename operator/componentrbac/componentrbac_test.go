package componentrbac

import (
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/inferencestack/inferencestack/operator/components/auth"
)

func TestObjects(t *testing.T) {
	stack := Fixture()
	objs, err := Objects(stack)
	require.NoError(t, err)
	require.Len(t, objs, 2)

	cr := objs[0].ClusterRole
	require.NotNil(t, cr)
	require.Equal(t, "ClusterRole", cr.Kind)
	require.Equal(t, auth.Name(stack), cr.Name)
	require.Equal(t, auth.Rules(), cr.Rules)

	crb := objs[1].ClusterRoleBinding
	require.NotNil(t, crb)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: auth.Name(stack)}, crb.RoleRef)
	require.Len(t, crb.Subjects, 1)
	require.Equal(t, stack.Namespace, crb.Subjects[0].Namespace)
}
