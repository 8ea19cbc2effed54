// Package scaling is the scaling component: the server's
// HorizontalPodAutoscaler and PodDisruptionBudget when the stack asks for
// them, removed when it no longer does.
package scaling

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// HorizontalPodAutoscaler scales the server Deployment on the stack's
// metrics (CPU, memory: v1alpha1.InferenceStack.AutoscalingMetrics), or is
// nil when workload.autoscaling is unset.
func HorizontalPodAutoscaler(stack *v1alpha1.InferenceStack) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
	metrics, err := stack.AutoscalingMetrics()
	if err != nil || metrics == nil {
		return nil, err
	}
	a := stack.Spec.Workload.Autoscaling
	minReplicas := int32(1)
	if a.MinReplicas != nil {
		minReplicas = *a.MinReplicas
	}
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
			WithAPIVersion("apps/v1").WithKind("Deployment").WithName(server.Name(stack))).
		WithMinReplicas(minReplicas).
		WithMaxReplicas(a.MaxReplicas)
	for _, m := range metrics {
		spec.WithMetrics(autoscalingv2ac.MetricSpec().
			WithType(autoscalingv2.ResourceMetricSourceType).
			WithResource(autoscalingv2ac.ResourceMetricSource().
				WithName(corev1.ResourceName(m.Resource)).
				WithTarget(autoscalingv2ac.MetricTarget().
					WithType(autoscalingv2.UtilizationMetricType).
					WithAverageUtilization(m.AverageUtilization))))
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(server.Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(spec), nil
}

// PodDisruptionBudget limits voluntary disruptions of the server pods, or is
// nil when workload.podDisruptionBudget is unset.
func PodDisruptionBudget(stack *v1alpha1.InferenceStack) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	w := stack.Spec.Workload
	if w == nil || w.PodDisruptionBudget == nil {
		return nil
	}
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentServer)))
	if p := w.PodDisruptionBudget; p.MinAvailable != nil {
		spec.WithMinAvailable(*p.MinAvailable)
	} else if p.MaxUnavailable != nil {
		spec.WithMaxUnavailable(*p.MaxUnavailable)
	}
	return policyv1ac.PodDisruptionBudget(server.Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(spec)
}
