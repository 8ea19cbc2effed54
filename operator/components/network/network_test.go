package network_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestServerPolicyAllowedFrom: without allowedFrom the server's port is
// open to every namespace; with it (written through v1alpha2, read through
// v1alpha1 from the annotation) only to the stack's namespace, the named
// namespaces and the namespaces carrying a listed label key. A LoadBalancer
// beside it, or an annotation that is not allowedFrom's JSON, is an error.
func TestServerPolicyAllowedFrom(t *testing.T) {
	open := serverPolicy(t, testutil.Hub(testutil.Stack("s")))
	require.Len(t, open.Spec.Ingress, 1)
	require.Empty(t, open.Spec.Ingress[0].From, "no allowedFrom: every namespace")

	through := func(networking *v1alpha2.NetworkingSpec) *v1alpha2.InferenceStack {
		t.Helper()
		v2 := &v1alpha2.InferenceStack{Spec: v1alpha2.InferenceStackSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}, Networking: networking}}
		v2.Name, v2.Namespace = "s", "ns"
		return v2
	}
	narrowed := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{
		Namespaces: []string{"clients", "batch"}, Labels: []string{"team.example.com/llm"}}}))
	from := narrowed.Spec.Ingress[0].From
	require.Len(t, from, 4)
	require.NotNil(t, from[0].PodSelector, "the stack's own namespace")
	require.Nil(t, from[0].NamespaceSelector)
	require.Equal(t, map[string]string{corev1.LabelMetadataName: "clients"}, from[1].NamespaceSelector.MatchLabels)
	require.Equal(t, map[string]string{corev1.LabelMetadataName: "batch"}, from[2].NamespaceSelector.MatchLabels)
	require.Equal(t, "team.example.com/llm", *from[3].NamespaceSelector.MatchExpressions[0].Key)
	require.Equal(t, metav1.LabelSelectorOpExists, *from[3].NamespaceSelector.MatchExpressions[0].Operator)
	require.Equal(t, int32(8321), narrowed.Spec.Ingress[0].Ports[0].Port.IntVal)

	every := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{Namespaces: []string{"*"}}}))
	require.Len(t, every.Spec.Ingress[0].From, 2)
	require.NotNil(t, every.Spec.Ingress[0].From[1].NamespaceSelector, `"*": every namespace`)
	require.Empty(t, every.Spec.Ingress[0].From[1].NamespaceSelector.MatchLabels)
	require.Empty(t, every.Spec.Ingress[0].From[1].NamespaceSelector.MatchExpressions)

	only := serverPolicy(t, through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{}}))
	require.Len(t, only.Spec.Ingress[0].From, 1, "allowedFrom: {} admits the stack's namespace alone")

	// A LoadBalancer beside it: the v1alpha2 CRD's rule (the API server's,
	// or the operator's on a v1alpha1 read), not the builder's.
	exposed := through(&v1alpha2.NetworkingSpec{AllowedFrom: &v1alpha2.AllowedFromSpec{Namespaces: []string{"clients"}}})
	exposed.Spec.Networking.Expose = ptr.To(true)
	require.ErrorContains(t, validation.Validate(exposed).ToAggregate(), "spec.networking")
}

// TestServerPolicyAdmitsTheOperator: whatever allowedFrom says (nothing
// beyond the stack's namespace, other namespaces, label keys, a Route), the
// narrowed policy also admits the operator's pods, by one peer that selects
// its namespace and its pods' labels together, on the server's port only;
// without allowedFrom the policy stays open to every namespace (a peer
// would narrow it to the operator). Without an operator peer (out of
// cluster) there is none.
func TestServerPolicyAdmitsTheOperator(t *testing.T) {
	operator, err := network.NewOperatorPeer("inferencestack-system", network.DefaultOperatorPodLabels)
	require.NoError(t, err)
	operatorPeer := func(t *testing.T, p networkingv1ac.NetworkPolicyPeerApplyConfiguration) {
		t.Helper()
		require.Equal(t, map[string]string{corev1.LabelMetadataName: "inferencestack-system"}, p.NamespaceSelector.MatchLabels, "the operator's namespace")
		require.Empty(t, p.NamespaceSelector.MatchExpressions)
		require.Equal(t, network.DefaultOperatorPodLabels, p.PodSelector.MatchLabels, "and its pods alone (both selectors in one peer)")
		require.Empty(t, p.PodSelector.MatchExpressions)
		require.Nil(t, p.IPBlock)
	}
	for _, tc := range []struct {
		name       string
		networking string
		// others is how many peers allowedFrom (and a Route) make.
		others int
	}{
		{name: "own namespace only", networking: `{"allowedFrom": {}}`, others: 1},
		{name: "named namespaces", networking: `{"allowedFrom": {"namespaces": ["clients", "batch"]}}`, others: 3},
		{name: "label keys", networking: `{"allowedFrom": {"labels": ["team.example.com/llm"]}}`, others: 2},
		{name: "every namespace", networking: `{"allowedFrom": {"namespaces": ["*"]}}`, others: 2},
		{name: "with a Route", networking: `{"route": {}, "allowedFrom": {"namespaces": ["clients"]}}`, others: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack := testutil.Hub(testutil.Stack("s", testutil.WithNamespace("team-a"), withV2Networking(t, tc.networking)))
			policy := network.ServerPolicy(stack, operator)
			require.Len(t, policy.Spec.Ingress, 1, "one rule: the server's port")
			rule := policy.Spec.Ingress[0]
			require.Len(t, rule.Ports, 1)
			require.Equal(t, int32(8321), rule.Ports[0].Port.IntVal)
			require.Equal(t, corev1.ProtocolTCP, *rule.Ports[0].Protocol)
			require.Len(t, rule.From, tc.others+1)
			operatorPeer(t, rule.From[tc.others])

			without := network.ServerPolicy(stack, nil)
			require.Equal(t, rule.From[:tc.others], without.Spec.Ingress[0].From, "the operator's peer is added, nothing else changes")
		})
	}

	open := testutil.Hub(testutil.Stack("s", withV2Networking(t, `{"route": {}}`)))
	policy := network.ServerPolicy(open, operator)
	require.Empty(t, policy.Spec.Ingress[0].From, "no allowedFrom: every namespace, the operator's included")

	// The peer is the builder's copy: a later change of the caller's map
	// does not reach applied policies.
	labels := map[string]string{"app": "op"}
	mine, err := network.NewOperatorPeer("ops", labels)
	require.NoError(t, err)
	labels["app"] = "other"
	narrowed := testutil.Hub(testutil.Stack("s", withV2Networking(t, `{"allowedFrom": {}}`)))
	policy = network.ServerPolicy(narrowed, mine)
	require.Equal(t, map[string]string{"app": "op"}, policy.Spec.Ingress[0].From[1].PodSelector.MatchLabels)
}

// TestNewOperatorPeer: the operator's pods need both a namespace and
// labels, valid as Kubernetes has them.
func TestNewOperatorPeer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		namespace string
		labels    map[string]string
		assertion require.ErrorAssertionFunc
		want      string
	}{
		{name: "defaults", namespace: "inferencestack-system", labels: network.DefaultOperatorPodLabels, assertion: require.NoError},
		{name: "no namespace", labels: network.DefaultOperatorPodLabels, assertion: require.Error, want: "the namespace is empty"},
		{name: "bad namespace", namespace: "Ops_1", labels: network.DefaultOperatorPodLabels, assertion: require.Error, want: `namespace "Ops_1"`},
		{name: "no labels", namespace: "ops", assertion: require.Error, want: "no pod labels"},
		{name: "bad key", namespace: "ops", labels: map[string]string{"a b": "c"}, assertion: require.Error, want: `label key "a b"`},
		{name: "bad value", namespace: "ops", labels: map[string]string{"app": "a b"}, assertion: require.Error, want: `label app value "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, err := network.NewOperatorPeer(tc.namespace, tc.labels)
			tc.assertion(t, err)
			if err != nil {
				require.ErrorContains(t, err, tc.want)
				require.Nil(t, peer)
				return
			}
			require.Equal(t, tc.namespace, peer.Namespace)
			require.Equal(t, tc.labels, peer.PodLabels)
		})
	}
}

// TestDefaultOperatorPodLabelsSelectTheManager: the labels the operator
// admits by default are its manager Deployment's selector (which every
// pod of it carries, and no rollout changes), and the Deployment gives
// the operator its namespace through the downward API; bundlegen copies
// both into every release's CSV.
func TestDefaultOperatorPodLabelsSelectTheManager(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	require.NoError(t, err)
	var dep appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(data, &dep))
	require.Equal(t, network.DefaultOperatorPodLabels, dep.Spec.Selector.MatchLabels, "the manager Deployment's selector")
	for k, v := range network.DefaultOperatorPodLabels {
		require.Equal(t, v, dep.Spec.Template.Labels[k], "the pod template's label %s", k)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
	require.GreaterOrEqual(t, i, 0, "the manager container sets POD_NAMESPACE")
	require.NotNil(t, c.Env[i].ValueFrom)
	require.Equal(t, "metadata.namespace", c.Env[i].ValueFrom.FieldRef.FieldPath)
}

// serverPolicy is the server's NetworkPolicy of stack, read as the
// reconciler does: through the stack's v1alpha2 conversion (no operator
// peer: TestServerPolicyAdmitsTheOperator has it).
func serverPolicy(t *testing.T, stack *v1alpha2.InferenceStack) *networkingv1ac.NetworkPolicyApplyConfiguration {
	t.Helper()
	return network.ServerPolicy(stack, nil)
}

// exposureOf is the exposure stack asks for.
func exposureOf(t *testing.T, stack *v1alpha2.InferenceStack) network.Exposure {
	t.Helper()
	return network.ExposureOf(stack)
}
