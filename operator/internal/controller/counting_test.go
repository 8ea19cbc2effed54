package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
)

// writeCounter counts the API writes of the operator's client.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) add(verb string, obj any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := ""
	switch o := obj.(type) {
	case client.Object:
		name = o.GetNamespace() + "/" + o.GetName()
	case apply.Config:
		name = apply.Key(o).String()
	}
	w.writes = append(w.writes, fmt.Sprintf("%s %T %s", verb, obj, name))
}

// Reset forgets the writes counted so far.
func (w *writeCounter) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = nil
}

// Writes lists the writes counted since the last Reset.
func (w *writeCounter) Writes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

// In lists the writes counted since the last Reset to objects of namespace
// ns: a test's own. (Every test's operator reconciles the stacks other
// tests left in their namespaces too, whose status may change meanwhile:
// their servers are gone.)
func (w *writeCounter) In(ns string) []string {
	return slices.DeleteFunc(w.Writes(), func(s string) bool { return !strings.Contains(s, " "+ns+"/") })
}

// countingClient is the manager's client, counting every write.
type countingClient struct {
	client.Client
	counter *writeCounter
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.counter.add("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.counter.add("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.counter.add("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.counter.add("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.counter.add("apply", obj)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), counter: c.counter}
}

type countingStatus struct {
	client.SubResourceWriter
	counter *writeCounter
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.counter.add("status update", obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.counter.add("status patch", obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// reconcileRecord keeps, for each InferenceStack, what its finished
// reconciles read, as the reconciler reports them (controller.OnReconciled):
// how many finished, and the newest resourceVersion of the stack that one
// returning no error read.
type reconcileRecord struct {
	mu       sync.Mutex
	finished map[types.NamespacedName]int
	newest   map[types.NamespacedName]string
}

func (r *reconcileRecord) add(stack *v1alpha2.InferenceStack, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished == nil {
		r.finished = map[types.NamespacedName]int{}
		r.newest = map[types.NamespacedName]string{}
	}
	key := client.ObjectKeyFromObject(stack)
	r.finished[key]++
	if err != nil {
		return
	}
	if old, ok := r.newest[key]; ok {
		if cmp, cmpErr := resourceversion.CompareResourceVersion(stack.ResourceVersion, old); cmpErr != nil || cmp <= 0 {
			return
		}
	}
	r.newest[key] = stack.ResourceVersion
}

// Finished is how many reconciles of stack key have finished.
func (r *reconcileRecord) Finished(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished[key]
}

// Read reports whether a reconcile of stack key that read it at
// resourceVersion rv, or a later one, has finished without error.
func (r *reconcileRecord) Read(key types.NamespacedName, rv string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	newest, ok := r.newest[key]
	if !ok {
		return false, nil
	}
	cmp, err := resourceversion.CompareResourceVersion(newest, rv)
	return cmp >= 0, err
}

// SubResource counts the writes of a subresource (a TokenRequest is a
// create of serviceaccounts/token).
func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	return &countingSubResource{SubResourceClient: c.Client.SubResource(sub), sub: sub, counter: c.counter}
}

type countingSubResource struct {
	client.SubResourceClient
	sub     string
	counter *writeCounter
}

func (s *countingSubResource) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	s.counter.add(s.sub+" create", obj)
	return s.SubResourceClient.Create(ctx, obj, subResource, opts...)
}
