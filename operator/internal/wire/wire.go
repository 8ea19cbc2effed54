// Package wire lets the operator read and write InferenceStacks in another
// API version than the one its reconciler is written against: the
// reconciler works on v1alpha1 objects, the API server sees requests in the
// version the operator release reads (its release input's api.reads,
// docs/api-versions.md). Objects are converted in the process with the
// same conversion the CRD's webhook serves (operator/api/v1alpha1's
// ConvertTo and ConvertFrom through the hub).
//
// The operator writes only the metadata (finalizers, labels) and the status
// of a stack, never its spec; both have the same shape in every version, so
// a merge patch computed between two v1alpha1 objects is sent as it is to
// the wire version. A patch that touches the spec is refused.
package wire

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// Versions are the API versions the operator can read.
var Versions = []string{v1alpha1.GroupVersion.Version, v1alpha2.GroupVersion.Version}

// GroupVersion is the InferenceStack group at version, or an error naming
// the versions the operator can read.
func GroupVersion(version string) (schema.GroupVersion, error) {
	switch version {
	case v1alpha1.GroupVersion.Version:
		return v1alpha1.GroupVersion, nil
	case v1alpha2.GroupVersion.Version:
		return v1alpha2.GroupVersion, nil
	}
	return schema.GroupVersion{}, fmt.Errorf("InferenceStack API version %q: this operator reads %v", version, Versions)
}

// Object is an empty InferenceStack of the wire version (v1alpha1 for the
// zero gv), for watches, caches and indexes.
func Object(gv schema.GroupVersion) client.Object {
	if gv == v1alpha2.GroupVersion {
		return &v1alpha2.InferenceStack{}
	}
	return &v1alpha1.InferenceStack{}
}

// Internal is obj as the reconciler sees it: a v1alpha2 InferenceStack
// converted to v1alpha1; anything else as it is.
func Internal(obj client.Object) (client.Object, error) {
	hub, ok := obj.(*v1alpha2.InferenceStack)
	if !ok {
		return obj, nil
	}
	out := &v1alpha1.InferenceStack{}
	if err := fromHub(out, hub); err != nil {
		return nil, err
	}
	return out, nil
}

// Key is obj as the operator's Applier keys what it wrote (operator/apply:
// by Go type, name and resourceVersion): a v1alpha2 InferenceStack becomes
// a v1alpha1 one with that metadata alone, without converting it.
func Key(obj client.Object) client.Object {
	if _, ok := obj.(*v1alpha2.InferenceStack); !ok {
		return obj
	}
	out := &v1alpha1.InferenceStack{}
	out.Namespace, out.Name, out.ResourceVersion = obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()
	return out
}

// Client is c, with InferenceStacks read and written in gv (v1alpha1 for
// the zero gv).
func Client(c client.Client, gv schema.GroupVersion) client.Client {
	if gv != v1alpha2.GroupVersion {
		return c
	}
	return &wireClient{Client: c}
}

// Reader is r, with InferenceStacks read in gv (v1alpha1 for the zero gv).
func Reader(r client.Reader, gv schema.GroupVersion) client.Reader {
	if gv != v1alpha2.GroupVersion {
		return r
	}
	return wireReader{r}
}

type wireReader struct{ client.Reader }

func (r wireReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, r.Reader, key, obj, opts...)
}

func (r wireReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return listStacks(ctx, r.Reader, list, opts...)
}

func get(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	stack, ok := obj.(*v1alpha1.InferenceStack)
	if !ok {
		return r.Get(ctx, key, obj, opts...)
	}
	hub := &v1alpha2.InferenceStack{}
	if err := r.Get(ctx, key, hub, opts...); err != nil {
		return err
	}
	return fromHub(stack, hub)
}

// fromHub converts hub into stack, which keeps the wire version in its
// TypeMeta: owner references and events name the stack as it is served.
func fromHub(stack *v1alpha1.InferenceStack, hub *v1alpha2.InferenceStack) error {
	if err := stack.ConvertFrom(hub); err != nil {
		return err
	}
	stack.APIVersion, stack.Kind = v1alpha2.GroupVersion.String(), "InferenceStack"
	return nil
}

func listStacks(ctx context.Context, r client.Reader, list client.ObjectList, opts ...client.ListOption) error {
	stacks, ok := list.(*v1alpha1.InferenceStackList)
	if !ok {
		return r.List(ctx, list, opts...)
	}
	hubs := &v1alpha2.InferenceStackList{}
	if err := r.List(ctx, hubs, opts...); err != nil {
		return err
	}
	stacks.ListMeta = hubs.ListMeta
	stacks.Items = make([]v1alpha1.InferenceStack, len(hubs.Items))
	for i := range hubs.Items {
		if err := fromHub(&stacks.Items[i], &hubs.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

type wireClient struct{ client.Client }

func (c *wireClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return get(ctx, c.Client, key, obj, opts...)
}

func (c *wireClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return listStacks(ctx, c.Client, list, opts...)
}

func (c *wireClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	stack, ok := obj.(*v1alpha1.InferenceStack)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	return patchStack(stack, patch, func(hub *v1alpha2.InferenceStack, raw client.Patch) error {
		return c.Client.Patch(ctx, hub, raw, opts...)
	})
}

func (c *wireClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha1.InferenceStack); ok {
		return fmt.Errorf("the operator does not create InferenceStacks")
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *wireClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if _, ok := obj.(*v1alpha1.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator patches stacks, it does not update them", obj.GetNamespace(), obj.GetName())
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *wireClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*v1alpha1.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator does not delete stacks", obj.GetNamespace(), obj.GetName())
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *wireClient) Status() client.SubResourceWriter {
	return statusWriter{c.Client.Status()}
}

type statusWriter struct{ client.SubResourceWriter }

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	stack, ok := obj.(*v1alpha1.InferenceStack)
	if !ok {
		return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	return patchStack(stack, patch, func(hub *v1alpha2.InferenceStack, raw client.Patch) error {
		return w.SubResourceWriter.Patch(ctx, hub, raw, opts...)
	})
}

func (w statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, ok := obj.(*v1alpha1.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator patches the status, it does not update it", obj.GetNamespace(), obj.GetName())
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// patchStack sends the patch of stack (computed on v1alpha1 objects) to the
// wire version and reads the result back into stack.
func patchStack(stack *v1alpha1.InferenceStack, patch client.Patch, send func(*v1alpha2.InferenceStack, client.Patch) error) error {
	data, err := patch.Data(stack)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("InferenceStack %s/%s: a %s patch the operator cannot send in another version: %w", stack.Namespace, stack.Name, patch.Type(), err)
	}
	if _, ok := fields["spec"]; ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator does not write the spec (its patch changes it)", stack.Namespace, stack.Name)
	}
	hub := &v1alpha2.InferenceStack{}
	hub.Namespace, hub.Name = stack.Namespace, stack.Name
	if err := send(hub, client.RawPatch(patch.Type(), data)); err != nil {
		return err
	}
	return fromHub(stack, hub)
}
