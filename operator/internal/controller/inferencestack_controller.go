// Package controller reconciles InferenceStacks: one outer Reconcile fetches
// the stack, runs the component steps in order on a deep copy, and writes
// the status once, only when it changed. A finalizer removes what owner
// references cannot.
package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/internal/wire"
	"github.com/inferencestack/inferencestack/operator/pin"
)

// Finalizer held a deleted InferenceStack until what owner references did
// not remove was cleaned up. Earlier releases added it; this one adds it to
// no stack (owner references now remove all a stack must take with it, and
// what stays is said and tidied when its deletion is seen: deleted), and
// finalizes the stacks that still carry it.
const Finalizer = "inferencestack.io/cleanup"

// referencesIndex indexes InferenceStacks by the user objects they
// reference (config.IndexKey).
const referencesIndex = ".spec.references"

// Defaults of the reconciler's timings.
const (
	DefaultRetryInterval    = 15 * time.Second
	DefaultFinalizerTimeout = 2 * time.Minute
)

// InferenceStackReconciler reconciles InferenceStacks.
type InferenceStackReconciler struct {
	// Client reads from the manager's cache and writes to the API server;
	// SetupWithManager makes it and APIReader read InferenceStacks in
	// APIVersion as hub objects (wire.Client).
	Client client.Client
	// APIVersion is the InferenceStack version the operator reads, watches
	// and indexes (zero: v1alpha1, converted to the hub the reconciler works
	// on).
	APIVersion schema.GroupVersion
	// APIReader reads user objects the cache does not hold yet.
	APIReader client.Reader
	// Recorder emits events on InferenceStacks.
	Recorder events.EventRecorder
	// Pin is this operator release's operand pin.
	Pin pin.Pin
	// CacheImage is the PostgreSQL image of spec.cache.
	CacheImage string
	// CacheRunAsUser is the user PostgreSQL runs as; nil leaves it to the
	// platform (cache.Pod).
	CacheRunAsUser *int64
	// ServerFSGroup is the server pod's fsGroup with a state volume; nil
	// leaves it to the platform (server.Inputs.FSGroup).
	ServerFSGroup *int64
	// RetryInterval is how soon a stack waiting for a user object is looked
	// at again (the cache does not see user objects until they exist and
	// are labelled).
	RetryInterval time.Duration
	// FinalizerTimeout bounds how long a failing cleanup holds a deleted
	// stack; after it the finalizer is removed with a warning event.
	FinalizerTimeout time.Duration
	// Concurrency is how many stacks are reconciled at once; 0 means
	// DefaultConcurrency.
	Concurrency int
	// Prober, when set, reads what each Available server says of itself
	// (status.server, condition ProvidersHealthy); SetupWithManager adds
	// it to the manager.
	Prober *serverstatus.Prober
	// OperatorPeer, when set, is the operator's own pods (namespace and
	// labels), which every server's NetworkPolicy admits on the server's
	// port whatever networking.allowedFrom says, so that Prober reaches
	// the servers; main sets it with Prober when it knows its namespace.
	OperatorPeer *network.OperatorPeer
	// RouteCheckInterval is how often, at most, the operator asks whether
	// the API server serves OpenShift Routes while a stack asks for one and
	// it does not; 0 means DefaultRouteCheckInterval.
	RouteCheckInterval time.Duration
	// TakeUnlabeled, when set, selects InferenceStacks without the
	// v1alpha2.LabelOperatorMajor label (Unlabeled) that this operator
	// reconciles too, from a cache of their own, without labelling them:
	// the operator of the one major whose release takes unlabelled stacks
	// sets it. Its status (resolvedDistribution.operatorVersion) records
	// that this major took a stack; one another major took is labelled for
	// that major (leave).
	TakeUnlabeled labels.Selector

	// major is the major of Pin's operator version (with TakeUnlabeled).
	major string
	// applier applies the stacks' objects; SetupWithManager makes it.
	applier *apply.Applier
	// watching shares the reads and label patches of user objects between
	// concurrent reconciles.
	watching singleflight.Group
	// configs remembers each stack's run config and what it was made from.
	configs configMemo
	// judged is, for each stack read through v1alpha1, the digest of the
	// spec specStep last judged by v1alpha2's rules and its verdict
	// (specVerdict): an unchanged spec is not judged again.
	judged sync.Map
	// lastEvents is the reason and note of the last status Event of each
	// kind of each stack (statusEvents).
	lastEvents sync.Map
	// deletedStacks holds, by name, the last state the cache saw of each
	// stack whose delete event came, until the reconcile of that name has
	// said and tidied what its deletion left (deleted).
	deletedStacks sync.Map
	// deletionsHandled counts the delete events deleted has handled (for
	// tests: DeletionsHandled).
	deletionsHandled atomic.Int64
	// swept tells that the sweep at start-up (unwatchAll) has run (for
	// tests: Swept).
	swept atomic.Bool
	// routes tells whether the API server serves OpenShift Routes;
	// SetupWithManager makes it.
	routes *routeAPI
	// reconciled, when set, is told of each finished reconcile of a stack
	// the cache holds: the stack as the reconcile read it, and the error it
	// returned. Only tests set it (OnReconciled in export_test.go), to learn
	// that a reconcile which saw a change has finished.
	reconciled func(stack *v1alpha2.InferenceStack, err error)
}

// SpecsJudged is how many times the reconciler judged a spec of the stack
// by v1alpha2's rules (specStep): once per spec it read through v1alpha1.
func (r *InferenceStackReconciler) SpecsJudged(uid types.UID) int {
	v, _ := r.judged.Load(uid)
	s, _ := v.(specVerdict)
	return s.judged
}

// RunConfigsMade is how many run configs the reconciler has made and applied
// (generated, or taken from an override and checked) for the stack with uid
// since it started: a reconcile whose stack generation, pin and override
// are as they were, and whose ConfigMap still holds what it applied, makes
// none.
func (r *InferenceStackReconciler) RunConfigsMade(uid types.UID) int { return r.configs.made(uid) }

// DefaultConcurrency is how many stacks are reconciled at once unless told
// otherwise: a reconcile spends most of its time waiting for the API
// server, so a few per CPU the process may use (GOMAXPROCS, which follows
// the container's CPU limit) keep both the operator and the API server
// busy.
func DefaultConcurrency() int { return 4 * runtime.GOMAXPROCS(0) }

func concurrency(n int) int {
	if n > 0 {
		return n
	}
	return DefaultConcurrency()
}

// +kubebuilder:rbac:groups=inferencestack.io,resources=inferencestacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=inferencestack.io,resources=inferencestacks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=inferencestack.io,resources=inferencestacks/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;services;serviceaccounts;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;update;patch;delete
// rbac: the server's OpenShift Route (networking.route), applied as unstructured (network.Route)
// +kubebuilder:rbac:groups=route.openshift.io,resources=routes,verbs=get;list;watch;create;patch;delete
// rbac: OpenShift's route admission requires it to set (create) or change (update) a Route's host: networking.route.host
// +kubebuilder:rbac:groups=route.openshift.io,resources=routes/custom-host,verbs=create;update
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// rbac: the event recorder (k8s.io/client-go/tools/events) writes events.k8s.io Events on InferenceStacks
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one InferenceStack's objects and status to its spec.
func (r *InferenceStackReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	if last, ok := r.deletedStacks.Load(req.NamespacedName); ok {
		if err := r.deleted(ctx, last.(*v1alpha2.InferenceStack)); err != nil {
			return ctrl.Result{}, err
		}
		r.deletedStacks.CompareAndDelete(req.NamespacedName, last)
		r.deletionsHandled.Add(1)
	}
	original := &v1alpha2.InferenceStack{}
	if err := r.Client.Get(ctx, req.NamespacedName, original); err != nil {
		// A stack gone from the cache was forgotten on its delete event
		// (forget).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.applier.Behind(original) {
		// The cache has not seen this operator's last write of the stack
		// yet; compared with an older status, the same status would be
		// written again.
		original = &v1alpha2.InferenceStack{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, original); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if r.reconciled != nil {
		read := original
		defer func() { r.reconciled(read, err) }()
	}
	if major, ok := r.takenByAnother(original); ok {
		return ctrl.Result{}, r.leave(ctx, original, major)
	}
	stack := original.DeepCopy()
	if !stack.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, original, stack)
	}

	s := &state{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder, Stack: stack, Pin: r.Pin, Applier: r.applier, Watching: &r.watching,
		Configs: &r.configs}
	if r.Prober != nil {
		s.Servers = r.Prober
	}
	stepErr := r.runSteps(ctx, s)
	r.setStatus(ctx, s, stepErr)
	if !equality.Semantic.DeepEqual(original.Status, stack.Status) {
		patch := client.MergeFrom(original)
		if r.TakeUnlabeled != nil && !labelled(original) && reconciledBy(original) != r.major {
			// This status takes an unlabelled stack for this major (it
			// names this major's release): if another major that takes
			// unlabelled stacks took it meanwhile, its write wins and the
			// next reconcile leaves the stack to it.
			patch = client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
		}
		if err := r.Client.Status().Patch(ctx, stack, patch); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
			return ctrl.Result{}, errors.Join(stepErr, fmt.Errorf("writing status: %w", err))
		}
		r.applier.Wrote(stack)
		r.statusEvents(original, stack)
	}
	var ce *conditionError
	if errors.As(stepErr, &ce) {
		// The user has to act. Where the act shows in an event (a spec
		// change, a watched object's change), that event brings the stack
		// back; where it does not (an object the cache does not hold yet, or
		// any more), look again now and then, without error backoff.
		if ce.Reason == v1alpha2.ReasonRouteNotServed {
			return ctrl.Result{RequeueAfter: r.routeCheckInterval()}, nil
		}
		if ce.retry || slices.Contains(waitingOutsideTheCache, ce.Reason) {
			return ctrl.Result{RequeueAfter: r.retryInterval()}, nil
		}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, stepErr
}

// statusEvents records, as Events on the stack (kubectl describe), what
// the status write from before to after changed that a user acts on: the
// Degraded condition turning True or changing its cause (a refused config,
// a missing Secret, ...: a Warning with that reason), else a new phase; and
// the server's providers: a Warning when one turns unhealthy (or the set of
// unhealthy ones changes), a Normal event when none is any more. The server
// being unreachable is no event of its own: the phase and the other
// conditions say why. Only changes are recorded, so an idle stack records
// none, and not the first phase of a new stack, so a stack that deploys
// costs no Event. The last Event of each kind of each stack is remembered,
// so a status written twice (a reconcile that read a stale stack) does not
// record the same change twice.
func (r *InferenceStackReconciler) statusEvents(before, after *v1alpha2.InferenceStack) {
	from, to := before.Status.Phase, after.Status.Phase
	was := meta.FindStatusCondition(before.Status.Conditions, v1alpha2.TypeDegraded)
	is := meta.FindStatusCondition(after.Status.Conditions, v1alpha2.TypeDegraded)
	switch {
	case is != nil && is.Status == metav1.ConditionTrue && (was == nil || was.Status != metav1.ConditionTrue || was.Reason != is.Reason):
		r.event(after, eventPhase, corev1.EventTypeWarning, is.Reason, "Reconcile", fmt.Sprintf("phase %s: %s", to, is.Message))
	case from != "" && from != to:
		r.event(after, eventPhase, corev1.EventTypeNormal, "Phase"+string(to), "Reconcile", fmt.Sprintf("phase %s (was %s)", to, from))
	}
	was = meta.FindStatusCondition(before.Status.Conditions, v1alpha2.TypeProvidersHealthy)
	is = meta.FindStatusCondition(after.Status.Conditions, v1alpha2.TypeProvidersHealthy)
	switch {
	case is != nil && is.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse || was.Message != is.Message):
		r.event(after, eventProviders, corev1.EventTypeWarning, is.Reason, "ReadServerStatus", is.Message)
	case is != nil && is.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
		r.event(after, eventProviders, corev1.EventTypeNormal, is.Reason, "ReadServerStatus", is.Message)
	}
}

// The kinds of status Events, each deduplicated on its own (event).
const (
	eventPhase     = "phase"
	eventProviders = "providers"
)

// lastEvent keys the last status Event of one kind (eventPhase,
// eventProviders) of one stack.
type lastEvent struct {
	uid  types.UID
	kind string
}

// event records an Event of kind on stack unless the last one of that kind
// said the same.
func (r *InferenceStackReconciler) event(stack *v1alpha2.InferenceStack, kind, eventType, reason, action, note string) {
	if last, ok := r.lastEvents.Swap(lastEvent{stack.UID, kind}, reason+"\x00"+note); ok && last == reason+"\x00"+note {
		return
	}
	r.Recorder.Eventf(stack, nil, eventType, reason, action, "%s", note)
}

// deleted says and tidies what the deletion of a stack this operator
// reconciled (and that is gone from the API server) left behind, from the
// last state its cache saw (last): an event on it for each volume kept by
// retainOnDelete (those not kept are owned by the stack, so the garbage
// collector deletes them), and the watched label removed from the user
// objects no stack references any more. A stack deleted while the operator was not running gets no event;
// its labels go in the sweep at start-up (unwatchAll).
func (r *InferenceStackReconciler) deleted(ctx context.Context, last *v1alpha2.InferenceStack) error {
	if _, ok := r.takenByAnother(last); ok {
		return nil
	}
	// A stack also leaves the cache, with a delete event, when it is
	// relabelled for another major: that one reconciles it now.
	now := &v1alpha2.InferenceStack{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(last), now)
	if err == nil && now.UID == last.UID {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading InferenceStack %s/%s, whose delete event came: %w", last.Namespace, last.Name, err)
	}
	if cachecomp.Retained(last) && r.kept(ctx, &corev1.PersistentVolumeClaim{}, last, cachecomp.PVCName(last)) {
		r.Recorder.Eventf(last, nil, corev1.EventTypeNormal, "CacheRetained", "Delete",
			"kept PersistentVolumeClaim %s and Secret %s (cache.retainOnDelete): delete them with "+
				"kubectl delete -n %s pvc/%s secret/%s",
			cachecomp.PVCName(last), cachecomp.SecretName(last), last.Namespace, cachecomp.PVCName(last), cachecomp.SecretName(last))
	}
	if server.StateRetained(last) && r.kept(ctx, &corev1.PersistentVolumeClaim{}, last, server.StateVolumeName(last)) {
		r.Recorder.Eventf(last, nil, corev1.EventTypeNormal, "StateRetained", "Delete",
			"kept PersistentVolumeClaim %s (workload.stateVolume.retainOnDelete): delete it with kubectl delete -n %s pvc/%s",
			server.StateVolumeName(last), last.Namespace, server.StateVolumeName(last))
	}
	return unwatch(ctx, r.Client, r.APIReader, last, true)
}

// kept reports whether the object name of the deleted stack's namespace is
// in the cache, made by the operator for that stack and not being deleted.
func (r *InferenceStackReconciler) kept(ctx context.Context, obj client.Object, stack *v1alpha2.InferenceStack, name string) bool {
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, obj)
	return err == nil && components.Unowned(stack)(obj) && obj.GetDeletionTimestamp() == nil
}

// waitingOutsideTheCache are the reasons of conditions that wait for a user
// object that does not exist, or is not labelled, so no event of the cache
// tells when it changes.
var waitingOutsideTheCache = []string{
	v1alpha2.ReasonSecretNotFound, v1alpha2.ReasonOverrideConfigNotFound, v1alpha2.ReasonCacheNotReady,
}

// finalize cleans up a deleted stack that carries the finalizer (from an
// earlier release) and removes it; the events on what was kept come with
// its delete event, as for every stack (deleted).
func (r *InferenceStackReconciler) finalize(ctx context.Context, original, stack *v1alpha2.InferenceStack) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(stack, Finalizer) {
		return ctrl.Result{}, nil
	}
	cleanupErr := errors.Join(r.cleanupCache(ctx, stack), r.cleanupState(ctx, stack),
		unwatch(ctx, r.Client, r.APIReader, stack, true))
	if cleanupErr != nil {
		if time.Since(stack.DeletionTimestamp.Time) < r.finalizerTimeout() {
			stack.Status.Phase = v1alpha2.PhaseDeleting
			meta.SetStatusCondition(&stack.Status.Conditions, metav1.Condition{
				Type: v1alpha2.TypeDegraded, Status: metav1.ConditionTrue, Reason: v1alpha2.ReasonDeleting,
				ObservedGeneration: stack.Generation, Message: "cleanup failed, retrying: " + cleanupErr.Error(),
			})
			if !equality.Semantic.DeepEqual(original.Status, stack.Status) {
				_ = r.Client.Status().Patch(ctx, stack, client.MergeFrom(original))
			}
			return ctrl.Result{}, cleanupErr
		}
		r.Recorder.Eventf(stack, nil, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			"gave up cleaning up after %s, remove leftovers by hand: %v", r.finalizerTimeout(), cleanupErr)
	}
	patchBase := stack.DeepCopy()
	controllerutil.RemoveFinalizer(stack, Finalizer)
	if err := r.Client.Patch(ctx, stack, client.MergeFrom(patchBase)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The stack's delete event, which follows, forgets it (forget).
	return ctrl.Result{}, nil
}

// cleanupCache deletes the cache's volume claim and password Secret of a
// stack with the finalizer when cache.retainOnDelete is false (made by a
// release before owner references did it).
func (r *InferenceStackReconciler) cleanupCache(ctx context.Context, stack *v1alpha2.InferenceStack) error {
	if cachecomp.Retained(stack) {
		return nil
	}
	var errs []error
	for _, obj := range []client.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.PVCName(stack), Namespace: stack.Namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.SecretName(stack), Namespace: stack.Namespace}},
	} {
		if _, err := apply.Delete(ctx, r.Client, obj, components.Unowned(stack)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanupState deletes the server's state volume claim of a stack with the
// finalizer when workload.stateVolume.retainOnDelete is false.
func (r *InferenceStackReconciler) cleanupState(ctx context.Context, stack *v1alpha2.InferenceStack) error {
	if server.StateRetained(stack) {
		return nil
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: server.StateVolumeName(stack), Namespace: stack.Namespace}}
	_, err := apply.Delete(ctx, r.Client, pvc, components.Unowned(stack))
	return err
}

func (r *InferenceStackReconciler) retryInterval() time.Duration {
	if r.RetryInterval > 0 {
		return r.RetryInterval
	}
	return DefaultRetryInterval
}

func (r *InferenceStackReconciler) finalizerTimeout() time.Duration {
	if r.FinalizerTimeout > 0 {
		return r.FinalizerTimeout
	}
	return DefaultFinalizerTimeout
}

// SetupWithManager registers the controller, its index and its watches.
func (r *InferenceStackReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	// The reconciler works on the hub: stacks read in another version are
	// converted in the process.
	r.Client, r.APIReader = wire.Client(r.Client, r.APIVersion), wire.Reader(r.APIReader, r.APIVersion)
	err := mgr.GetFieldIndexer().IndexField(ctx, wire.Object(r.APIVersion), referencesIndex, indexReferences)
	if err != nil {
		return fmt.Errorf("indexing InferenceStacks by reference: %w", err)
	}
	if err := IndexUserWatched(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// The base of the caches of their own: unlabelled stacks, Routes.
	cacheBase := cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}
	var unlabeled cache.Cache
	if r.TakeUnlabeled != nil {
		if r.major, err = r.Pin.Major(); err != nil {
			return err
		}
		// Whole stacks, in the version the operator reads, like the
		// manager's cache holds its labelled ones (CacheOptions).
		opts := cacheBase
		opts.DefaultLabelSelector, opts.DefaultTransform = r.TakeUnlabeled, cache.TransformStripManagedFields()
		unlabeled, err = cache.New(mgr.GetConfig(), opts)
		if err != nil {
			return fmt.Errorf("creating the cache of unlabelled InferenceStacks: %w", err)
		}
		if err := unlabeled.IndexField(ctx, wire.Object(r.APIVersion), referencesIndex, indexReferences); err != nil {
			return fmt.Errorf("indexing unlabelled InferenceStacks by reference: %w", err)
		}
		if err := mgr.Add(unlabeled); err != nil {
			return err
		}
		r.Client = withUnlabeled(r.Client, wire.Reader(unlabeled, r.APIVersion))
	}
	r.applier = &apply.Applier{Client: r.Client, Reader: r.APIReader}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("inferencestack").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency(r.Concurrency)}).
		For(wire.Object(r.APIVersion), builder.WithPredicates(r.stackPredicates()...))
	if unlabeled != nil {
		b = b.WatchesRawSource(source.Kind(unlabeled, wire.Object(r.APIVersion), &handler.EnqueueRequestForObject{}, r.stackPredicates()...))
	}
	for _, obj := range append(ownedTypes(), &corev1.Secret{}, &corev1.ConfigMap{}) {
		b = b.Watches(obj, r.objectHandler(), builder.WithPredicates(r.notOwnWrites()))
	}
	b = b.Watches(&corev1.Pod{}, r.objectHandler(), builder.WithPredicates(podFailurePredicate()))
	if r.Prober != nil {
		// A changed result of a server brings its stack back.
		b = b.WatchesRawSource(r.Prober.Source())
		if err := mgr.Add(r.Prober); err != nil {
			return fmt.Errorf("adding the server status prober: %w", err)
		}
	}
	ctl, err := b.Build(r)
	if err != nil {
		return err
	}
	// Labels left by stacks deleted while no operator ran (deleted): swept
	// once the cache has synced, by the leader. A failure is logged; the
	// next deletion in the namespace sweeps it again.
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		if err := unwatchAll(ctx, r.Client, r.APIReader); err != nil {
			log.FromContext(ctx).Error(err, "removing the watched label from user objects no InferenceStack references")
		}
		r.swept.Store(true)
		return nil
	}))
	if err != nil {
		return fmt.Errorf("adding the sweep of watched labels: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("making a discovery client: %w", err)
	}
	// Routes are cached and watched only once the API server serves them
	// (routeAPI).
	// A start that fails (its cache does not sync in time) is tried again
	// on the same cache and watch.
	var routes cache.Cache
	var watch source.SyncingSource
	r.routes = &routeAPI{lookup: dc.ServerResourcesForGroupVersion, interval: r.routeCheckInterval(),
		start: func(ctx context.Context) (client.Reader, error) {
			if routes == nil {
				c, err := cache.New(mgr.GetConfig(), routeCacheOptions(cacheBase))
				if err != nil {
					return nil, err
				}
				if err := mgr.Add(c); err != nil {
					return nil, err
				}
				src := source.Kind(c, client.Object(routeObject()), r.objectHandler(), r.notOwnWrites())
				if err := ctl.Watch(src); err != nil {
					return nil, err
				}
				routes, watch = c, src
			}
			// Bounded: the reconciles that ask meanwhile wait for it (a
			// role without list on routes would never sync).
			wait, cancel := context.WithTimeout(ctx, routeSyncTimeout)
			defer cancel()
			if !routes.WaitForCacheSync(wait) {
				return nil, fmt.Errorf("the cache of Routes did not sync within %s: can the operator list and watch routes.route.openshift.io?", routeSyncTimeout)
			}
			// The watch's handler is added to the running cache in a
			// goroutine of its own. Before it is, nothing may be applied:
			// a change made to a Route in between would reach the handler
			// as the Route's creation, which notOwnWrites drops for the
			// operator's own objects, and the stack would never hear of
			// it (a CI run: a router's admission, status.routeURL never
			// set). Once the cache has synced, this waits only for the
			// handler to get what the cache holds (in the same bound).
			if err := watch.WaitForSync(wait); err != nil {
				return nil, fmt.Errorf("the watch of Routes: %w", err)
			}
			return routes, nil
		}}
	return nil
}

// indexReferences is the referencesIndex of a stack: the user objects it
// references.
func indexReferences(obj client.Object) []string {
	hub, err := wire.Hub(obj)
	if err != nil {
		return nil // a stack that does not convert is refused by the reconcile
	}
	var keys []string
	for _, ref := range config.References(hub.(*v1alpha2.InferenceStack).Spec) {
		keys = append(keys, config.IndexKey(ref.Kind, ref.Name))
	}
	return keys
}

// stackPredicates pass the events of a stack that need a reconcile.
func (r *InferenceStackReconciler) stackPredicates() []predicate.Predicate {
	return []predicate.Predicate{r.observed(), predicate.Or(
		predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{}, deletionPredicate())}
}

// deletionPredicate passes the updates of a stack that the generation does
// not count and that need a reconcile: it was marked deleted, or lost the
// finalizer while alive. (The finalizer's addition, by Reconcile, needs
// none.)
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) ||
			(e.ObjectNew.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(e.ObjectNew, Finalizer) &&
				controllerutil.ContainsFinalizer(e.ObjectOld, Finalizer))
	}}
}

// notOwnWrites drops the events of the objects that say only what the
// operator itself just wrote: the creation of its own objects (the reconcile
// that created one wrote the status from the API server's answer, and the
// stacks are reconciled anyway when the operator starts) and the update to
// exactly the version it applied. What others do to its objects (edits,
// deletions, the Deployment controller's status) and user objects coming
// into the cache pass. It also tells the Applier what the cache has seen.
func (r *InferenceStackReconciler) notOwnWrites() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			r.applier.Observe(e.Object)
			return !ours(e.Object)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !r.applier.Observe(e.ObjectNew)
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.applier.Observe(e.Object)
			return true
		},
	}
}

// observed tells the Applier what the cache saw of the stacks, and passes
// every event.
func (r *InferenceStackReconciler) observed() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { r.observe(e.ObjectNew); return true },
		DeleteFunc: func(e event.DeleteEvent) bool { r.observe(e.Object); r.forget(e.Object); return true },
	}
}

// forget drops what the reconciler remembers of a stack that is gone, and
// keeps its last state for the reconcile that follows (deleted). Its
// delete event is the one place that calls it: a stack without the
// finalizer is never seen deleting by a reconcile, and one with it is gone
// once finalize removes the finalizer.
func (r *InferenceStackReconciler) forget(obj client.Object) {
	hub, err := wire.Hub(obj)
	last, ok := hub.(*v1alpha2.InferenceStack)
	if err != nil || !ok {
		// Not readable as a stack: its labels go in the namespace's next
		// sweep, with no event.
		last = &v1alpha2.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}}
	}
	r.deletedStacks.Store(client.ObjectKeyFromObject(obj), last)
	r.configs.forget(obj.GetUID())
	for _, kind := range []string{eventPhase, eventProviders} {
		r.lastEvents.Delete(lastEvent{obj.GetUID(), kind})
	}
	r.judged.Delete(obj.GetUID())
	if r.Prober != nil {
		r.Prober.Forget(client.ObjectKeyFromObject(obj))
	}
}

// observe tells the Applier of a stack the cache saw, keyed as the
// reconciler's writes are: as a hub object.
func (r *InferenceStackReconciler) observe(obj client.Object) {
	r.applier.Observe(wire.Key(obj))
}

// ours reports whether the operator made obj.
func ours(obj client.Object) bool {
	return obj.GetLabels()[components.LabelManagedBy] == components.ManagedBy
}

// objectHandler maps the events of an object to the InferenceStacks it
// belongs to or that reference it; a user object's arrival in the cache
// (the operator labelled it, or it was made labelled) matters only to the
// stacks that reference it and are Degraded (waiting for it): the others
// read it already.
func (r *InferenceStackReconciler) objectHandler() handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], arriving bool) {
		for _, req := range r.stacksOf(ctx, obj, arriving) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, true)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q, false)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
	}
}

// stacksOf maps an object to the InferenceStacks it belongs to or that
// reference it (of these, when arriving, only the Degraded ones).
func (r *InferenceStackReconciler) stacksOf(ctx context.Context, obj client.Object, arriving bool) []reconcile.Request {
	var reqs []reconcile.Request
	add := func(ns, name string) {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
		if !slices.Contains(reqs, req) {
			reqs = append(reqs, req)
		}
	}
	l := obj.GetLabels()
	if ours(obj) && l[components.LabelInstance] != "" {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = l[components.LabelStackNamespace]
		}
		add(ns, l[components.LabelInstance])
	}
	var kind string
	switch obj.(type) {
	case *corev1.Secret:
		kind = config.KindSecret
	case *corev1.ConfigMap:
		kind = config.KindConfigMap
	default:
		return reqs
	}
	var stacks v1alpha2.InferenceStackList
	if err := r.Client.List(ctx, &stacks, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{referencesIndex: config.IndexKey(kind, obj.GetName())}); err != nil {
		log.FromContext(ctx).Error(err, "listing InferenceStacks that reference an object", "kind", kind, "name", obj.GetName())
		return reqs
	}
	for _, s := range stacks.Items {
		if arriving && !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha2.TypeDegraded) {
			continue
		}
		add(s.Namespace, s.Name)
	}
	return reqs
}
