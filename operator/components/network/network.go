// Package network is the network component: NetworkPolicies that admit only
// the server's port to the server pods (from the namespaces the stack
// allows, and from the operator's own pods) and only the server's traffic to the cache's PostgreSQL.
package network

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// ServerPolicyName is the server's NetworkPolicy.
func ServerPolicyName(stack metav1.Object) string { return stack.GetName() + "-server" }

// CachePolicyName is the cache's NetworkPolicy.
func CachePolicyName(stack metav1.Object) string { return stack.GetName() + "-cache" }

// OperatorPeer is the operator's own pods, as the server's NetworkPolicy
// admits them: the namespace they run in and labels only they carry there
// (their Deployment's selector). The operator's server-status prober
// connects to each server's Service from these pods.
type OperatorPeer struct {
	Namespace string
	PodLabels map[string]string
}

// DefaultOperatorPodLabels are the labels of the operator's pods in its
// manager Deployment (operator/config/manager/manager.yaml): its selector,
// which no rollout changes.
var DefaultOperatorPodLabels = map[string]string{
	"app.kubernetes.io/name": "inferencestack-operator",
	"control-plane":          "controller-manager",
}

// NewOperatorPeer checks the operator's namespace and pod labels and
// returns them as a peer. Both are required: a namespace alone would admit
// every pod of the operator's namespace, labels alone every namespace's
// pods that carry them.
func NewOperatorPeer(namespace string, podLabels map[string]string) (*OperatorPeer, error) {
	var problems []string
	if namespace == "" {
		problems = append(problems, "the namespace is empty")
	} else if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("namespace %q: %s", namespace, strings.Join(errs, "; ")))
	}
	if len(podLabels) == 0 {
		problems = append(problems, "no pod labels")
	}
	for _, k := range slices.Sorted(maps.Keys(podLabels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("label key %q: %s", k, strings.Join(errs, "; ")))
		}
		if errs := validation.IsValidLabelValue(podLabels[k]); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("label %s value %q: %s", k, podLabels[k], strings.Join(errs, "; ")))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("the operator's pods for the servers' NetworkPolicies: %s", strings.Join(problems, ", "))
	}
	return &OperatorPeer{Namespace: namespace, PodLabels: maps.Clone(podLabels)}, nil
}

// ServerPolicy admits traffic to the server pods on the server's port only:
// from anywhere (clients reach it through its Service), or, when the stack
// sets networking.allowedFrom, only from pods of the stack's namespace, of the namespaces it names and of
// the namespaces carrying one of its label keys (and, with
// networking.route, of OpenShift's router namespaces), and from the
// operator's own pods (operator, when not nil: its namespace and pod labels
// together), whose prober reads the server's version and providers
// whatever allowedFrom says.
func ServerPolicy(stack *v1alpha2.InferenceStack, operator *OperatorPeer) *networkingv1ac.NetworkPolicyApplyConfiguration {
	var allowed *v1alpha2.AllowedFromSpec
	if n := stack.Spec.Networking; n != nil {
		allowed = n.AllowedFrom
	}
	rule := networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(networkingv1ac.NetworkPolicyPort().
			WithProtocol(corev1.ProtocolTCP).
			WithPort(intstr.FromInt32(runconfig.ServerPort)))
	if allowed != nil {
		// The stack's own namespace: a pod selector alone selects there.
		rule.WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()))
		for _, ns := range allowed.Namespaces {
			selector := metav1ac.LabelSelector() // "*": every namespace
			if ns != "*" {
				selector.WithMatchLabels(map[string]string{corev1.LabelMetadataName: ns})
			}
			rule.WithFrom(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(selector))
		}
		for _, key := range allowed.Labels {
			rule.WithFrom(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchExpressions(metav1ac.LabelSelectorRequirement().
					WithKey(key).WithOperator(metav1.LabelSelectorOpExists))))
		}
		if stack.Spec.Networking.Route != nil {
			// A Route's traffic comes from OpenShift's routers, whose
			// namespaces carry this label (as upstream's operator admits
			// them too).
			rule.WithFrom(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{RouterNamespaceLabel: RouterNamespaceValue})))
		}
		if operator != nil {
			// Both selectors in one peer: the operator's pods, in its
			// namespace only.
			rule.WithFrom(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: operator.Namespace})).
				WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(maps.Clone(operator.PodLabels))))
		}
	}
	return networkingv1ac.NetworkPolicy(ServerPolicyName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentServer))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(rule))
}

// CachePolicy admits traffic to the cache pods on PostgreSQL's port from the
// stack's server pods only.
func CachePolicy(stack *v1alpha2.InferenceStack) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(CachePolicyName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentCache)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentCache))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(networkingv1ac.NetworkPolicyPeer().
					WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentServer)))).
				WithPorts(networkingv1ac.NetworkPolicyPort().
					WithProtocol(corev1.ProtocolTCP).
					WithPort(intstr.FromInt32(runconfig.CachePort)))))
}
