package controller

import (
	"context"
	"fmt"

	"github.com/blang/semver/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// StackSelector selects the InferenceStacks the operator of major reconciles:
// those labelled v1alpha2.LabelOperatorMajor=major, narrowed by extra (nil:
// no narrowing). The manager's cache holds only these (CacheOptions), so the
// operator of another major never even sees them.
func StackSelector(major string, extra labels.Selector) (labels.Selector, error) {
	req, err := labels.NewRequirement(v1alpha2.LabelOperatorMajor, selection.Equals, []string{major})
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

// Unlabeled selects the InferenceStacks no major has been assigned by label,
// narrowed by extra (nil: no narrowing): those the operator of the major
// whose release takes unlabelled stacks reconciles besides its own
// (InferenceStackReconciler.TakeUnlabeled).
func Unlabeled(extra labels.Selector) labels.Selector {
	req, _ := labels.NewRequirement(v1alpha2.LabelOperatorMajor, selection.DoesNotExist, nil)
	sel := labels.NewSelector().Add(*req)
	if extra != nil {
		reqs, _ := extra.Requirements()
		sel = sel.Add(reqs...)
	}
	return sel
}

// labelled reports whether stack is assigned a major by label.
func labelled(stack *v1alpha2.InferenceStack) bool {
	_, ok := stack.Labels[v1alpha2.LabelOperatorMajor]
	return ok
}

// reconciledBy is the major of the operator release that last wrote the
// status of stack (status.resolvedDistribution.operatorVersion), "" when
// none did or it names no semantic version. For an unlabelled stack this is
// the record of which major took it: writing it costs no write of its own,
// it comes with the stack's first status.
func reconciledBy(stack *v1alpha2.InferenceStack) string {
	rd := stack.Status.ResolvedDistribution
	if rd == nil {
		return ""
	}
	v, err := semver.ParseTolerant(rd.OperatorVersion)
	if err != nil {
		return ""
	}
	return fmt.Sprint(v.Major)
}

// takenByAnother reports whether stack is unlabelled and was taken by
// another major than this operator's: its status names that major's
// release. Two majors take unlabelled stacks at once only for a while (one
// was upgraded to a release that takes them before the other to one that
// does not, or the other way round for the one that keeps the stacks it
// reconciled); the stacks one already reconciles stay with it.
func (r *InferenceStackReconciler) takenByAnother(stack *v1alpha2.InferenceStack) (string, bool) {
	if r.TakeUnlabeled == nil || labelled(stack) {
		return "", false
	}
	by := reconciledBy(stack)
	return by, by != "" && by != r.major
}

// leave hands stack, unlabelled but reconciled by major, to that major for
// good: it labels it so (with the optimistic lock, so a label set
// meanwhile, by the user or by that major, wins), which moves it from this
// operator's cache of unlabelled stacks to that major's cache. A stack being
// deleted is left as it is: its major finalizes it.
func (r *InferenceStackReconciler) leave(ctx context.Context, stack *v1alpha2.InferenceStack, major string) error {
	if !stack.DeletionTimestamp.IsZero() {
		return nil
	}
	labelledFor := stack.DeepCopy()
	if labelledFor.Labels == nil {
		labelledFor.Labels = map[string]string{}
	}
	labelledFor.Labels[v1alpha2.LabelOperatorMajor] = major
	patch := client.MergeFromWithOptions(stack, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, labelledFor, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed or deleted meanwhile: the cache's event of that
			// change brings it back if it is still unlabelled.
			return nil
		}
		return fmt.Errorf("labelling InferenceStack %s/%s with %s=%s, the major that reconciles it: %w",
			stack.Namespace, stack.Name, v1alpha2.LabelOperatorMajor, major, err)
	}
	r.applier.Wrote(labelledFor)
	log.FromContext(ctx).Info("unlabelled, but reconciled by another major (status.resolvedDistribution.operatorVersion), which both take unlabelled stacks: labelled for that major; set the label to move it",
		"label", v1alpha2.LabelOperatorMajor, "major", major, "thisMajor", r.major)
	return nil
}

// withUnlabeled is c reading InferenceStacks (as the reconciler does, in
// the hub version) from unlabeled too: Get from unlabeled what c does not hold, List
// from both. The two caches hold disjoint stacks (one selects a value of
// the major label, the other its absence).
func withUnlabeled(c client.Client, unlabeled client.Reader) client.Client {
	return &unionClient{Client: c, unlabeled: unlabeled}
}

type unionClient struct {
	client.Client
	unlabeled client.Reader
}

func (c *unionClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*v1alpha2.InferenceStack); ok && apierrors.IsNotFound(err) {
		return c.unlabeled.Get(ctx, key, obj, opts...)
	}
	return err
}

func (c *unionClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	stacks, ok := list.(*v1alpha2.InferenceStackList)
	if !ok {
		return nil
	}
	more := &v1alpha2.InferenceStackList{}
	if err := c.unlabeled.List(ctx, more, opts...); err != nil {
		return err
	}
	stacks.Items = append(stacks.Items, more.Items...)
	return nil
}
