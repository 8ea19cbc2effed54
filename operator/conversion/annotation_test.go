package conversion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// serve runs the conversion webhook on addr until the test ends.
func serve(t *testing.T, core kubernetes.Interface, ext apiextensionsclient.Interface, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &conversion.Server{Core: core, Extensions: ext, Namespace: "default", SecretName: "inferencestack-conversion-tls", CRDName: crdName,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Addr: addr, Validity: time.Hour, CheckInterval: time.Minute, SwitchAfter: time.Second, Log: testr.New(t)}
	_, err := s.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// trusted waits until the API server converts through the webhook: it
// reads the CRD's new caBundle some time after the server wrote it, and
// until then a conversion fails with "certificate signed by unknown
// authority" (more so on a loaded machine). A v1alpha1 object is read as
// v1alpha2, whatever the storage version, then deleted.
func trusted(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	res := v1alpha2.GroupVersion.WithResource("inferencestacks")
	v1 := dyn.Resource(res.GroupResource().WithVersion("v1alpha1")).Namespace("default")
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inferencestack.io/v1alpha1", "kind": "InferenceStack",
		"metadata": map[string]any{"name": "trust-probe", "namespace": "default"},
		"spec":     map[string]any{"distribution": map[string]any{"name": "starter"}},
	}}
	eventually(t, "the API server to convert through the webhook (the CRD's caBundle read)", func() error {
		if _, err := v1.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		_, err := dyn.Resource(res).Namespace("default").Get(ctx, "trust-probe", metav1.GetOptions{})
		return err
	})
	require.NoError(t, v1.Delete(ctx, "trust-probe", metav1.DeleteOptions{}))
	eventually(t, "the probe object gone", func() error {
		if _, err := v1.Get(ctx, "trust-probe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("trust-probe still there (%w)", err)
		}
		return nil
	})
}

// storeIn makes version the CRD's storage version.
func storeIn(t *testing.T, ext apiextensionsclient.Interface, version string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crdName, metav1.GetOptions{})
		require.NoError(t, err)
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(t.Context(), crd, metav1.UpdateOptions{})
		return err
	}))
}

// TestACorruptAnnotationBreaksNoRead (issue 35): one stack whose v1alpha2
// annotations conversion cannot apply (a typo, not JSON, a field of
// v1alpha1's own) does not break a v1alpha2 list, a v1alpha2 watch or the
// storage migration; it converts with its v1alpha1 fields, keeps its
// annotations byte for byte, and AnnotationProblems names them.
func TestACorruptAnnotationBreaksNoRead(t *testing.T) {
	ctx := t.Context()
	env, core, ext, addr := conversionEnv(t)
	serve(t, core, ext, addr)
	trusted(t, env)
	scheme, err := conversion.Scheme()
	require.NoError(t, err)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "corrupt"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var good, bad v1alpha1.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: corrupt, name: good, annotations: {inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrom":{"namespaces":["a"]}}}'}},
		spec: {distribution: {name: starter}, networking: {port: 8321}}}`), &good))
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: corrupt, name: bad, annotations: {
			inferencestack.io/v1alpha2-spec: '{"networking":{"allowedFrm":{"namespaces":["a"]}, "port": 1}}',
			inferencestack.io/v1alpha2-autoscaling-metrics: 'memory=60'}},
		spec: {distribution: {name: starter}, networking: {port: 8443}}}`), &bad))
	eventually(t, "the API server to trust the webhook", func() error {
		var l v1alpha2.InferenceStackList
		return c.List(ctx, &l, client.InNamespace("corrupt"))
	})
	require.NoError(t, c.Create(ctx, &good))
	require.NoError(t, c.Create(ctx, &bad))
	badAnnotations := bad.Annotations

	check := func(list []v1alpha2.InferenceStack) {
		t.Helper()
		require.Len(t, list, 2)
		for _, s := range list {
			switch s.Name {
			case "good":
				require.Equal(t, []string{"a"}, s.Spec.Networking.AllowedFrom.Namespaces)
				require.Empty(t, v1alpha1.AnnotationProblems(&s))
			case "bad":
				require.Equal(t, int32(8443), s.Spec.Networking.Port, "the v1alpha1 fields convert")
				require.Equal(t, badAnnotations, s.Annotations, "the annotations ride on the hub as they are")
				problems := v1alpha1.AnnotationProblems(&s).ToAggregate().Error()
				require.Contains(t, problems, "annotation inferencestack.io/v1alpha2-spec is not a JSON merge patch of v1alpha2 spec fields (json: unknown field \"allowedFrm\")")
				require.Contains(t, problems, "annotation inferencestack.io/v1alpha2-autoscaling-metrics is not the JSON of spec.scaling.autoscaling.metrics")
			}
		}
	}
	// A v1alpha2 list (from etcd, and from the API server's cache).
	var list v1alpha2.InferenceStackList
	require.NoError(t, c.List(ctx, &list, client.InNamespace("corrupt")), "a v1alpha2 list")
	check(list.Items)
	require.NoError(t, c.List(ctx, &list, client.InNamespace("corrupt"), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}), "a v1alpha2 list from the cache")
	check(list.Items)

	// A v1alpha2 watch sees both, and the changes of both.
	w, err := c.Watch(ctx, &v1alpha2.InferenceStackList{}, client.InNamespace("corrupt"))
	require.NoError(t, err)
	defer w.Stop()
	for _, s := range []*v1alpha1.InferenceStack{&good, &bad} {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(s), s))
			s.Labels = map[string]string{"touched": "yes"}
			return c.Update(ctx, s)
		}))
	}
	seen := map[string]bool{}
	timeout := time.After(time.Minute)
	for !seen["good"] || !seen["bad"] {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the watch ended")
			require.NotEqual(t, watch.Error, ev.Type, "a watch error: %v", ev.Object)
			s := ev.Object.(*v1alpha2.InferenceStack)
			if ev.Type == watch.Modified && s.Labels["touched"] == "yes" {
				seen[s.Name] = true
			}
		case <-timeout:
			t.Fatalf("the v1alpha2 watch saw the changes of %v only", seen)
		}
	}

	// The storage migration to v1alpha2 rewrites both.
	storeIn(t, ext, "v1alpha2")
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	m, err := conversion.Migrate(ctx, dyn, ext, crdName)
	require.NoError(t, err)
	require.Equal(t, conversion.Migration{Storage: "v1alpha2", Rewritten: 2, Before: []string{"v1alpha1", "v1alpha2"}}, m)
	require.NoError(t, c.List(ctx, &list, client.InNamespace("corrupt")))
	check(list.Items)
	// Stored as v1alpha2 now, read through v1alpha1: the annotations as the
	// v1alpha1 client wrote them.
	var back v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&bad), &back))
	require.Equal(t, badAnnotations, back.Annotations)
	require.Equal(t, int32(8443), back.Spec.Networking.Port)
}

// relaxed is crd with its validation taken out (CEL rules, patterns,
// enums, bounds, required fields, list types) and its structure and
// defaults kept: random objects reach the conversion webhook, whose round
// trips are what the fuzz tests (validation has its own tests).
func relaxed(crd *apiextensionsv1.CustomResourceDefinition) {
	var relax func(s *apiextensionsv1.JSONSchemaProps)
	relax = func(s *apiextensionsv1.JSONSchemaProps) {
		s.XValidations, s.Pattern, s.Enum, s.Format, s.Required = nil, "", nil, "", nil
		s.Minimum, s.Maximum, s.MinLength, s.MaxLength, s.MinItems, s.MaxItems, s.MinProperties, s.MaxProperties = nil, nil, nil, nil, nil, nil, nil, nil
		s.XListType, s.XListMapKeys = nil, nil
		for k, p := range s.Properties {
			relax(&p)
			s.Properties[k] = p
		}
		for i := range s.AnyOf {
			relax(&s.AnyOf[i])
		}
		if s.Items != nil && s.Items.Schema != nil {
			relax(s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			relax(s.AdditionalProperties.Schema)
		}
	}
	for _, v := range crd.Spec.Versions {
		relax(v.Schema.OpenAPIV3Schema)
	}
}

// defaulter applies a version's defaults of crd as the API server does.
func defaulter(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) func(map[string]any) {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		require.NoError(t, apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil))
		s, err := structuralschema.NewStructural(internal)
		require.NoError(t, err)
		return func(obj map[string]any) {
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
			structuraldefaulting.Default(obj, s)
		}
	}
	t.Fatalf("no version %s", version)
	return nil
}

// apiFuzz is how many random objects of each version go through the API
// server.
const apiFuzz = 40

// TestRoundTripsThroughTheAPIServer: random objects written through one
// version and stored in the other come back through the first exactly as
// the API server stores what it is given (its defaults applied), byte for
// byte in JSON: v1alpha2 objects stored as v1alpha1, then v1alpha1 objects
// whose annotations come from random v1alpha2 objects (pretty-printed,
// as a client may write them) stored as v1alpha2.
func TestRoundTripsThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	env, core, ext, addr := conversionEnv(t)
	var crd *apiextensionsv1.CustomResourceDefinition
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		relaxed(crd)
		crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	}))
	serve(t, core, ext, addr)
	trusted(t, env)
	scheme, err := conversion.Scheme()
	require.NoError(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, "the API server to trust the webhook", func() error {
		var l v1alpha2.InferenceStackList
		return c.List(ctx, &l, client.InNamespace("fuzz"))
	})
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(func(serializer.CodecFactory) []any {
		return []any{func(r *runtime.RawExtension, c randfill.Continue) {
			var m map[string]string
			c.Fill(&m)
			r.Raw, _ = json.Marshal(m)
		}}
	}), rand.NewSource(35), serializer.NewCodecFactory(runtime.NewScheme())).NilChance(0.3).MaxDepth(12)

	// expected is obj as the API server stores it through version: its
	// metadata reduced to what the test sets, its defaults applied.
	expected := func(obj client.Object, version string) string {
		t.Helper()
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		defaulter(t, crd, version)(u)
		return specAndAnnotations(t, u, version)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	// got is the object as the API server returns it through version (not
	// through the Go types, which would drop what they cannot tell apart).
	got := func(name, version string) string {
		t.Helper()
		u, err := dyn.Resource(v1alpha2.GroupVersion.WithResource("inferencestacks").GroupResource().WithVersion(version)).
			Namespace("fuzz").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return specAndAnnotations(t, u.Object, version)
	}
	meta := func(i int, annotations map[string]string) metav1.ObjectMeta {
		a := map[string]string{"example.com/note": fmt.Sprint("object ", i)}
		for k, v := range annotations {
			a[k] = v
		}
		return metav1.ObjectMeta{Namespace: "fuzz", Name: fmt.Sprintf("o-%d", i), Annotations: a}
	}

	// v1alpha2 objects, stored as v1alpha1.
	for i := range apiFuzz {
		in := &v1alpha2.InferenceStack{}
		f.Fill(&in.Spec)
		in.ObjectMeta = meta(i, nil)
		want := expected(in, "v1alpha2")
		require.NoError(t, c.Create(ctx, in), "object %d", i)
		g := got(in.Name, "v1alpha2")
		require.Equal(t, want, g, "v1alpha2 object %d, stored as v1alpha1; patch to what came back: %s", i, patchOf(t, want, g))
	}

	// v1alpha1 objects carrying random v1alpha2 fields in their
	// annotations, stored as v1alpha2.
	storeIn(t, ext, "v1alpha2")
	for i := range apiFuzz {
		hub := &v1alpha2.InferenceStack{}
		f.Fill(&hub.Spec)
		// As a client sends it: through JSON.
		data, err := json.Marshal(hub)
		require.NoError(t, err)
		hub = &v1alpha2.InferenceStack{}
		require.NoError(t, json.Unmarshal(data, hub))
		in := &v1alpha1.InferenceStack{}
		require.NoError(t, in.ConvertFrom(hub))
		annotations := map[string]string{}
		for k, v := range in.Annotations {
			var pretty strings.Builder
			enc := json.NewEncoder(&pretty)
			enc.SetIndent("", "  ")
			var doc any
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&doc))
			require.NoError(t, enc.Encode(doc))
			annotations[k] = pretty.String()
		}
		in.ObjectMeta = meta(apiFuzz+i, annotations)
		want := expected(in, "v1alpha1")
		require.NoError(t, c.Create(ctx, in), "object %d", i)
		g := got(in.Name, "v1alpha1")
		require.Equal(t, want, g, "v1alpha1 object %d, stored as v1alpha2; patch to what came back: %s", i, patchOf(t, want, g))
	}
}

// patchOf is the JSON merge patch from a to b (for messages).
func patchOf(t *testing.T, a, b string) string {
	t.Helper()
	patch, err := jsonpatch.CreateMergePatch([]byte(a), []byte(b))
	require.NoError(t, err)
	return string(patch)
}

// specAndAnnotations is the JSON of u's spec and annotations as the Go
// types of version hold them (which cannot tell an empty string the
// schema defaults from none: the webhook converts through them).
func specAndAnnotations(t *testing.T, u map[string]any, version string) string {
	t.Helper()
	data, err := json.Marshal(u)
	require.NoError(t, err)
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	switch version {
	case "v1alpha1":
		obj.Spec = &v1alpha1.InferenceStackSpec{}
	default:
		obj.Spec = &v1alpha2.InferenceStackSpec{}
	}
	require.NoError(t, json.Unmarshal(data, &obj))
	out, err := json.Marshal(map[string]any{"annotations": obj.Metadata.Annotations, "spec": obj.Spec})
	require.NoError(t, err)
	return string(out)
}
