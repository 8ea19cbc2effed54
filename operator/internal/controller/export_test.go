package controller

import (
	"errors"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// RunConfig is what the config step makes of a stack's generated run
// config under a pin: the config, or the condition the reconcile sets
// (its type and reason) with the error.
func RunConfig(stack *v1alpha2.InferenceStack, p pin.Pin) (result runconfig.Result, conditionType, reason string, err error) {
	result, err = makeRunConfig(&state{Stack: stack, Pin: p}, nil)
	var c *conditionError
	if errors.As(err, &c) {
		return result, c.Type, c.Reason, err
	}
	return result, "", "", err
}

// OnReconciled makes r tell f of each finished reconcile of a stack its
// cache holds: the stack as that reconcile read it, and the error it
// returned. Call it before the manager starts.
func OnReconciled(r *InferenceStackReconciler, f func(stack *v1alpha2.InferenceStack, err error)) {
	r.reconciled = f
}

// StatusEvents is the Event recording of a status write from before to
// after.
func StatusEvents(r *InferenceStackReconciler, before, after *v1alpha2.InferenceStack) {
	r.statusEvents(before, after)
}

// WatchedUserObjects are the user Secrets and ConfigMaps of namespace that
// the cache behind c holds as watched.
var WatchedUserObjects = watchedUserObjects

// DeletionsHandled is how many delete events of stacks r has handled (said
// and tidied what they left, or found the stack only left its cache).
func DeletionsHandled(r *InferenceStackReconciler) int64 { return r.deletionsHandled.Load() }

// Swept reports whether r's sweep of watched labels at start-up has run.
func Swept(r *InferenceStackReconciler) bool { return r.swept.Load() }
