package apply

import (
	"context"
	"fmt"
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AppliedDigestAnnotation holds, on an object of a kind the operator has no
// Go types for (an OpenShift Route), the Digest of what the operator last
// applied to it.
const AppliedDigestAnnotation = "inferencestack.io/applied-digest"

// ApplyUnstructured is Apply for a kind the operator has no Go types (and so
// no client-go Extract function) for: desired, unstructured, is applied with
// server-side apply (forcing ownership) unless the live object already
// holds it. Without Extract, the live object tells what the operator last
// applied through AppliedDigestAnnotation, which desired carries: the
// object holds desired when that digest is desired's and every field
// desired sets has desired's value on the live object (so a field the
// operator no longer sets is removed, and one another writer changed is
// set back). desired is not changed; the live object (as read, or as the
// API server answered the write) and whether it wrote are returned.
//
// The live object is read from cache (the manager's client reads
// unstructured objects from the API server, the manager's cache holds them
// only when asked). Objects it writes are remembered as Apply's are, keyed by their type
// (*unstructured.Unstructured) and name: the operator applies unstructured
// objects of one kind only.
func ApplyUnstructured(ctx context.Context, a *Applier, cache client.Reader, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	desired = desired.DeepCopy()
	want, err := Digest(desired.Object)
	if err != nil {
		return nil, false, err
	}
	annotations := maps.Clone(desired.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedDigestAnnotation] = want
	desired.SetAnnotations(annotations)

	key := client.ObjectKeyFromObject(desired)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	found, _, err := a.readFrom(ctx, cache, key, live)
	if err != nil {
		return live, false, err
	}
	if found && live.GetAnnotations()[AppliedDigestAnnotation] == want && holds(live.Object, desired.Object) {
		return live, false, nil
	}
	if !found {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(desired.GroupVersionKind())
		if err := a.unclaimed(ctx, fresh, key, desired); err != nil {
			return live, false, err
		}
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return live, false, fmt.Errorf("applying %s %s: %w", desired.GetKind(), key, err)
	}
	// desired now holds the API server's answer.
	a.Wrote(desired)
	return desired, true, nil
}

// holds reports whether live has every field of want with want's value:
// maps compare key by key (live may have more), lists item by item (live
// may not have more items), other values by equality.
func holds(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok || !holds(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return false
		}
		for i := range w {
			if !holds(l[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalNumber(live), normalNumber(want))
	}
}

// normalNumber makes the numbers of JSON decoded by different decoders
// (int64, float64) compare equal when they are.
func normalNumber(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v
}
