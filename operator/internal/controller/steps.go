package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/singleflight"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2/validation"
	"github.com/inferencestack/inferencestack/operator/apply"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/internal/wire"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// state is what one reconcile of an InferenceStack works on: the clients,
// the working copy of the stack (steps set conditions on its status) and
// the operand pin, and what the config step made, for the status.
type state struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly, for user objects the
	// cache does not hold yet.
	APIReader client.Reader
	// Recorder emits events on the InferenceStack.
	Recorder events.EventRecorder
	// Stack is the working copy.
	Stack *v1alpha2.InferenceStack
	// Pin is the operand pin of this operator release.
	Pin pin.Pin
	// Applier applies the builders' objects, skipping writes that would
	// change nothing.
	Applier *apply.Applier
	// Watching makes concurrent reconciles that read and label the same user
	// object (by config.IndexKey of its kind and key) share that work.
	Watching *singleflight.Group
	// Configs remembers the run config made for each stack and from what.
	Configs *configMemo
	// Servers, when set, lists what a stack's server holds (a line move
	// names what it drops): the prober.
	Servers serverLister
	// rendered is the config step's output (as far as it got).
	rendered rendered
	// live holds the objects the status describes as the steps left them
	// (read, or as the API server answered their write), so the status
	// written after a step wrote them need not wait for the cache.
	live live
}

// live are the objects the status describes; nil: not applied by this
// reconcile (the status reads them from the cache).
type live struct {
	serverDeployment *appsv1.Deployment
	serverService    *corev1.Service
	cacheDeployment  *appsv1.Deployment
	// ingress: the server's Ingress was applied; route: the server's Route
	// as applied.
	ingress bool
	route   *unstructured.Unstructured
}

// rendered is what the config step makes, and the server step's input.
type rendered struct {
	// Image is the server image.
	Image string
	// Config is the run config and its environment.
	Config runconfig.Result
	// ConfigMapName holds the run config under runconfig.ConfigKey.
	ConfigMapName string
	// ReferencesHash is the hash of the data of every user object the
	// server uses.
	ReferencesHash string
}

// step is one component's reconcile step: it applies the component's
// desired objects (built by its pure builders) and removes the ones no
// longer desired.
type step struct {
	name string
	run  func(ctx context.Context, s *state) error
}

// conditionError is an error that a user can act on: the controller sets
// condition Type to False (or Degraded to True) with Reason and the error's
// message instead of retrying blindly.
type conditionError struct {
	Type    string
	Reason  string
	Message string
	// retry: the reconcile looks again after the retry interval (what it
	// needs may change with no event that brings the stack back).
	retry bool
}

func (e *conditionError) Error() string { return e.Message }

// errorf builds a conditionError.
func errorf(conditionType, reason, format string, args ...any) *conditionError {
	return &conditionError{Type: conditionType, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// steps are the steps after the config step, which takes the config
// step's output explicitly.
func (r *InferenceStackReconciler) steps(out rendered) []step {
	pod := cachecomp.Pod{Image: r.CacheImage, RunAsUser: r.CacheRunAsUser}
	return []step{
		{"cache", func(ctx context.Context, s *state) error { return cacheStep(ctx, s, pod) }},
		{"server", func(ctx context.Context, s *state) error { return serverStep(ctx, s, out, r.ServerFSGroup) }},
		{"network", func(ctx context.Context, s *state) error { return networkStep(ctx, s, r.OperatorPeer) }},
		{"scaling", scalingStep},
		// Last: a Route the cluster cannot serve stops no other object.
		{"expose", r.exposeStep},
	}
}

// runSteps runs the config step, then the others with its output; it
// stops at the first error. A conditionError is returned as it is, so the
// status can name it.
func (r *InferenceStackReconciler) runSteps(ctx context.Context, s *state) error {
	if err := r.specStep(s); err != nil {
		return err
	}
	if err := lineStep(ctx, s); err != nil {
		return stepError("line", err)
	}
	out, err := configStep(ctx, s)
	s.rendered = out
	if err != nil {
		return stepError("config", err)
	}
	for _, st := range r.steps(out) {
		if err := st.run(ctx, s); err != nil {
			return stepError(st.name, err)
		}
	}
	return nil
}

func stepError(name string, err error) error {
	var ce *conditionError
	if errors.As(err, &ce) {
		return err
	}
	if fe := (*apply.ForeignError)(nil); errors.As(err, &fe) {
		return errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonNameTaken, "%s", fe.Error())
	}
	return fmt.Errorf("step %s: %w", name, err)
}

// specStep refuses, before anything is made or changed, a stack read
// through v1alpha1 whose spec breaks a rule of v1alpha2: the API server
// judged only v1alpha1's schema, and what v1alpha1 cannot express came
// through the conversion's annotations, which it saw as strings. The rules
// are the v1alpha2 CRD's own (validation.Validate: its schema and CEL
// rules); an annotation conversion could not apply is named too
// (v1alpha1.AnnotationProblems). A stack read in v1alpha2 was judged by the
// API server.
// The verdict is remembered per stack with the digest of the spec it
// judged (the converted spec, annotations applied: an annotation edit
// changes no generation), so an unchanged spec costs no second judgement.
func (r *InferenceStackReconciler) specStep(s *state) error {
	errs := v1alpha1.AnnotationProblems(s.Stack)
	if wire.Converted(r.APIVersion) {
		errs = append(errs, r.validate(s.Stack)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonInvalidSpec,
		"%v: v1alpha2 refuses it; a v1alpha1 client sets v1alpha2's fields through the annotations %s (spec.scaling.autoscaling.metrics) and %s (every other field v1alpha1 lacks): correct them there, or write the stack through v1alpha2 (docs/api-versions.md)",
		errs.ToAggregate(), v1alpha2.MetricsAnnotation, v1alpha2.SpecAnnotation)
}

// specVerdict is what specStep found of a spec, by its digest.
type specVerdict struct {
	digest [sha256.Size]byte
	errs   field.ErrorList
	// judged counts the judgements of the stack's specs (SpecsJudged).
	judged int
}

// validate is validation.Validate of stack's spec, remembered (judged)
// while the spec stays the same.
func (r *InferenceStackReconciler) validate(stack *v1alpha2.InferenceStack) field.ErrorList {
	data, err := json.Marshal(stack.Spec)
	if err != nil {
		return validation.Validate(stack)
	}
	digest := sha256.Sum256(data)
	last, _ := r.judged.Load(stack.UID)
	if v, ok := last.(specVerdict); ok && v.digest == digest {
		return v.errs
	}
	errs := validation.Validate(stack)
	v, _ := last.(specVerdict)
	r.judged.Store(stack.UID, specVerdict{digest: digest, errs: errs, judged: v.judged + 1})
	return errs
}
