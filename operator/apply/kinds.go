package apply

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
)

// The kinds the operator applies.
var (
	ConfigMap = Kind[*corev1.ConfigMap, *corev1ac.ConfigMapApplyConfiguration]{
		New: func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, Extract: corev1ac.ExtractConfigMap,
	}
	Secret = Kind[*corev1.Secret, *corev1ac.SecretApplyConfiguration]{
		New: func() *corev1.Secret { return &corev1.Secret{} }, Extract: corev1ac.ExtractSecret,
	}
	ServiceAccount = Kind[*corev1.ServiceAccount, *corev1ac.ServiceAccountApplyConfiguration]{
		New: func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, Extract: corev1ac.ExtractServiceAccount,
	}
	Service = Kind[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		New: func() *corev1.Service { return &corev1.Service{} }, Extract: corev1ac.ExtractService,
	}
	PersistentVolumeClaim = Kind[*corev1.PersistentVolumeClaim, *corev1ac.PersistentVolumeClaimApplyConfiguration]{
		New: func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} }, Extract: corev1ac.ExtractPersistentVolumeClaim,
	}
	Deployment = Kind[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		New: func() *appsv1.Deployment { return &appsv1.Deployment{} }, Extract: appsv1ac.ExtractDeployment,
	}
	NetworkPolicy = Kind[*networkingv1.NetworkPolicy, *networkingv1ac.NetworkPolicyApplyConfiguration]{
		New: func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} }, Extract: networkingv1ac.ExtractNetworkPolicy,
	}
	Ingress = Kind[*networkingv1.Ingress, *networkingv1ac.IngressApplyConfiguration]{
		New: func() *networkingv1.Ingress { return &networkingv1.Ingress{} }, Extract: networkingv1ac.ExtractIngress,
	}
	HorizontalPodAutoscaler = Kind[*autoscalingv2.HorizontalPodAutoscaler, *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration]{
		New: func() *autoscalingv2.HorizontalPodAutoscaler { return &autoscalingv2.HorizontalPodAutoscaler{} }, Extract: autoscalingv2ac.ExtractHorizontalPodAutoscaler,
	}
	PodDisruptionBudget = Kind[*policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration]{
		New: func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} }, Extract: policyv1ac.ExtractPodDisruptionBudget,
	}
)
