package network_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestServerPolicyAllowedFrom: without allowedFrom the server's port is
// open to every namespace; with it (written through v1alpha2, read through
// v1alpha1 from the annotation) only to the stack's namespace, the named
// namespaces and the namespaces carrying a listed label key. A LoadBalancer
// beside it, or an annotation that is not allowedFrom's JSON, is an error.
func TestServerPolicyAllowedFrom(t *testing.T) {
	open, err := serverPolicy(t, testutil.Stack("s"))
	require.NoError(t, err)
	require.Len(t, open.Spec.Ingress, 1)
	require.Empty(t, open.Spec.Ingress[0].From, "no allowedFrom: every namespace")

	through := func(networking *v1alpha2.NetworkingSpec) *v1alpha1.InferenceStack {
		t.Helper()
		v2 := &v1alpha2.InferenceStack{Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}, Networking: networking}}
		v2.Name, v2.Namespace = "s", "ns"
		var v1 v1alpha1.InferenceStack
		require.NoError(t, v1.ConvertFrom(v2))
		return &v1
	}
	narrowed, err := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{
		Namespaces: []string{"clients", "batch"}, Labels: []string{"team.example.com/llm"}}}))
	require.NoError(t, err)
	from := narrowed.Spec.Ingress[0].From
	require.Len(t, from, 4)
	require.NotNil(t, from[0].PodSelector, "the stack's own namespace")
	require.Nil(t, from[0].NamespaceSelector)
	require.Equal(t, map[string]string{corev1.LabelMetadataName: "clients"}, from[1].NamespaceSelector.MatchLabels)
	require.Equal(t, map[string]string{corev1.LabelMetadataName: "batch"}, from[2].NamespaceSelector.MatchLabels)
	require.Equal(t, "team.example.com/llm", *from[3].NamespaceSelector.MatchExpressions[0].Key)
	require.Equal(t, metav1.LabelSelectorOpExists, *from[3].NamespaceSelector.MatchExpressions[0].Operator)
	require.Equal(t, int32(8321), narrowed.Spec.Ingress[0].Ports[0].Port.IntVal)

	every, err := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{Namespaces: []string{"*"}}}))
	require.NoError(t, err)
	require.Len(t, every.Spec.Ingress[0].From, 2)
	require.NotNil(t, every.Spec.Ingress[0].From[1].NamespaceSelector, `"*": every namespace`)
	require.Empty(t, every.Spec.Ingress[0].From[1].NamespaceSelector.MatchLabels)
	require.Empty(t, every.Spec.Ingress[0].From[1].NamespaceSelector.MatchExpressions)

	only, err := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{}}))
	require.NoError(t, err)
	require.Len(t, only.Spec.Ingress[0].From, 1, "allowedFrom: {} admits the stack's namespace alone")

	exposed := through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{Namespaces: []string{"clients"}}})
	exposed.Spec.Networking.Expose = ptr.To(true) // through v1alpha1, which has no rule about the annotation
	_, err = serverPolicy(t, exposed)
	require.ErrorContains(t, err, "set one or the other")

	bad := testutil.Stack("s", func(s *v1alpha1.InferenceStack) {
		s.Annotations = map[string]string{v1alpha2.SpecAnnotation: `{"networking": {"allowedFrom": {"namespaces": "clients"}}}`}
	})
	// The builders read the annotation through the conversion, which refuses
	// a value of the wrong type.
	_, err = bad.V1alpha2()
	require.ErrorContains(t, err, "annotation "+v1alpha2.SpecAnnotation)
}

// serverPolicy is the server's NetworkPolicy of stack, read as the
// reconciler does: through the stack's v1alpha2 conversion.
func serverPolicy(t *testing.T, stack *v1alpha1.InferenceStack) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	t.Helper()
	return network.ServerPolicy(stack, testutil.V1alpha2(t, stack))
}

// exposureOf is the exposure stack asks for, read through its v1alpha2
// conversion.
func exposureOf(t *testing.T, stack *v1alpha1.InferenceStack) (network.Exposure, error) {
	t.Helper()
	return network.ExposureOf(testutil.V1alpha2(t, stack))
}
