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

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// HorizontalPodAutoscaler scales the server Deployment on the stack's
// metrics (CPU, memory: v1alpha2.ScalingSpec.MetricsOrDefault), or is nil
// when scaling.autoscaling is unset.
func HorizontalPodAutoscaler(stack *v1alpha2.InferenceStack) *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	metrics := stack.Spec.Scaling.MetricsOrDefault()
	if metrics == nil {
		return nil
	}
	a := stack.Spec.Scaling.Autoscaling
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
		WithSpec(spec)
}

// PodDisruptionBudget limits voluntary disruptions of the server pods, or is
// nil when scaling.podDisruptionBudget is unset.
func PodDisruptionBudget(stack *v1alpha2.InferenceStack) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	w := stack.Spec.Scaling
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
