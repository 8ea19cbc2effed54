// Package wire lets the operator read and write InferenceStacks in another
// API version than the one its reconciler is written against: the
// reconciler, every builder and the prober work on the hub, v1alpha2; the
// API server sees requests in the version the operator release reads (its
// release input's api.reads, docs/api-versions.md). A stack read in
// v1alpha1 is converted to the hub in the process with the same conversion
// the CRD's webhook serves (operator/api/v1alpha1's ConvertTo, ConvertFrom).
//
// The operator writes only the metadata (finalizers, labels) and the status
// of a stack, never its spec; both have the same shape in every version, so
// a merge patch computed between two hub objects is sent as it is to the
// wire version. A patch that touches the spec is refused.
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

// Converted reports whether stacks read in gv reach the reconciler through
// conversion (v1alpha1, and the zero gv): then no API server judged their
// v1alpha2-only fields by v1alpha2's rules.
func Converted(gv schema.GroupVersion) bool { return gv != v1alpha2.GroupVersion }

// Object is an empty InferenceStack of the wire version (v1alpha1 for the
// zero gv), for watches, caches and indexes.
func Object(gv schema.GroupVersion) client.Object {
	if Converted(gv) {
		return &v1alpha1.InferenceStack{}
	}
	return &v1alpha2.InferenceStack{}
}

// Hub is obj as the reconciler sees it: a v1alpha1 InferenceStack
// converted to the hub; anything else as it is. The conversion fails only
// for what is not an InferenceStack of either version: an annotation it
// cannot read is kept on the hub object (v1alpha1.AnnotationProblems).
func Hub(obj client.Object) (client.Object, error) {
	spoke, ok := obj.(*v1alpha1.InferenceStack)
	if !ok {
		return obj, nil
	}
	out := &v1alpha2.InferenceStack{}
	if err := toHub(out, spoke); err != nil {
		return nil, err
	}
	return out, nil
}

// Key is obj as the operator's Applier keys what it wrote (operator/apply:
// by Go type, name and resourceVersion): a v1alpha1 InferenceStack becomes
// a hub one with that metadata alone, without converting it.
func Key(obj client.Object) client.Object {
	if _, ok := obj.(*v1alpha1.InferenceStack); !ok {
		return obj
	}
	out := &v1alpha2.InferenceStack{}
	out.Namespace, out.Name, out.ResourceVersion = obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()
	return out
}

// Client is c, with InferenceStacks read and written in gv (v1alpha1 for
// the zero gv).
func Client(c client.Client, gv schema.GroupVersion) client.Client {
	if !Converted(gv) {
		return c
	}
	return &wireClient{Client: c}
}

// Reader is r, with InferenceStacks read in gv (v1alpha1 for the zero gv).
func Reader(r client.Reader, gv schema.GroupVersion) client.Reader {
	if !Converted(gv) {
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
	hub, ok := obj.(*v1alpha2.InferenceStack)
	if !ok {
		return r.Get(ctx, key, obj, opts...)
	}
	spoke := &v1alpha1.InferenceStack{}
	if err := r.Get(ctx, key, spoke, opts...); err != nil {
		return err
	}
	return toHub(hub, spoke)
}

// toHub converts spoke into hub, which keeps the wire version in its
// TypeMeta: owner references and events name the stack as it is served.
func toHub(hub *v1alpha2.InferenceStack, spoke *v1alpha1.InferenceStack) error {
	if err := spoke.ConvertTo(hub); err != nil {
		return err
	}
	hub.APIVersion, hub.Kind = v1alpha1.GroupVersion.String(), "InferenceStack"
	return nil
}

func listStacks(ctx context.Context, r client.Reader, list client.ObjectList, opts ...client.ListOption) error {
	hubs, ok := list.(*v1alpha2.InferenceStackList)
	if !ok {
		return r.List(ctx, list, opts...)
	}
	spokes := &v1alpha1.InferenceStackList{}
	if err := r.List(ctx, spokes, opts...); err != nil {
		return err
	}
	hubs.ListMeta = spokes.ListMeta
	hubs.Items = make([]v1alpha2.InferenceStack, len(spokes.Items))
	for i := range spokes.Items {
		if err := toHub(&hubs.Items[i], &spokes.Items[i]); err != nil {
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
	hub, ok := obj.(*v1alpha2.InferenceStack)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	return patchStack(hub, patch, func(spoke *v1alpha1.InferenceStack, raw client.Patch) error {
		return c.Client.Patch(ctx, spoke, raw, opts...)
	})
}

func (c *wireClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha2.InferenceStack); ok {
		return fmt.Errorf("the operator does not create InferenceStacks")
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *wireClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if _, ok := obj.(*v1alpha2.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator patches stacks, it does not update them", obj.GetNamespace(), obj.GetName())
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *wireClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*v1alpha2.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator does not delete stacks", obj.GetNamespace(), obj.GetName())
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *wireClient) Status() client.SubResourceWriter {
	return statusWriter{c.Client.Status()}
}

type statusWriter struct{ client.SubResourceWriter }

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	hub, ok := obj.(*v1alpha2.InferenceStack)
	if !ok {
		return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	return patchStack(hub, patch, func(spoke *v1alpha1.InferenceStack, raw client.Patch) error {
		return w.SubResourceWriter.Patch(ctx, spoke, raw, opts...)
	})
}

func (w statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, ok := obj.(*v1alpha2.InferenceStack); ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator patches the status, it does not update it", obj.GetNamespace(), obj.GetName())
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// patchStack sends the patch of hub (computed on hub objects) to the wire
// version and reads the result back into hub.
func patchStack(hub *v1alpha2.InferenceStack, patch client.Patch, send func(*v1alpha1.InferenceStack, client.Patch) error) error {
	data, err := patch.Data(hub)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("InferenceStack %s/%s: a %s patch the operator cannot send in another version: %w", hub.Namespace, hub.Name, patch.Type(), err)
	}
	if _, ok := fields["spec"]; ok {
		return fmt.Errorf("InferenceStack %s/%s: the operator does not write the spec (its patch changes it)", hub.Namespace, hub.Name)
	}
	spoke := &v1alpha1.InferenceStack{}
	spoke.Namespace, spoke.Name = hub.Namespace, hub.Name
	if err := send(spoke, client.RawPatch(patch.Type(), data)); err != nil {
		return err
	}
	return toHub(hub, spoke)
}
