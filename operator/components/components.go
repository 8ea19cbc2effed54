// Package components holds what the component packages below it share: the
// state one reconcile of an InferenceStack builds up step by step, the
// labels and owner reference of every object the operator makes, and the
// error type a step returns to set a condition.
//
// Each component (config, server, cache, network, auth, scaling) is a
// package with pure builder functions, tested without a cluster, and one
// Step that applies what they build.
package components

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
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
)

// State is what one reconcile of an InferenceStack knows. The controller
// fills the first fields; steps read them and add their results.
type State struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly, for user objects the
	// cache does not hold yet.
	APIReader client.Reader
	// Recorder emits events on the InferenceStack.
	Recorder events.EventRecorder
	// Stack is the working copy; steps set conditions on its status.
	Stack *v1alpha1.InferenceStack
	// Pin is the operand pin of this operator release.
	Pin pin.Pin

	// Image is the server image (set by the config step).
	Image string
	// Config is the run config and its environment (set by the config step).
	Config runconfig.Result
	// ConfigMapName holds the run config under runconfig.ConfigKey (set by
	// the config step).
	ConfigMapName string
	// ReferencesHash is the hash of the data of every user object the
	// server uses (set by the config step).
	ReferencesHash string
	// Waiting, when set by a step, says what the stack waits for (a
	// referenced object that does not exist yet); later steps still run.
	Waiting string
}

// Step is one component's reconcile step.
type Step struct {
	// Name for logs and errors.
	Name string
	// Run applies the component's desired objects and removes the ones no
	// longer desired.
	Run func(ctx context.Context, s *State) error
}

// ConditionError is an error that a user can act on: the controller sets
// condition Type to False (or Degraded to True) with Reason and the error's
// message instead of retrying blindly.
type ConditionError struct {
	Type    string
	Reason  string
	Message string
}

func (e *ConditionError) Error() string { return e.Message }

// Errorf builds a ConditionError.
func Errorf(conditionType, reason, format string, args ...any) *ConditionError {
	return &ConditionError{Type: conditionType, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Labels are the labels of an object of the stack's component.
func Labels(stack *v1alpha1.InferenceStack, component string) map[string]string {
	name := "llama-stack"
	if component == ComponentCache {
		name = "postgres"
	}
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelPartOf:    PartOf,
		LabelName:      name,
		LabelInstance:  stack.Name,
		LabelComponent: component,
	}
}

// SelectorLabels select the pods of the stack's component.
func SelectorLabels(stack *v1alpha1.InferenceStack, component string) map[string]string {
	return map[string]string{LabelInstance: stack.Name, LabelComponent: component, LabelManagedBy: ManagedBy}
}

// OwnerReference makes the stack the controlling owner of a namespaced
// object, so garbage collection removes it with the stack.
func OwnerReference(stack *v1alpha1.InferenceStack) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(v1alpha1.GroupVersion.String()).
		WithKind("InferenceStack").
		WithName(stack.Name).
		WithUID(stack.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// Owned reports whether a live object was made by the operator for the
// stack: it carries the stack's instance label and, when namespaced, the
// stack as controller.
func Owned(stack *v1alpha1.InferenceStack) func(client.Object) bool {
	return func(obj client.Object) bool {
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
func Unowned(stack *v1alpha1.InferenceStack) func(client.Object) bool {
	return func(obj client.Object) bool {
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
