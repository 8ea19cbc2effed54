package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
)

// StackSelector selects the InferenceStacks the operator of major reconciles:
// those labelled v1alpha1.LabelOperatorMajor=major, narrowed by extra (nil:
// no narrowing). The manager's cache holds only these (CacheOptions), so the
// operator of another major never even sees them.
func StackSelector(major string, extra labels.Selector) (labels.Selector, error) {
	req, err := labels.NewRequirement(v1alpha1.LabelOperatorMajor, selection.Equals, []string{major})
	if err != nil {
		return nil, fmt.Errorf("operator major %q: %w", major, err)
	}
	sel := labels.NewSelector().Add(*req)
	if extra != nil {
		reqs, _ := extra.Requirements()
		sel = sel.Add(reqs...)
	}
	return sel, nil
}

// unlabeled selects the InferenceStacks no major has been assigned, narrowed
// by extra (nil: no narrowing).
func unlabeled(extra labels.Selector) labels.Selector {
	req, _ := labels.NewRequirement(v1alpha1.LabelOperatorMajor, selection.DoesNotExist, nil)
	sel := labels.NewSelector().Add(*req)
	if extra != nil {
		reqs, _ := extra.Requirements()
		sel = sel.Add(reqs...)
	}
	return sel
}

// Claimer gives unlabelled InferenceStacks to one major: it labels each with
// v1alpha1.LabelOperatorMajor=Major, after which that major's cache sees it,
// and adds the Finalizer in the same patch, so the stack's first reconcile
// finds its metadata complete and writes none. It records no Event: the
// label is the record. Run it in exactly one major
// (the one whose release takes unlabelled stacks); if two did, the
// optimistic lock of the patch still lets only the first one claim a stack.
// It holds only the metadata of unlabelled stacks, in a cache of its own.
type Claimer struct {
	// Client writes the label.
	Client client.Client
	// Major is the operator's major version.
	Major string
	// Extra narrows the stacks it claims, like StackSelector's (nil: all).
	Extra labels.Selector
	// Concurrency is how many stacks are claimed at once; 0 means
	// DefaultConcurrency.
	Concurrency int
	// APIVersion is the InferenceStack version the operator reads (zero:
	// v1alpha1).
	APIVersion schema.GroupVersion

	cache cache.Cache
}

// SetupWithManager starts the Claimer's cache and controller with the manager
// (on the elected leader only, like the InferenceStack controller).
func (c *Claimer) SetupWithManager(mgr ctrl.Manager) error {
	var err error
	c.cache, err = cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: unlabeled(c.Extra),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return fmt.Errorf("creating the cache of unlabelled InferenceStacks: %w", err)
	}
	if err := mgr.Add(c.cache); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("inferencestack-claim").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency(c.Concurrency)}).
		WatchesRawSource(source.Kind(c.cache, c.stackMetadata(),
			&handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{})).
		Complete(c)
}

func (c *Claimer) stackMetadata() *metav1.PartialObjectMetadata {
	gv := c.APIVersion
	if gv.Empty() {
		gv = v1alpha1.GroupVersion
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gv.WithKind("InferenceStack"))
	return m
}

// Reconcile labels one unlabelled InferenceStack with the Claimer's major and
// adds the Finalizer, in one patch.
func (c *Claimer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	stack := c.stackMetadata()
	if err := c.cache.Get(ctx, req.NamespacedName, stack); err != nil {
		// Gone, or labelled since (so no longer in this cache).
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := stack.Labels[v1alpha1.LabelOperatorMajor]; ok || !stack.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(stack.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if stack.Labels == nil {
		stack.Labels = map[string]string{}
	}
	stack.Labels[v1alpha1.LabelOperatorMajor] = c.Major
	controllerutil.AddFinalizer(stack, Finalizer)
	if err := c.Client.Patch(ctx, stack, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed (perhaps labelled by someone else) or deleted meanwhile:
			// the cache's event of that change brings it back, if it is still
			// unlabelled.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("labelling InferenceStack %s with %s=%s and adding finalizer %s: %w",
			req, v1alpha1.LabelOperatorMajor, c.Major, Finalizer, err)
	}
	// The label says it on the stack; an Event would be one more write for
	// every new stack (creation keeps to one write per object and one of
	// the status, besides this patch).
	log.FromContext(ctx).Info("unlabelled, so taken by this operator's major, which takes unlabelled stacks; set the label to another major to hand it over",
		"label", v1alpha1.LabelOperatorMajor, "major", c.Major)
	return reconcile.Result{}, nil
}
