// Package cache is the cache component: the operator-managed PostgreSQL of
// spec.cache. Its password Secret is created once and never rotated, and it
// and the data volume carry no owner reference: they outlive the
// InferenceStack unless cache.retainOnDelete is false, and are never deleted
// when the cache is switched off.
//
// The pod runs under the restricted pod security standard and, on
// OpenShift, under the restricted-v2 SCC: there it sets no user, group or
// fsGroup (the SCC assigns them from the namespace's range and refuses
// others), and PGDATA is a subdirectory of the data volume, so PostgreSQL,
// running as whatever user the platform chose, creates it and owns it.
package cache

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// DefaultImage is the PostgreSQL image when the operator is not told another.
const DefaultImage = "docker.io/library/postgres:16.4"

// PostgresUID is the postgres user and group of the official image
// (docker.io/library/postgres), whose default user is root.
const PostgresUID int64 = 999

// Auto, Platform: the values of the operator's --cache-run-as-user flag
// besides a number (RunAsUser).
const (
	Auto     = "auto"
	Platform = "platform"
)

// openShiftSecurityGroup is the API group of OpenShift's
// SecurityContextConstraints.
const openShiftSecurityGroup = "security.openshift.io"

// RunAsUser resolves the operator's --cache-run-as-user flag into the user
// PostgreSQL runs as (nil: the platform assigns one). "platform" gives nil;
// a number gives that user; "auto" gives nil when the API server serves
// OpenShift's security.openshift.io group (listed by groups, the discovery
// client's ServerGroups), PostgresUID otherwise.
func RunAsUser(flag string, groups func() (*metav1.APIGroupList, error)) (*int64, error) {
	switch flag {
	case Platform:
		return nil, nil
	case Auto, "":
		list, err := groups()
		if err != nil {
			return nil, fmt.Errorf("--cache-run-as-user=auto: listing the API groups to tell OpenShift apart: %w "+
				"(set --cache-run-as-user to %s or a user id)", err, Platform)
		}
		for _, g := range list.Groups {
			if g.Name == openShiftSecurityGroup {
				return nil, nil
			}
		}
		return ptr.To(PostgresUID), nil
	}
	uid, err := strconv.ParseInt(flag, 10, 64)
	if err != nil || uid <= 0 {
		return nil, fmt.Errorf("--cache-run-as-user=%q: want %s, %s or a user id greater than 0", flag, Auto, Platform)
	}
	return &uid, nil
}

// Pod is how the cache's pod runs.
type Pod struct {
	// Image is the PostgreSQL image.
	Image string
	// RunAsUser, when set, is the user and group PostgreSQL runs as and the
	// fsGroup that owns its data volume: on a platform that assigns none,
	// the official image (default user root) needs one to pass
	// runAsNonRoot. Nil leaves all three to the platform (OpenShift's
	// restricted-v2 SCC assigns them, and refuses a pod that names a user
	// outside the namespace's range).
	RunAsUser *int64
}

// dataDir is where the data volume is mounted; PGData is PostgreSQL's data
// directory in it.
const (
	dataDir = "/var/lib/postgresql/data"
	PGData  = dataDir + "/pgdata"
)

// Enabled reports whether the stack asks for the cache.
func Enabled(stack *v1alpha2.InferenceStack) bool {
	return stack.Spec.Cache != nil && stack.Spec.Cache.Enabled
}

// Retained reports whether the cache's volume and password outlive the
// stack (cache.retainOnDelete, default true). When they do not, the stack
// owns them and the garbage collector deletes them with it; a stack whose
// spec no longer has a cache keeps them.
func Retained(stack *v1alpha2.InferenceStack) bool {
	c := stack.Spec.Cache
	return c == nil || c.RetainOnDelete == nil || *c.RetainOnDelete
}

// Name is the name of the cache's Deployment and Service (and host name).
func Name(stack metav1.Object) string { return runconfig.CacheServiceName(stack.GetName()) }

// PVCName is the cache's data volume claim.
func PVCName(stack metav1.Object) string { return stack.GetName() + "-cache-data" }

// SecretName holds the cache password.
func SecretName(stack metav1.Object) string { return runconfig.CacheSecretName(stack.GetName()) }

// PasswordSecret is the cache password Secret, with a new random password,
// owned by the stack unless Retained. The operator only ever creates it
// (and sets its owner reference as Retained changes).
func PasswordSecret(stack *v1alpha2.InferenceStack) (*corev1.Secret, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generating the cache password: %w", err)
	}
	labels := components.Labels(stack, components.ComponentCache)
	labels[components.LabelWatched] = "true"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(stack), Namespace: stack.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{runconfig.CachePasswordKey: []byte(base64.RawURLEncoding.EncodeToString(raw))},
	}
	if !Retained(stack) {
		secret.OwnerReferences = []metav1.OwnerReference{components.OwnerRef(stack)}
	}
	return secret, nil
}

// PVC is the cache's data volume claim, owned by the stack unless Retained.
func PVC(stack *v1alpha2.InferenceStack) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	size := resource.MustParse("1Gi")
	if c := stack.Spec.Cache; c != nil && c.StorageSize != nil {
		size = *c.StorageSize
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	if c := stack.Spec.Cache; c != nil && c.StorageClassName != nil {
		spec.WithStorageClassName(*c.StorageClassName)
	}
	pvc := corev1ac.PersistentVolumeClaim(PVCName(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentCache)).
		WithSpec(spec)
	if !Retained(stack) {
		pvc.WithOwnerReferences(components.OwnerReference(stack))
	}
	return pvc
}

// Deployment runs PostgreSQL on the data volume, one pod at a time.
func Deployment(stack *v1alpha2.InferenceStack, p Pod) *appsv1ac.DeploymentApplyConfiguration {
	env := func(name, value string) *corev1ac.EnvVarApplyConfiguration {
		return corev1ac.EnvVar().WithName(name).WithValue(value)
	}
	// A new probe each call: apply configurations are pointers, and the
	// liveness probe's delay must not become the readiness probe's.
	probe := func() *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithExec(corev1ac.ExecAction().WithCommand("pg_isready", "-U", runconfig.CacheUser, "-d", runconfig.CacheDatabase)).
			WithPeriodSeconds(10).WithTimeoutSeconds(5)
	}
	security := corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if p.RunAsUser != nil {
		security.WithRunAsUser(*p.RunAsUser).WithRunAsGroup(*p.RunAsUser).WithFSGroup(*p.RunAsUser)
	}
	pod := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(security).
		WithContainers(corev1ac.Container().
			WithName("postgres").
			WithImage(p.Image).
			WithPorts(corev1ac.ContainerPort().WithName("postgres").WithContainerPort(runconfig.CachePort).WithProtocol(corev1.ProtocolTCP)).
			WithEnv(
				env("POSTGRES_DB", runconfig.CacheDatabase),
				env("POSTGRES_USER", runconfig.CacheUser),
				corev1ac.EnvVar().WithName("POSTGRES_PASSWORD").WithValueFrom(corev1ac.EnvVarSource().
					WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(SecretName(stack)).WithKey(runconfig.CachePasswordKey))),
				// A subdirectory: the volume's root belongs to root (group
				// fsGroup), but initdb wants PGDATA owned by the user it runs
				// as, which only holds for a directory that user creates.
				env("PGDATA", PGData),
			).
			WithReadinessProbe(probe()).
			WithLivenessProbe(probe().WithInitialDelaySeconds(30)).
			WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("256Mi"),
			})).
			WithSecurityContext(corev1ac.SecurityContext().
				WithAllowPrivilegeEscalation(false).
				WithReadOnlyRootFilesystem(true).
				WithRunAsNonRoot(true).
				WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
			WithVolumeMounts(
				corev1ac.VolumeMount().WithName("data").WithMountPath(dataDir),
				corev1ac.VolumeMount().WithName("run").WithMountPath("/var/run/postgresql"),
				corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
			)).
		WithVolumes(
			corev1ac.Volume().WithName("data").WithPersistentVolumeClaim(
				corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(PVCName(stack))),
			corev1ac.Volume().WithName("run").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
			corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		)
	return appsv1ac.Deployment(Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentCache)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(components.SelectorLabels(stack, components.ComponentCache))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(components.Labels(stack, components.ComponentCache)).
				WithSpec(pod)))
}

// Service is the cache's host name and port.
func Service(stack *v1alpha2.InferenceStack) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(Name(stack), stack.Namespace).
		WithLabels(components.Labels(stack, components.ComponentCache)).
		WithOwnerReferences(components.OwnerReference(stack)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(components.SelectorLabels(stack, components.ComponentCache)).
			WithPorts(corev1ac.ServicePort().WithName("postgres").WithProtocol(corev1.ProtocolTCP).
				WithPort(runconfig.CachePort).WithTargetPort(intstr.FromString("postgres"))))
}
