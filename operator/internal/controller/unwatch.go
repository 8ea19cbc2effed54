package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/config"
)

// unwatch removes the watched label from the user Secrets and ConfigMaps of
// stack's namespace that no InferenceStack there references any more, so the
// operator's cache lets go of them. stack counts with the spec given (it may
// be newer than the cache's), and not at all when it is being deleted. A
// label stays while a stack of any major references the
// object: the cache (this major's stacks) answers first, and only an object
// none of them references is checked against every stack of the namespace,
// read from the API server. The operator's own objects (managed-by label)
// are left alone, and the only write is the label's removal.
func unwatch(ctx context.Context, c client.Client, reader client.Reader, stack *v1alpha2.InferenceStack, deleting bool) error {
	namespace := stack.Namespace
	candidates, err := watchedUserObjects(ctx, c, namespace)
	if err != nil || len(candidates) == 0 {
		return err
	}
	if !deleting {
		dropReferenced(candidates, []v1alpha2.InferenceStack{*stack}, "")
	}
	if len(candidates) == 0 {
		return nil
	}
	// The cache's copy of stack is older than stack (or gone): skip it.
	gone := stack.UID
	for key := range candidates {
		// The index finds the stacks that reference the object; two are
		// enough to know whether one is not stack.
		referencing := &v1alpha2.InferenceStackList{}
		if err := c.List(ctx, referencing, client.InNamespace(namespace), client.MatchingFields{referencesIndex: key},
			client.Limit(2), client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		if slices.ContainsFunc(referencing.Items, func(s v1alpha2.InferenceStack) bool { return s.UID != gone }) {
			delete(candidates, key)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	all := &v1alpha2.InferenceStackList{}
	if err := reader.List(ctx, all, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing the InferenceStacks of namespace %s: %w", namespace, err)
	}
	dropReferenced(candidates, all.Items, gone)
	for _, obj := range candidates {
		obj = obj.DeepCopyObject().(client.Object) // the cache's own object
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		l := maps.Clone(obj.GetLabels())
		delete(l, components.LabelWatched)
		obj.SetLabels(l)
		if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing label %s from %s/%s, which no InferenceStack references any more: %w",
				components.LabelWatched, namespace, obj.GetName(), err)
		}
	}
	return nil
}

// unwatchAll is unwatch for every namespace that has a watched user object
// in the cache, as if a stack there had just been deleted: it removes the
// labels that stacks deleted while the operator was not running left. The
// operator runs it once its cache has synced (SetupWithManager).
func unwatchAll(ctx context.Context, c client.Client, reader client.Reader) error {
	namespaces := map[string]bool{}
	err := eachWatchedUserObject(ctx, c, "", func(_ string, obj client.Object) { namespaces[obj.GetNamespace()] = true })
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		gone := &v1alpha2.InferenceStack{}
		gone.Namespace = ns
		errs = append(errs, unwatch(ctx, c, reader, gone, true))
	}
	return errors.Join(errs...)
}

// watchedUserObjects are the Secrets and ConfigMaps of namespace in the
// cache that carry the watched label and are not the operator's own, by
// config.IndexKey: the cache's own objects, not copies, which the caller
// must not change. They are looked up in the userWatchedIndex: a label
// selector would go through every cached object of the namespace, the
// operator's own ConfigMap of each stack among them, in every reconcile.
func watchedUserObjects(ctx context.Context, c client.Client, namespace string) (map[string]client.Object, error) {
	out := map[string]client.Object{}
	err := eachWatchedUserObject(ctx, c, namespace, func(key string, obj client.Object) { out[key] = obj })
	return out, err
}

// eachWatchedUserObject calls f with each watched user Secret and ConfigMap
// of namespace ("": every namespace) in the cache, by config.IndexKey: the
// cache's own objects, which f must not change.
func eachWatchedUserObject(ctx context.Context, c client.Client, namespace string, f func(key string, obj client.Object)) error {
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingFields{userWatchedIndex: "true"}, client.UnsafeDisableDeepCopy}
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, opts...); err != nil {
		return err
	}
	for i := range secrets.Items {
		f(config.IndexKey(config.KindSecret, secrets.Items[i].Name), &secrets.Items[i])
	}
	configMaps := &corev1.ConfigMapList{}
	if err := c.List(ctx, configMaps, opts...); err != nil {
		return err
	}
	for i := range configMaps.Items {
		f(config.IndexKey(config.KindConfigMap, configMaps.Items[i].Name), &configMaps.Items[i])
	}
	return nil
}

// userWatchedIndex indexes the cached Secrets and ConfigMaps that carry the
// watched label and are not the operator's own under "true".
const userWatchedIndex = ".metadata.labels.userWatched"

// IndexUserWatched adds the userWatchedIndex to the Secrets and ConfigMaps
// of the cache behind indexer (the manager's, before it starts).
func IndexUserWatched(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := indexer.IndexField(ctx, obj, userWatchedIndex, indexUserWatched); err != nil {
			return fmt.Errorf("indexing %T by the watched label: %w", obj, err)
		}
	}
	return nil
}

func indexUserWatched(obj client.Object) []string {
	l := obj.GetLabels()
	if _, own := l[components.LabelManagedBy]; own || l[components.LabelWatched] != "true" {
		return nil
	}
	return []string{"true"}
}

// dropReferenced removes from candidates what a stack of stacks (but the one
// with UID skip) references.
func dropReferenced(candidates map[string]client.Object, stacks []v1alpha2.InferenceStack, skip types.UID) {
	for _, s := range stacks {
		if skip != "" && s.UID == skip {
			continue
		}
		for _, ref := range config.References(s.Spec) {
			delete(candidates, config.IndexKey(ref.Kind, ref.Name))
		}
	}
}
