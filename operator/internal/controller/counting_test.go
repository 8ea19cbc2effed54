package controller_test

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/apply"
)

// writeCounter counts the API writes of the operator's client, and the
// InferenceStacks it found, as each reconcile of a stack begins by reading
// it (a request for a stack outside the operator's cache finds none).
// (Finished reconciles are counted by controller-runtime: reconciles in the
// tests.)
type writeCounter struct {
	mu     sync.Mutex
	writes []string
	reads  map[string]int
}

func (w *writeCounter) read(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reads == nil {
		w.reads = map[string]int{}
	}
	w.reads[key]++
}

// StackReads is how often the client found the InferenceStack namespace/name.
func (w *writeCounter) StackReads(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads[key]
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

// countingClient is the manager's client, counting every write and every
// InferenceStack it finds.
type countingClient struct {
	client.Client
	counter *writeCounter
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*v1alpha1.InferenceStack); ok && err == nil {
		c.counter.read(key.String())
	}
	return err
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
