package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{"testdata/widgets.yaml"},
		GarbageCollector:  true,
	}, &env)
}

func widget(name string, min, max int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("testenv.inferencestack.io/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	u.Object["spec"] = map[string]any{"min": min, "max": max}
	return u
}

func TestCELRuleIsEnforced(t *testing.T) {
	ctx := context.Background()

	err := env.Client.Create(ctx, widget("inverted", 5, 1))
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	require.ErrorContains(t, err, "spec.min must not be greater than spec.max")

	require.NoError(t, env.Client.Create(ctx, widget("ordered", 1, 5)))
}

func TestOwnedObjectIsGarbageCollected(t *testing.T) {
	ctx := context.Background()
	owner := widget("owner", 0, 1)
	require.NoError(t, env.Client.Create(ctx, owner))

	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "testenv.inferencestack.io/v1", Kind: "Widget",
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
		}},
	}}
	require.NoError(t, env.Client.Create(ctx, owned))

	require.NoError(t, env.Client.Delete(ctx, owner))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	require.NoError(t, err, "the owned ConfigMap was not garbage-collected after its owner was deleted")
}
