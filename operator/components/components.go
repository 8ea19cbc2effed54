// Package components holds what the component packages below it share: the
// labels, annotations and owner reference of every object the operator
// makes, and the predicates that tell the operator's objects apart.
//
// Each component (config, server, cache, network, scaling) is a package of
// pure builder functions: they take the InferenceStack (and what the run
// config made) and return apply configurations, import no Kubernetes client
// and are tested without a cluster. The steps that read the cluster and
// apply what they build live with the controller
// (operator/internal/controller).
package components

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Labels every object the operator makes carries. The manager's cache holds
// only objects with LabelManagedBy (and user objects an InferenceStack
// references, which carry LabelWatched).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "inferencestack-operator"
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	PartOf         = "inferencestack"
	// LabelStackNamespace names the namespace of the owning InferenceStack on
	// cluster-scoped objects, which cannot carry an owner reference to it.
	LabelStackNamespace = "inferencestack.io/stack-namespace"
	// LabelWatched marks Secrets and ConfigMaps the operator's cache holds:
	// its own, and the user's that an InferenceStack references (the
	// operator adds the label, and touches nothing else of them).
	LabelWatched = "inferencestack.io/watched"
)

// Annotations on the server's pod template: a change of the run config or
// of the data of a referenced user object changes them, and so rolls out
// the Deployment, and nothing else does.
const (
	AnnotationConfigHash  = "inferencestack.io/config-hash"
	AnnotationSecretsHash = "inferencestack.io/references-hash"
)

// Names of the component values of LabelComponent.
const (
	ComponentServer = "server"
	ComponentCache  = "cache"
	// ComponentProber is the identity the operator reads a server's
	// status as (server.ProberServiceAccount).
	ComponentProber = "prober"
)

// Labels are the labels of an object of the stack's component.
func Labels(stack metav1.Object, component string) map[string]string {
	name := "llama-stack"
	if component == ComponentCache {
		name = "postgres"
	}
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelPartOf:    PartOf,
		LabelName:      name,
		LabelInstance:  stack.GetName(),
		LabelComponent: component,
	}
}

// SelectorLabels select the pods of the stack's component.
func SelectorLabels(stack metav1.Object, component string) map[string]string {
	return map[string]string{LabelInstance: stack.GetName(), LabelComponent: component, LabelManagedBy: ManagedBy}
}

// OwnerReference makes the stack the controlling owner of a namespaced
// object, so garbage collection removes it with the stack.
func OwnerReference(stack *v1alpha2.InferenceStack) *metav1ac.OwnerReferenceApplyConfiguration {
	ref := OwnerRef(stack)
	return metav1ac.OwnerReference().
		WithAPIVersion(ref.APIVersion).
		WithKind(ref.Kind).
		WithName(ref.Name).
		WithUID(ref.UID).
		WithController(*ref.Controller).
		WithBlockOwnerDeletion(*ref.BlockOwnerDeletion)
}

// OwnerRef is OwnerReference as a typed value, for the objects the
// operator creates or patches rather than applies.
func OwnerRef(stack *v1alpha2.InferenceStack) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: StackAPIVersion(stack), Kind: "InferenceStack", Name: stack.Name, UID: stack.UID,
		Controller: &yes, BlockOwnerDeletion: &yes}
}

// StackAPIVersion is the API version the operator reads the stack in (its
// TypeMeta, set by the operator's client: operator/internal/wire), v1alpha1
// when unset.
func StackAPIVersion(stack *v1alpha2.InferenceStack) string {
	if gv, err := schema.ParseGroupVersion(stack.APIVersion); err == nil && gv.Group == v1alpha2.GroupVersion.Group && stack.Kind == "InferenceStack" {
		return stack.APIVersion
	}
	return v1alpha2.GroupVersion.String()
}

// Owned reports whether a live object was made by the operator for the
// stack: it carries the stack's instance label and, when namespaced, the
// stack as controller.
func Owned(stack *v1alpha2.InferenceStack) func(metav1.Object) bool {
	return func(obj metav1.Object) bool {
		l := obj.GetLabels()
		if l[LabelManagedBy] != ManagedBy || l[LabelInstance] != stack.Name {
			return false
		}
		if obj.GetNamespace() == "" {
			return l[LabelStackNamespace] == stack.Namespace
		}
		ref := metav1.GetControllerOf(obj)
		return ref != nil && ref.UID == stack.UID
	}
}

// Unowned reports whether a live object carries the stack's labels, for
// objects the operator deliberately makes without an owner reference (the
// cache volume and its password, which outlive the stack).
func Unowned(stack *v1alpha2.InferenceStack) func(metav1.Object) bool {
	return func(obj metav1.Object) bool {
		l := obj.GetLabels()
		return l[LabelManagedBy] == ManagedBy && l[LabelInstance] == stack.Name
	}
}

// Convert turns a typed API value (a corev1.EnvVar, a ResourceRequirements)
// into its apply configuration through their shared JSON form. It panics on
// values that do not encode, which typed API values always do.
func Convert[T any](in any) *T {
	data, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("decoding %T into %T: %v", in, out, err))
	}
	return out
}
