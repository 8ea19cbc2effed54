// Package network is the network component: NetworkPolicies that admit only
// the server's port to the server pods (from the namespaces the stack
// allows) and only the server's traffic to the cache's PostgreSQL.
package network

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// ServerPolicyName is the server's NetworkPolicy.
func ServerPolicyName(stack *v1alpha1.InferenceStack) string { return stack.Name + "-server" }

// CachePolicyName is the cache's NetworkPolicy.
func CachePolicyName(stack *v1alpha1.InferenceStack) string { return stack.Name + "-cache" }

// ServerPolicy admits traffic to the server pods on the server's port only:
// from anywhere (clients reach it through its Service), or, when the stack
// sets v1alpha2's networking.allowedFrom (read from hub, the stack as
// v1alpha2 sees it: v1alpha1.InferenceStack.V1alpha2),
// only from pods of the stack's namespace, of the namespaces it names and of
// the namespaces carrying one of its label keys (and, with
// networking.route, of OpenShift's router namespaces).
func ServerPolicy(stack *v1alpha1.InferenceStack, hub *v1alpha2.InferenceStack) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	var allowed *v1alpha2.AllowedFromSpec
	if n := hub.Spec.Networking; n != nil {
		allowed = n.AllowedFrom
	}
	rule := networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(networkingv1ac.NetworkPolicyPort().
			WithProtocol(corev1.ProtocolTCP).
			WithPort(intstr.FromInt32(runconfig.ServerPort)))
	if allowed != nil {
		if n := stack.Spec.Networking; n != nil && n.Expose != nil && *n.Expose {
			return nil, fmt.Errorf("InferenceStack %s/%s: annotation %s (networking.allowedFrom) admits pods of namespaces, and networking.expose makes a LoadBalancer for clients outside the cluster, which it would refuse: set one or the other",
				stack.Namespace, stack.Name, v1alpha2.SpecAnnotation)
		}
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
		if hub.Spec.Networking.Route != nil {
			// A Route's traffic comes from OpenShift's routers, whose
			// namespaces carry this label (as upstream's operator admits
			// them too).
			rule.WithFrom(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{RouterNamespaceLabel: RouterNamespaceValue})))
		}
	}
	return networkingv1ac.NetworkPolicy(ServerPolicyName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentServer))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(rule)), nil
}

// CachePolicy admits traffic to the cache pods on PostgreSQL's port from the
// stack's server pods only.
func CachePolicy(stack *v1alpha1.InferenceStack) *networkingv1ac.NetworkPolicyApplyConfiguration {
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
