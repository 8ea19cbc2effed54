package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

// cacheStep runs the operator-managed PostgreSQL of spec.cache with the pod p.
func cacheStep(ctx context.Context, s *state, p cachecomp.Pod) error {
	stack := s.Stack
	if !cachecomp.Enabled(stack) {
		// Switched off (or never on): stop PostgreSQL, keep its data and
		// password (owned by the stack, so deleted with it, only while
		// spec.cache says retainOnDelete: false).
		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.Name(stack), Namespace: stack.Namespace}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.Name(stack), Namespace: stack.Namespace}},
		} {
			if _, err := apply.Delete(ctx, s.Client, obj, components.Owned(stack)); err != nil {
				return err
			}
		}
		for _, obj := range []client.Object{
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.PVCName(stack), Namespace: stack.Namespace}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cachecomp.SecretName(stack), Namespace: stack.Namespace}},
		} {
			if err := ownedUnlessRetained(ctx, s, obj, nil, cachecomp.Retained(stack)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := ensureCachePassword(ctx, s); err != nil {
		return err
	}
	pvc, _, err := apply.Apply(ctx, s.Applier, apply.PersistentVolumeClaim, cachecomp.PVC(stack))
	if err != nil {
		return err
	}
	if err := ownedUnlessRetained(ctx, s, pvc, pvc, cachecomp.Retained(stack)); err != nil {
		return err
	}
	dep, _, err := apply.Apply(ctx, s.Applier, apply.Deployment, cachecomp.Deployment(stack, p))
	if err != nil {
		return err
	}
	s.live.cacheDeployment = dep
	_, _, err = apply.Apply(ctx, s.Applier, apply.Service, cachecomp.Service(stack))
	return err
}

// ensureCachePassword creates the password Secret when it does not exist; an
// existing one is never changed, so the data on the volume stays readable.
func ensureCachePassword(ctx context.Context, s *state) error {
	key := client.ObjectKey{Namespace: s.Stack.Namespace, Name: cachecomp.SecretName(s.Stack)}
	cached := &corev1.Secret{}
	err := s.Client.Get(ctx, key, cached)
	if err == nil {
		return ownedUnlessRetained(ctx, s, cached, cached, cachecomp.Retained(s.Stack))
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the cache password Secret %s: %w", key, err)
	}
	// The cache holds only labelled Secrets: ask the API server before
	// creating, so a Secret someone else made under this name is not hidden.
	// (One the operator made may not have reached its cache yet.)
	existing := &corev1.Secret{}
	if err := s.APIReader.Get(ctx, key, existing); err == nil {
		if components.Unowned(s.Stack)(existing) {
			return ownedUnlessRetained(ctx, s, existing, existing, cachecomp.Retained(s.Stack))
		}
		return errorf(v1alpha2.TypeDegraded, v1alpha2.ReasonCacheNotReady,
			"Secret %s exists but was not made by the operator (label %s=%s missing): "+
				"delete or rename it, or label it if it holds the cache password under key %s",
			key, components.LabelManagedBy, components.ManagedBy, runconfig.CachePasswordKey)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the cache password Secret %s: %w", key, err)
	}
	secret, err := cachecomp.PasswordSecret(s.Stack)
	if err != nil {
		return err
	}
	if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the cache password Secret %s: %w", key, err)
	}
	return nil
}

// ownedUnlessRetained makes the stack own one of the volumes or the cache
// password it made (the object obj names; live as just applied or read,
// nil to read it) exactly when retained is false, so that the garbage
// collector deletes it with the stack then and only then. Objects made
// before it are brought to the same rule when spec.*.retainOnDelete
// changes.
func ownedUnlessRetained(ctx context.Context, s *state, obj, live client.Object, retained bool) error {
	_, err := s.Applier.SetOwned(ctx, obj, live, components.Unowned(s.Stack), components.OwnerRef(s.Stack), !retained)
	return err
}
