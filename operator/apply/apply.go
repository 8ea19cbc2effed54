// Package apply writes the operator's objects with server-side apply, and
// skips the write when the live object already holds exactly what the
// operator would apply: a reconcile of an unchanged InferenceStack makes no
// API writes at all.
package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the server-side apply field manager of every object the
// operator writes. Every major version of the operator uses it, so a stack
// handed from one major to the next keeps its objects.
const FieldOwner = "inferencestack-operator"

// Config is an apply configuration of a named object (client-go's
// applyconfigurations types).
type Config interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
}

// Kind ties a typed object to its apply configuration: how to make an empty
// one to read into, and client-go's Extract function for it.
type Kind[O client.Object, C Config] struct {
	New     func() O
	Extract func(O, string) (C, error)
}

// Apply writes desired with server-side apply (forcing ownership) unless the
// fields the operator owns on the live object (read through c, usually the
// manager's cache) already equal it. It reports whether it wrote.
func Apply[O client.Object, C Config](ctx context.Context, c client.Client, kind Kind[O, C], desired C) (bool, error) {
	key := Key(desired)
	live := kind.New()
	err := c.Get(ctx, key, live)
	switch {
	case err == nil:
		current, err := kind.Extract(live, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("reading the fields %s owns on %T %s: %w", FieldOwner, live, key, err)
		}
		same, err := Equal(current, desired)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading %T %s: %w", live, key, err)
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %T %s: %w", live, key, err)
	}
	return true, nil
}

// Key is the object key of an apply configuration.
func Key(c Config) types.NamespacedName {
	var key types.NamespacedName
	if n := c.GetName(); n != nil {
		key.Name = *n
	}
	if ns := c.GetNamespace(); ns != nil {
		key.Namespace = *ns
	}
	return key
}

// Equal reports whether two apply configurations describe the same fields
// and values, comparing their JSON forms (so a nil and an empty list, both
// omitted, are equal, and quantities compare in canonical form).
func Equal(a, b any) (bool, error) {
	na, err := normalize(a)
	if err != nil {
		return false, err
	}
	nb, err := normalize(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(na, nb), nil
}

func normalize(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	return out, nil
}

// Delete deletes obj (which names the object to delete; its content is
// read into it) when it exists and is controlled by the owner labels the
// operator set: keep decides from the live object whether it is ours. It
// reports whether it deleted.
func Delete(ctx context.Context, c client.Client, obj client.Object, ours func(metav1.Object) bool) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	if !ours(obj) || obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting %T %s: %w", obj, key, err)
	}
	return err == nil, nil
}
