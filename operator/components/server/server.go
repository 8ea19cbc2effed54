// Package server is the server component: the Llama Stack server's
// ServiceAccount, Deployment and Service. The Deployment runs under the
// restricted pod security standard, mounts the run config, and carries the
// hashes of the config and of the referenced user data on its pod template,
// so it rolls out exactly when one of them changes.
package server

import (
	"fmt"
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// ContainerName is the server container.
const ContainerName = "server"

// ConfigDir is where the run-config ConfigMap is mounted.
const ConfigDir = "/etc/llama-stack/config"

// ConfigPath is the run config the server reads.
var ConfigPath = path.Join(ConfigDir, runconfig.ConfigKey)

// HealthPath answers 200 when the server is up.
const HealthPath = "/v1/health"

// Name is the name of the server's Deployment and Service.
func Name(stack metav1.Object) string { return stack.GetName() }

// ServiceAccountName is the ServiceAccount the server runs as: the user's
// workload.serviceAccountName, or one the operator makes.
func ServiceAccountName(stack *v1alpha2.InferenceStack) string {
	if w := stack.Spec.Workload; w != nil && w.ServiceAccountName != "" {
		return w.ServiceAccountName
	}
	return stack.Name + "-server"
}

// Port is the port the server's Service exposes.
func Port(stack *v1alpha2.InferenceStack) int32 {
	if n := stack.Spec.Networking; n != nil && n.Port != 0 {
		return n.Port
	}
	return runconfig.ServerPort
}

// Inputs are what the server's objects are built from, besides the stack.
type Inputs struct {
	// Image of the server.
	Image string
	// Config is the run config; its Env reaches the container.
	Config runconfig.Result
	// ConfigMapName holds the run config.
	ConfigMapName string
	// ReferencesHash is the hash of the referenced user data.
	ReferencesHash string
	// OperatorMajor is the major version of the running operator; some
	// defaults differ per major (DefaultResources).
	OperatorMajor string
	// FSGroup is the pod's fsGroup with a state volume: a new volume's root
	// belongs to root, and only the kubelet's fsGroup handling (group
	// ownership, group write) lets the server's non-root user, whatever
	// the image's, write its state there. Nil leaves it to the platform
	// (OpenShift's restricted-v2 SCC assigns one).
	FSGroup *int64
}

// line is the Llama Stack line the server runs.
func (in Inputs) line() stackconfig.Line { return in.Config.Line }

// DefaultResources are the server container's resources when
// spec.workload.resources is not set. They changed in operator 2.0: the
// Llama Stack 0.3 servers 2.x pins need more memory at start-up, and a memory
// limit keeps one stack from starving its node.
//
//	1.x: requests cpu 250m, memory 512Mi; no limits
//	2.x: requests cpu 500m, memory 1Gi; limits memory 2Gi
func DefaultResources(operatorMajor string) corev1.ResourceRequirements {
	if operatorMajor == "1" {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		}}
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("500m"),
			corev1.ResourceMemory: resource.MustParse("1Gi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
}

// ServiceAccount is the operator-made ServiceAccount, or nil when the user
// names their own.
func ServiceAccount(stack *v1alpha2.InferenceStack) *corev1ac.ServiceAccountApplyConfiguration {
	if w := stack.Spec.Workload; w != nil && w.ServiceAccountName != "" {
		return nil
	}
	return corev1ac.ServiceAccount(ServiceAccountName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithAutomountServiceAccountToken(false)
}

// ProberName names the ServiceAccount the operator's prober authenticates
// as to a server with kubernetes auth, and the Secret its tokens are bound
// to: one identity per stack, made by the operator for the purpose alone.
func ProberName(stack metav1.Object) string { return stack.GetName() + "-prober" }

// ProberServiceAccount is the prober's identity for a stack with kubernetes
// auth, nil without. It holds no RBAC at all: the server's auth only asks
// the API server who the token's holder is (a SelfSubjectReview, open to
// any authenticated principal), so a server that keeps the token learns an
// identity that can do nothing but that.
func ProberServiceAccount(stack *v1alpha2.InferenceStack) *corev1ac.ServiceAccountApplyConfiguration {
	if !AuthEnabled(stack) {
		return nil
	}
	return corev1ac.ServiceAccount(ProberName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentProber)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithAutomountServiceAccountToken(false)
}

// ProberSecret is the object the prober's tokens are bound to (a
// TokenRequest's boundObjectRef), nil without kubernetes auth: it holds no
// data, and its deletion (with the stack) revokes every token bound to it.
func ProberSecret(stack *v1alpha2.InferenceStack) *corev1ac.SecretApplyConfiguration {
	if !AuthEnabled(stack) {
		return nil
	}
	labels := components.Labels(stack, components.ComponentProber)
	// The manager's cache holds only Secrets with the watched label.
	labels[components.LabelWatched] = "true"
	return corev1ac.Secret(ProberName(stack), stack.Namespace).
		WithLabels(labels).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithType(corev1.SecretTypeOpaque)
}

// Service exposes the server: ClusterIP, or LoadBalancer with
// networking.expose.
func Service(stack *v1alpha2.InferenceStack) *corev1ac.ServiceApplyConfiguration {
	typ := corev1.ServiceTypeClusterIP
	if n := stack.Spec.Networking; n != nil && ptr.Deref(n.Expose, false) {
		typ = corev1.ServiceTypeLoadBalancer
	}
	return corev1ac.Service(Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(typ).
			WithSelector(components.SelectorLabels(stack, components.ComponentServer)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName(stack)).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(Port(stack)).
				WithTargetPort(intstr.FromString(portName(stack)))))
}

// URL is the in-cluster URL of the server's Service:
// http(s)://<service>.<namespace>.svc:<port>, https when TLS is on.
func URL(stack *v1alpha2.InferenceStack) string {
	scheme := "http"
	if tlsEnabled(stack) {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, Name(stack), stack.Namespace, Port(stack))
}

// PortName is the name of the server Service's port: https when the server
// serves TLS, http otherwise (what an Ingress or a Route names as target).
func PortName(stack *v1alpha2.InferenceStack) string { return portName(stack) }

// TLSEnabled reports whether the server serves HTTPS (networking.tls).
func TLSEnabled(stack *v1alpha2.InferenceStack) bool { return tlsEnabled(stack) }

func portName(stack *v1alpha2.InferenceStack) string {
	if tlsEnabled(stack) {
		return "https"
	}
	return "http"
}

func tlsEnabled(stack *v1alpha2.InferenceStack) bool {
	n := stack.Spec.Networking
	return n != nil && n.TLS != nil && n.TLS.Enabled
}

// ProbesTCP reports whether the kubelet's probes must be TCP connects
// rather than HTTP GETs of HealthPath, because the server would refuse
// the kubelet's request:
//   - with a client CA (mutual TLS) the server requires a client
//     certificate on every connection (uvicorn ssl_cert_reqs=CERT_REQUIRED
//     at v0.2.23 and v0.3.0), and kubelet probes present none;
//   - with authentication, on a line whose auth middleware demands a
//     bearer token on /v1/health (facts.json server_api: v0.2.23 guards
//     every path; 0.3.0 exempts /v1/health and /v1/version with
//     require_authentication=False).
func ProbesTCP(stack *v1alpha2.InferenceStack, line stackconfig.Line) bool {
	if tlsEnabled(stack) && stack.Spec.Networking.TLS.CABundle != nil {
		return true
	}
	return AuthEnabled(stack) && line.HealthNeedsToken()
}

// AuthEnabled reports whether the server validates callers' tokens against
// the cluster.
func AuthEnabled(stack *v1alpha2.InferenceStack) bool {
	return stack.Spec.Auth != nil && stack.Spec.Auth.Kubernetes != nil
}

// StateVolumeName is the PersistentVolumeClaim of workload.stateVolume.
func StateVolumeName(stack metav1.Object) string { return stack.GetName() + "-state" }

// stateVolume is workload.stateVolume, nil when unset.
func stateVolume(stack *v1alpha2.InferenceStack) *v1alpha2.StateVolumeSpec {
	if w := stack.Spec.Workload; w != nil {
		return w.StateVolume
	}
	return nil
}

// HasStateVolume reports whether the stack asks for a state volume
// (workload.stateVolume).
func HasStateVolume(stack *v1alpha2.InferenceStack) bool { return stateVolume(stack) != nil }

// StateRetained reports whether the state volume outlives the stack
// (workload.stateVolume.retainOnDelete, default true).
func StateRetained(stack *v1alpha2.InferenceStack) bool {
	v := stateVolume(stack)
	return v == nil || v.RetainOnDelete == nil || *v.RetainOnDelete
}

// StatePVC is the claim of workload.stateVolume, nil when unset. Like the
// cache's, the stack owns it (the garbage collector deletes it with the
// stack) only when retainOnDelete is false.
func StatePVC(stack *v1alpha2.InferenceStack) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	v := stateVolume(stack)
	if v == nil {
		return nil
	}
	size := resource.MustParse("1Gi")
	if v.Size != nil {
		size = *v.Size
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	if v.StorageClassName != nil {
		spec.WithStorageClassName(*v.StorageClassName)
	}
	pvc := corev1ac.PersistentVolumeClaim(StateVolumeName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithSpec(spec)
	if !StateRetained(stack) {
		pvc.WithOwnerReferences(components.OwnerReference(stack))
	}
	return pvc
}

// Deployment runs the server. It fails on workload.workers and
// workload.podOverrides when they break a rule the v1alpha2 CRD enforces
// (CheckOverrides).
func Deployment(stack *v1alpha2.InferenceStack, in Inputs) (*appsv1ac.DeploymentApplyConfiguration, error) {
	w := stack.Spec.Workload
	if w == nil {
		w = &v1alpha2.WorkloadSpec{}
	}
	x, err := extrasOf(stack)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentServer))).
		WithTemplate(podTemplate(stack, w, x, in))
	if stateVolume(stack) != nil {
		// A ReadWriteOnce volume: the old pod lets go before the new one starts.
		spec.WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType))
	}
	if s := stack.Spec.Scaling; s == nil || s.Autoscaling == nil {
		// With autoscaling the HorizontalPodAutoscaler owns the replica count.
		replicas := int32(1)
		if s != nil && s.Replicas != nil {
			replicas = *s.Replicas
		}
		spec.WithReplicas(replicas)
	}
	return appsv1ac.Deployment(Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(spec), nil
}

func podTemplate(stack *v1alpha2.InferenceStack, w *v1alpha2.WorkloadSpec, x extras, in Inputs) *corev1ac.PodTemplateSpecApplyConfiguration {
	security := corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if stateVolume(stack) != nil && in.FSGroup != nil {
		security.WithFSGroup(*in.FSGroup)
	}
	pod := corev1ac.PodSpec().
		WithServiceAccountName(ServiceAccountName(stack)).
		// The server calls no Kubernetes API as itself: kubernetes auth
		// sends each caller's SelfSubjectReview with the caller's token.
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(security).
		WithContainers(container(stack, w, x, in)).
		WithVolumes(volumes(stack, in)...)
	if dir := providersMount(x, in); dir != "" {
		pod.WithVolumes(corev1ac.Volume().WithName(volumeProviders).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	}
	if o := x.overrides; o != nil {
		for _, v := range o.Volumes {
			pod.WithVolumes(components.Convert[corev1ac.VolumeApplyConfiguration](v))
		}
		if o.TerminationGracePeriodSeconds != nil {
			pod.WithTerminationGracePeriodSeconds(*o.TerminationGracePeriodSeconds)
		}
	}
	if len(w.NodeSelector) > 0 {
		pod.WithNodeSelector(w.NodeSelector)
	}
	for _, t := range w.Tolerations {
		pod.WithTolerations(components.Convert[corev1ac.TolerationApplyConfiguration](t))
	}
	for _, t := range w.TopologySpreadConstraints {
		pod.WithTopologySpreadConstraints(components.Convert[corev1ac.TopologySpreadConstraintApplyConfiguration](t))
	}
	return corev1ac.PodTemplateSpec().
		WithLabels(components.Labels(stack, components.ComponentServer)).
		WithAnnotations(map[string]string{
			components.AnnotationConfigHash:  in.Config.Hash,
			components.AnnotationSecretsHash: in.ReferencesHash,
		}).
		WithSpec(pod)
}

func container(stack *v1alpha2.InferenceStack, w *v1alpha2.WorkloadSpec, x extras, in Inputs) *corev1ac.ContainerApplyConfiguration {
	probe := func(period, failures int32) *corev1ac.ProbeApplyConfiguration {
		p := corev1ac.Probe().WithPeriodSeconds(period).WithFailureThreshold(failures).WithTimeoutSeconds(5)
		if ProbesTCP(stack, in.line()) {
			return p.WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(portName(stack))))
		}
		scheme := corev1.URISchemeHTTP
		if tlsEnabled(stack) {
			scheme = corev1.URISchemeHTTPS
		}
		return p.WithHTTPGet(corev1ac.HTTPGetAction().WithPath(HealthPath).WithPort(intstr.FromString(portName(stack))).WithScheme(scheme))
	}
	c := corev1ac.Container().
		WithName(ContainerName).
		WithImage(in.Image).
		WithCommand(command(x, in)...).
		// A writable working directory on the state volume: `llama stack run`
		// creates external_providers_dir, or "None" here when a config leaves
		// it unset.
		WithWorkingDir(runconfig.WorkDir).
		WithPorts(corev1ac.ContainerPort().WithName(portName(stack)).WithContainerPort(runconfig.ServerPort).WithProtocol(corev1.ProtocolTCP)).
		WithStartupProbe(probe(5, 60)).
		WithReadinessProbe(probe(10, 3)).
		WithLivenessProbe(probe(20, 3)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
		WithVolumeMounts(volumeMounts(stack)...)
	if dir := providersMount(x, in); dir != "" {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(volumeProviders).WithMountPath(dir))
	}
	if o := x.overrides; o != nil {
		c.WithArgs(o.Args...)
		for _, m := range o.VolumeMounts {
			c.WithVolumeMounts(components.Convert[corev1ac.VolumeMountApplyConfiguration](m))
		}
	}
	if x.workers != nil { // with the operator's uvicorn command (CheckOverrides)
		// The app factory reads the run config's path from this variable
		// (Launch.App.ConfigEnv): the file the operator mounts.
		c.WithEnv(corev1ac.EnvVar().WithName(in.line().Facts().Launch.App.ConfigEnv).WithValue(ConfigPath))
	}
	for _, e := range in.Config.ServerEnv {
		// The root filesystem is read-only: the server's home is under /tmp,
		// what it keeps outside the run config on the state volume.
		if !slices.ContainsFunc(w.Env, func(u corev1.EnvVar) bool { return u.Name == e.Name }) {
			c.WithEnv(corev1ac.EnvVar().WithName(e.Name).WithValue(e.Value))
		}
	}
	for _, e := range in.Config.Env {
		c.WithEnv(components.Convert[corev1ac.EnvVarApplyConfiguration](e))
	}
	for _, e := range w.Env {
		c.WithEnv(components.Convert[corev1ac.EnvVarApplyConfiguration](e))
	}
	resources := Resources(w.Resources, x.workers, x.metrics, in.OperatorMajor)
	c.WithResources(components.Convert[corev1ac.ResourceRequirementsApplyConfiguration](resources))
	return c
}

const (
	volumeConfig = "run-config"
	volumeData   = "data"
	volumeTmp    = "tmp"
	volumeTLS    = "tls"
	volumeCA     = "client-ca"
	volumeKubeCA = "kube-ca"
	// volumeProviders holds the external providers folder with workers.
	volumeProviders = "providers"
	// kubeRootCAConfigMap is the ConfigMap with the cluster CA that the
	// API server publishes in every namespace.
	kubeRootCAConfigMap = "kube-root-ca.crt"
)

func volumeMounts(stack *v1alpha2.InferenceStack) []*corev1ac.VolumeMountApplyConfiguration {
	m := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName(volumeConfig).WithMountPath(ConfigDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName(volumeData).WithMountPath(runconfig.DataDir),
		corev1ac.VolumeMount().WithName(volumeTmp).WithMountPath(runconfig.HomeDir),
	}
	if AuthEnabled(stack) {
		m = append(m, corev1ac.VolumeMount().WithName(volumeKubeCA).WithMountPath(runconfig.KubeCADir).WithReadOnly(true))
	}
	if tlsEnabled(stack) {
		m = append(m, corev1ac.VolumeMount().WithName(volumeTLS).WithMountPath(runconfig.TLSDir).WithReadOnly(true))
		if stack.Spec.Networking.TLS.CABundle != nil {
			m = append(m, corev1ac.VolumeMount().WithName(volumeCA).WithMountPath(runconfig.CADir).WithReadOnly(true))
		}
	}
	return m
}

// dataVolume holds the server's state: the state volume's claim, or an
// emptyDir.
func dataVolume(stack *v1alpha2.InferenceStack) *corev1ac.VolumeApplyConfiguration {
	if stateVolume(stack) != nil {
		return corev1ac.Volume().WithName(volumeData).WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(StateVolumeName(stack)))
	}
	return corev1ac.Volume().WithName(volumeData).WithEmptyDir(corev1ac.EmptyDirVolumeSource())
}

func volumes(stack *v1alpha2.InferenceStack, in Inputs) []*corev1ac.VolumeApplyConfiguration {
	v := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName(volumeConfig).WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(in.ConfigMapName).
			WithItems(corev1ac.KeyToPath().WithKey(runconfig.ConfigKey).WithPath(runconfig.ConfigKey))),
		dataVolume(stack),
		corev1ac.Volume().WithName(volumeTmp).WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
	if AuthEnabled(stack) {
		v = append(v, corev1ac.Volume().WithName(volumeKubeCA).WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(kubeRootCAConfigMap).
			WithItems(corev1ac.KeyToPath().WithKey("ca.crt").WithPath("ca.crt"))))
	}
	if tlsEnabled(stack) {
		t := stack.Spec.Networking.TLS
		v = append(v, corev1ac.Volume().WithName(volumeTLS).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(t.SecretName).
			WithItems(corev1ac.KeyToPath().WithKey("tls.crt").WithPath("tls.crt"),
				corev1ac.KeyToPath().WithKey("tls.key").WithPath("tls.key"))))
		if ca := t.CABundle; ca != nil {
			key := ca.KeyOrDefault()
			v = append(v, corev1ac.Volume().WithName(volumeCA).WithConfigMap(corev1ac.ConfigMapVolumeSource().
				WithName(ca.ConfigMapName).
				WithItems(corev1ac.KeyToPath().WithKey(key).WithPath(runconfig.CAFile))))
		}
	}
	return v
}
