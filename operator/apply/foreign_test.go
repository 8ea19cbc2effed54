package apply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
)

// TestApplyNeverTakesOverAnotherObject: an object of the name the operator
// would write that its cache does not hold (the cache holds only the
// operator's objects) is read from the API server; when it is a user's (no
// managed-by label) or another owner's, Apply refuses with a ForeignError
// and writes nothing. The operator's own object, or none, is written.
func TestApplyNeverTakesOverAnotherObject(t *testing.T) {
	owner := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "inferencestack.io/v1alpha1", Kind: "InferenceStack", Name: "s", UID: uid, Controller: ptr.To(true)}}
	}
	managed := map[string]string{components.LabelManagedBy: components.ManagedBy}
	tests := []struct {
		name    string
		live    *corev1.ServiceAccount
		foreign bool
	}{
		{name: "none", live: nil},
		{name: "a user's", live: &corev1.ServiceAccount{}, foreign: true},
		{name: "a user's with an owner", live: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owner("uid-s")}}, foreign: true},
		{name: "another stack's", live: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Labels: managed, OwnerReferences: owner("uid-other")}}, foreign: true},
		{name: "ours, not cached yet", live: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Labels: managed, OwnerReferences: owner("uid-s")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, clientgoscheme.AddToScheme(s))
			server := fake.NewClientBuilder().WithScheme(s)
			if tc.live != nil {
				tc.live.Name, tc.live.Namespace = "s-prober", "ns"
				server = server.WithObjects(tc.live)
			}
			reader := server.Build()
			applied := 0
			cache := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
				Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
					applied++
					return nil
				},
			}).Build()
			a := &apply.Applier{Client: cache, Reader: reader}
			desired := corev1ac.ServiceAccount("s-prober", "ns").WithLabels(managed).
				WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("inferencestack.io/v1alpha1").
					WithKind("InferenceStack").WithName("s").WithUID("uid-s").WithController(true))
			_, _, err := apply.Apply(context.Background(), a, apply.ServiceAccount, desired)
			var fe *apply.ForeignError
			if tc.foreign {
				require.True(t, errors.As(err, &fe), "want a ForeignError, got %v", err)
				require.Contains(t, err.Error(), "ServiceAccount ns/s-prober exists and")
				require.Zero(t, applied, "nothing may be written")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1, applied)
		})
	}
}
