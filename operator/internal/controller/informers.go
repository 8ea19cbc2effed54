package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/internal/wire"
)

// ownedTypes are the kinds the operator makes; each carries the managed-by
// label, which is all the manager's cache holds of them.
func ownedTypes() []client.Object {
	return []client.Object{
		&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}, &corev1.PersistentVolumeClaim{},
		&networkingv1.NetworkPolicy{}, &autoscalingv2.HorizontalPodAutoscaler{}, &policyv1.PodDisruptionBudget{},
		&networkingv1.Ingress{},
	}
}

// routeObject is an empty OpenShift Route, which the operator watches
// only once the API server serves Routes (routeAPI).
func routeObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(network.RouteGVK)
	return u
}

// CacheOptions restrict the manager's cache to the operator's own objects
// and the user objects stacks reference (which the operator labels), so
// unrelated objects in the cluster cost it no memory, and its transforms
// keep of each object only what the operator reads:
//
//   - of every object, no managed fields: on the kinds the operator applies,
//     the digest of the fields it owns (apply.DigestAnnotation) stands in for
//     them, which is all apply.Apply compares;
//   - of its Deployments, the metadata, the replicas, the containers' names
//     and images and the status (what the stack's status reports);
//   - of its other objects, the metadata (what tells whose they are), and of
//     its Secrets and ConfigMaps no data (a stack referencing one of them is
//     read from the API server: readReference);
//   - of user Secrets and ConfigMaps and of InferenceStacks, all but the
//     managed fields.
//
// A non-nil stacks selector also restricts the InferenceStacks it sees,
// which it caches in v1alpha1.
func CacheOptions(stacks labels.Selector) cache.Options {
	return CacheOptionsAt(stacks, schema.GroupVersion{}) // v1alpha1 (wire.Object)
}

// CacheOptionsAt is CacheOptions with the InferenceStacks cached in the API
// version gv, the one the operator reads.
func CacheOptionsAt(stacks labels.Selector, gv schema.GroupVersion) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{components.LabelManagedBy: components.ManagedBy})
	watched := labels.SelectorFromSet(labels.Set{components.LabelWatched: "true"})
	by := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: watched, Transform: userOrOwned(apply.Secret, func(o *corev1.Secret) {
			o.Data, o.StringData = nil, nil
		})},
		&corev1.ConfigMap{}: {Label: watched, Transform: userOrOwned(apply.ConfigMap, func(o *corev1.ConfigMap) {
			o.Data, o.BinaryData = nil, nil
		})},
		&appsv1.Deployment{}: {Label: managed, Transform: owned(apply.Deployment, keepRollout)},
		&corev1.Service{}: {Label: managed, Transform: owned(apply.Service, func(o *corev1.Service) {
			o.Spec, o.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
		})},
		&corev1.ServiceAccount{}: {Label: managed, Transform: owned(apply.ServiceAccount, func(o *corev1.ServiceAccount) {
			o.Secrets, o.ImagePullSecrets, o.AutomountServiceAccountToken = nil, nil, nil
		})},
		&corev1.PersistentVolumeClaim{}: {Label: managed, Transform: owned(apply.PersistentVolumeClaim, func(o *corev1.PersistentVolumeClaim) {
			o.Spec, o.Status = corev1.PersistentVolumeClaimSpec{}, corev1.PersistentVolumeClaimStatus{}
		})},
		&networkingv1.NetworkPolicy{}: {Label: managed, Transform: owned(apply.NetworkPolicy, func(o *networkingv1.NetworkPolicy) {
			o.Spec = networkingv1.NetworkPolicySpec{}
		})},
		&networkingv1.Ingress{}: {Label: managed, Transform: owned(apply.Ingress, func(o *networkingv1.Ingress) {
			o.Spec, o.Status = networkingv1.IngressSpec{}, networkingv1.IngressStatus{}
		})},
		&autoscalingv2.HorizontalPodAutoscaler{}: {Label: managed, Transform: owned(apply.HorizontalPodAutoscaler, func(o *autoscalingv2.HorizontalPodAutoscaler) {
			o.Spec, o.Status = autoscalingv2.HorizontalPodAutoscalerSpec{}, autoscalingv2.HorizontalPodAutoscalerStatus{}
		})},
		&policyv1.PodDisruptionBudget{}: {Label: managed, Transform: owned(apply.PodDisruptionBudget, func(o *policyv1.PodDisruptionBudget) {
			o.Spec, o.Status = policyv1.PodDisruptionBudgetSpec{}, policyv1.PodDisruptionBudgetStatus{}
		})},
		// The stacks' pods, for image pull errors and crash loops in the
		// status (pods.go): their metadata, their containers' names and
		// images (a running container's status names its image by the
		// runtime's ID, not as the Deployment does) and container statuses.
		&corev1.Pod{}: {Label: managed, Transform: func(in any) (any, error) {
			if p, ok := in.(*corev1.Pod); ok {
				p.ManagedFields = nil
				p.Spec = corev1.PodSpec{InitContainers: namesAndImages(p.Spec.InitContainers), Containers: namesAndImages(p.Spec.Containers)}
				p.Status = corev1.PodStatus{ContainerStatuses: p.Status.ContainerStatuses, InitContainerStatuses: p.Status.InitContainerStatuses}
			}
			return in, nil
		}},
	}
	stack := cache.ByObject{Transform: cache.TransformStripManagedFields()}
	if stacks != nil {
		stack.Label = stacks
	}
	by[wire.Object(gv)] = stack
	return cache.Options{ByObject: by}
}

// routeCacheOptions are the options of the cache of the operator's OpenShift
// Routes, which the operator makes once it finds the API server serving
// them (routeAPI): a cache of its own, because the manager's cache needs
// every kind it is told of up front served. It holds the operator's Routes
// only (managed-by label), whole but for the managed fields: their status
// says whether a router admitted them.
func routeCacheOptions(base cache.Options) cache.Options {
	base.DefaultLabelSelector = labels.SelectorFromSet(labels.Set{components.LabelManagedBy: components.ManagedBy})
	base.DefaultTransform = cache.TransformStripManagedFields()
	base.ByObject = nil
	return base
}

// keepRollout trims a Deployment to what the status reads of it.
func keepRollout(d *appsv1.Deployment) {
	containers, inits := namesAndImages(d.Spec.Template.Spec.Containers), namesAndImages(d.Spec.Template.Spec.InitContainers)
	// The selector finds the Deployment's pods (image pull errors: pods.go).
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector}
	d.Spec.Template.Spec.Containers, d.Spec.Template.Spec.InitContainers = containers, inits
}

// owned is the cache transform of a kind the operator applies: the digest
// of the fields it owns replaces the managed fields, and keep trims the
// object to what the operator reads of it. An object whose digest cannot be
// made (its managed fields do not parse) stays whole, so apply.Apply reads
// them itself.
func owned[O client.Object, C apply.Config](kind apply.Kind[O, C], keep func(O)) toolscache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(O)
		if !ok {
			return in, nil
		}
		if err := kind.SetDigest(obj); err != nil {
			return in, nil
		}
		keep(obj)
		return obj, nil
	}
}

// userOrOwned is the cache transform of Secrets and ConfigMaps: the
// operator's own are treated as owned says; of the user's, which the
// operator reads, only the managed fields go.
func userOrOwned[O client.Object, C apply.Config](kind apply.Kind[O, C], keep func(O)) toolscache.TransformFunc {
	own := owned(kind, keep)
	return func(in any) (any, error) {
		obj, ok := in.(O)
		if !ok {
			return in, nil
		}
		if ours(obj) {
			return own(obj)
		}
		obj.SetManagedFields(nil)
		return obj, nil
	}
}

// trimmed reports whether obj, read from the cache, lacks its data: one of
// the operator's own Secrets or ConfigMaps (see CacheOptions).
func trimmed(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[apply.DigestAnnotation]
	return ok && ours(obj)
}

// namesAndImages keeps only the name and image of each container.
func namesAndImages(containers []corev1.Container) []corev1.Container {
	if len(containers) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i, c := range containers {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}
