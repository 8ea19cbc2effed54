package bundle

import (
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/internal/manifests"
)

// The conversion webhook a CRD package release that serves several
// versions ships (docs/api-versions.md): the operator image's
// `conversion-webhook` command, its Service, and its rights.
const (
	// ConversionNamespace is where such a CRD package must be installed:
	// the CRD names its webhook's Service at build time (OLM v1 fills the
	// namespace in only for webhookdefinitions, which it refuses without
	// cert-manager or OpenShift's service CA).
	ConversionNamespace = "inferencestack-system"
	// ConversionName names the Deployment, Service and ServiceAccount.
	ConversionName = "inferencestack-conversion"
	// conversionSecret holds the webhook's serving certificate.
	conversionSecret = "inferencestack-conversion-tls"
	conversionPort   = 9443
)

// withConversion makes crd call the webhook's Service for conversions.
func withConversion(crd *apiextensionsv1.CustomResourceDefinition) {
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: ConversionNamespace, Name: ConversionName, Path: ptr.To("/convert"), Port: ptr.To(int32(443))}},
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// conversionWebhook returns the CSV parts of the webhook (run from image)
// and its Service manifest.
func conversionWebhook(image, crdName string) (v1alpha1.StrategyDeploymentSpec, []v1alpha1.StrategyDeploymentPermissions, []v1alpha1.StrategyDeploymentPermissions, []byte, error) {
	labels := map[string]string{"app.kubernetes.io/name": ConversionName, "app.kubernetes.io/component": "conversion-webhook"}
	// Every read of an InferenceStack in a version other than the stored
	// one goes through this one pod: an unready spell or a restart fails
	// every such read and write, the operators' included. So its probes
	// allow a busy node's latency (the kubelet's default timeout of 1 s
	// expired on the 2-core test node with four majors installed, and
	// conversions failed with EOF: docs/api-versions.md), and no CPU limit
	// throttles it while the API server waits for it.
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/healthz", Port: intstr.FromInt32(conversionPort), Scheme: corev1.URISchemeHTTPS}}
	readiness := &corev1.Probe{ProbeHandler: health, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
	liveness := &corev1.Probe{ProbeHandler: health, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6}
	dep := v1alpha1.StrategyDeploymentSpec{
		Name:  ConversionName,
		Label: labels,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: ConversionName,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name:    "webhook",
						Image:   image,
						Command: []string{"/manager"},
						Args:    []string{"conversion-webhook", "--service=" + ConversionName, "--secret=" + conversionSecret, "--crd=" + crdName},
						Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
						Ports:          []corev1.ContainerPort{{Name: "webhook", ContainerPort: conversionPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: readiness,
						LivenessProbe:  liveness,
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("50m"), corev1.ResourceMemory: mustQuantity("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: mustQuantity("128Mi")},
						},
					}},
				},
			},
		},
	}
	// Exactly what the webhook calls: its CRD (get, patch of the caBundle),
	// its Secret (get, update; create cannot name the object).
	cluster := []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: ConversionName, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{crdName}, Verbs: []string{"get", "patch"}},
	}}}
	namespaced := []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: ConversionName, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{conversionSecret}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}}}
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ConversionName, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "webhook", Port: 443, TargetPort: intstr.FromInt32(conversionPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	data, err := manifests.Marshal(svc)
	return dep, cluster, namespaced, data, err
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
