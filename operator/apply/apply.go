// Package apply writes the operator's objects with server-side apply, and
// skips the write when the live object already holds exactly what the
// operator would apply: a reconcile of an unchanged InferenceStack makes no
// API writes at all.
//
// The live object is read from the manager's cache. To spare that cache
// the managed fields, which are what tells the fields the operator owns
// apart, a cache transform may replace them with their digest
// (Kind.SetDigest). And since the cache learns of a write only some time
// after it, an Applier remembers what it wrote until its cache has seen it,
// so a reconcile that closely follows another does not write the same
// object again.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/components"
)

// FieldOwner is the server-side apply field manager of every object the
// operator writes. Every major version of the operator uses it, so a stack
// handed from one major to the next keeps its objects.
const FieldOwner = "inferencestack-operator"

// DigestAnnotation holds, on the copy of an object in the operator's cache
// only, the digest of the fields FieldOwner owns on it (Kind.SetDigest, run
// by a cache transform that then drops the managed fields). It is never
// written to the API server: the operator applies apply configurations its
// builders make, never objects read from the cache.
const DigestAnnotation = "apply.inferencestack.io/owned-fields-digest"

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

// Digest is the digest of the fields FieldOwner owns on obj, read from its
// managed fields; it equals Digest(desired) exactly when applying desired
// would change none of them.
func (k Kind[O, C]) Digest(obj O) (string, error) {
	current, err := k.Extract(obj, FieldOwner)
	if err != nil {
		return "", fmt.Errorf("reading the fields %s owns on %T %s/%s: %w", FieldOwner, obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return Digest(current)
}

// SetDigest annotates obj with the Digest of the fields FieldOwner owns on
// it (DigestAnnotation) and drops its managed fields, which are then no
// longer needed: for the transforms of the operator's cache. An object it
// has annotated already is left as it is.
func (k Kind[O, C]) SetDigest(obj O) error {
	if _, done := obj.GetAnnotations()[DigestAnnotation]; done && obj.GetManagedFields() == nil {
		return nil
	}
	d, err := k.Digest(obj)
	if err != nil {
		return err
	}
	annotations := maps.Clone(obj.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[DigestAnnotation] = d
	obj.SetAnnotations(annotations)
	obj.SetManagedFields(nil)
	return nil
}

// cachedDigest is the digest of the fields FieldOwner owns on an object read
// from the cache: the one SetDigest left, else read from its managed fields.
func (k Kind[O, C]) cachedDigest(obj O) (string, error) {
	if d, ok := obj.GetAnnotations()[DigestAnnotation]; ok && obj.GetManagedFields() == nil {
		return d, nil
	}
	return k.Digest(obj)
}

// Digest is the SHA-256 of the JSON form of an apply configuration. Two
// configurations of one type have the same digest exactly when Equal says
// they are equal: their JSON forms list fields in one order and map keys
// sorted, omit nil and empty lists alike, and write quantities in
// canonical form.
func Digest(c any) (string, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding %T: %w", c, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Applier applies apply configurations with server-side apply, skipping the
// write when the live object already holds them. It reads live objects
// through Client (the manager's cache); for an object it wrote that the
// cache has not seen yet (Observe tells it what the cache saw), it asks
// Reader (the API server) instead, so it never writes the same object twice
// because its cache is behind.
type Applier struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Reader reads from the API server.
	Reader client.Reader

	mu sync.Mutex
	// written holds the resource version of each object Applier wrote until
	// its cache has seen that version.
	written map[objectKey]string
}

type objectKey struct {
	typ reflect.Type
	key types.NamespacedName
}

func keyOf(obj client.Object) objectKey {
	return objectKey{typ: reflect.TypeOf(obj), key: client.ObjectKeyFromObject(obj)}
}

// Observe tells the Applier that its cache now holds obj (or, deleted, no
// longer does): what it wrote before no longer matters. It reports whether
// obj is exactly the version the Applier wrote, so the event that brought
// it says nothing new. Call it from the cache's event handlers of every kind
// the Applier writes.
func (a *Applier) Observe(obj client.Object) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := keyOf(obj)
	rv, ok := a.written[k]
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), rv)
	if err != nil || cmp >= 0 {
		delete(a.written, k)
	}
	return err == nil && cmp == 0
}

// Pending is how many of the objects the Applier wrote its cache has not
// seen yet.
func (a *Applier) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.written)
}

// Behind reports whether cached, an object as the cache holds it, is older
// than what the Applier (or its caller, through Wrote) last wrote of it: then
// read it from the API server instead.
func (a *Applier) Behind(cached client.Object) bool {
	return a.behind(keyOf(cached), cached)
}

// behind reports whether the cache copy of an object (nil: not in the
// cache) is older than what was written of it, and forgets the write once
// the cache has caught up.
func (a *Applier) behind(k objectKey, cached client.Object) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rv, ok := a.written[k]
	if !ok {
		return false
	}
	if cached != nil {
		cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), rv)
		if err == nil && cmp >= 0 {
			delete(a.written, k)
			return false
		}
	}
	return true
}

// Wrote records that obj, as the API server answered its write, was
// written: until the cache has seen it (Observe), Behind says so. Apply
// records its own writes.
func (a *Applier) Wrote(obj client.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written == nil {
		a.written = map[objectKey]string{}
	}
	a.written[keyOf(obj)] = obj.GetResourceVersion()
}

// Apply writes desired with server-side apply (forcing ownership) unless the
// fields the operator owns on the live object already equal it. It returns
// the live object (as read, or as the API server answered the write) and
// whether it wrote.
func Apply[O client.Object, C Config](ctx context.Context, a *Applier, kind Kind[O, C], desired C) (O, bool, error) {
	want, err := Digest(desired)
	if err != nil {
		return kind.New(), false, err
	}
	return ApplyDigest(ctx, a, kind, desired, want)
}

// ApplyDigest is Apply for a caller that has the Digest of desired already
// (it remembers it, see Holds).
func ApplyDigest[O client.Object, C Config](ctx context.Context, a *Applier, kind Kind[O, C], desired C, want string) (O, bool, error) {
	key := Key(desired)
	live, holds, err := Holds(ctx, a, kind, key, want)
	if err != nil || holds {
		return live, false, err
	}
	var meta metav1.PartialObjectMetadata
	if err := convert(desired, &meta); err != nil {
		return live, false, err
	}
	if live.GetResourceVersion() == "" {
		if err := a.unclaimed(ctx, kind.New(), key, &meta); err != nil {
			return live, false, err
		}
	} else if err := claimed(live, key, &meta); err != nil {
		// The cache also holds the user objects a stack references
		// (labelled to be watched): one of them may bear the name of an
		// object of the operator's, and applying would overwrite it.
		return live, false, err
	}
	if err := a.Client.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return live, false, fmt.Errorf("applying %T %s: %w", live, key, err)
	}
	// The apply configuration now holds the API server's answer.
	applied := kind.New()
	if err := convert(desired, applied); err != nil {
		return live, true, err
	}
	a.Wrote(applied)
	return applied, true, nil
}

// ForeignError is the error of an Apply that would take over an object of
// the same name that the operator did not make (a user's, or another
// stack's): server-side apply with forced ownership would change it, and
// the operator would then treat it as its own (a ServiceAccount it mints
// tokens for, a Secret it rewrites or deletes). Apply refuses instead.
type ForeignError struct {
	// Kind and Key name the object.
	Kind string
	Key  types.NamespacedName
	// Why says what tells it apart.
	Why string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s %s exists and %s: the operator does not take over an object it did not make; rename the InferenceStack, or remove or rename that %s",
		e.Kind, e.Key, e.Why, e.Kind)
}

// unclaimed checks, before the operator's first write of an object that
// its cache does not hold (the cache holds only the operator's objects),
// that no object of the name exists on the API server that is not the
// operator's for the same owner: one without the managed-by label desired
// carries, or controlled by another owner. live is an empty object of the
// kind to read into.
func (a *Applier) unclaimed(ctx context.Context, live client.Object, key types.NamespacedName, desired metav1.Object) error {
	if a.Reader == nil {
		return nil
	}
	if err := a.Reader.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading %T %s: %w", live, key, err)
	}
	return claimed(live, key, desired)
}

// claimed checks that live, the object of the name desired has, is the
// operator's for the same owner (see unclaimed).
func claimed(live client.Object, key types.NamespacedName, desired metav1.Object) error {
	kind := live.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.TypeOf(live).Elem().Name()
	}
	if v, ok := desired.GetLabels()[components.LabelManagedBy]; ok && live.GetLabels()[components.LabelManagedBy] != v {
		return &ForeignError{Kind: kind, Key: key, Why: fmt.Sprintf("does not carry the label %s=%s", components.LabelManagedBy, v)}
	}
	if ref, have := metav1.GetControllerOfNoCopy(desired), metav1.GetControllerOfNoCopy(live); ref != nil && have != nil && have.UID != ref.UID {
		return &ForeignError{Kind: kind, Key: key, Why: fmt.Sprintf("belongs to %s %s", have.Kind, have.Name)}
	}
	return nil
}

// Holds reports whether the object named key exists and the fields the
// operator owns on it have the digest want (the Digest of an apply
// configuration), reading and comparing it as Apply does; it returns the
// live object as read. A caller that remembers the digest of what it
// applied can so learn that nothing changed without building the apply
// configuration again.
func Holds[O client.Object, C Config](ctx context.Context, a *Applier, kind Kind[O, C], key types.NamespacedName, want string) (O, bool, error) {
	live := kind.New()
	found, cached, err := a.read(ctx, key, live)
	if err != nil || !found {
		return live, false, err
	}
	digest := kind.Digest
	if cached {
		digest = kind.cachedDigest
	}
	have, err := digest(live)
	if err != nil {
		return live, false, err
	}
	return live, have == want, nil
}

// read reads the live object into live, from the cache, or from the API
// server when the cache has not seen the Applier's last write of it yet. It
// reports whether the object exists, and whether it came from the cache.
func (a *Applier) read(ctx context.Context, key types.NamespacedName, live client.Object) (found, cached bool, err error) {
	return a.readFrom(ctx, a.Client, key, live)
}

// readFrom is read with cache as the cache.
func (a *Applier) readFrom(ctx context.Context, cache client.Reader, key types.NamespacedName, live client.Object) (found, cached bool, err error) {
	err = cache.Get(ctx, key, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, false, fmt.Errorf("reading %T %s: %w", live, key, err)
	}
	k := objectKey{typ: reflect.TypeOf(live), key: key}
	var inCache client.Object
	if err == nil {
		inCache = live
	}
	if a.Reader == nil || !a.behind(k, inCache) {
		return err == nil, true, nil
	}
	// Nothing of the cache's older copy may stay (but the kind, which an
	// unstructured object needs to be read).
	gvk := live.GetObjectKind().GroupVersionKind()
	v := reflect.ValueOf(live).Elem()
	v.Set(reflect.Zero(v.Type()))
	live.GetObjectKind().SetGroupVersionKind(gvk)
	err = a.Reader.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("reading %T %s: %w", live, key, err)
	}
	return true, false, nil
}

// convert copies an apply configuration holding an API server's answer into
// the typed object, through their shared JSON form.
func convert(from any, to client.Object) error {
	data, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := json.Unmarshal(data, to); err != nil {
		return fmt.Errorf("decoding %T: %w", to, err)
	}
	return nil
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

// SetOwned makes the object obj names carry the owner reference ref, or
// not, as owned says, when it exists and ours says the operator made it:
// whether the garbage collector deletes it with the owner. Other owner
// references stay. live is the object as the caller just applied or read
// it; nil reads it into obj (from the cache, or the API server while the
// cache is behind this Applier's writes). It reports whether it wrote.
func (a *Applier) SetOwned(ctx context.Context, obj, live client.Object, ours func(metav1.Object) bool,
	ref metav1.OwnerReference, owned bool) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	if live == nil {
		found, _, err := a.read(ctx, key, obj)
		if err != nil || !found {
			return false, err
		}
		live = obj
	}
	if !ours(live) || live.GetDeletionTimestamp() != nil {
		return false, nil
	}
	refs := live.GetOwnerReferences()
	if slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == ref.UID }) == owned {
		return false, nil
	}
	// live stays as it is: the base of the patch.
	target := live.DeepCopyObject().(client.Object)
	kept := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.UID == ref.UID })
	if owned {
		kept = append(kept, ref)
	}
	target.SetOwnerReferences(kept)
	if err := a.Client.Patch(ctx, target, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("setting the owner references of %T %s: %w", obj, key, err)
	}
	a.Wrote(target)
	return true, nil
}
