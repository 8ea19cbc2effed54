// Package gitops_test applies InferenceStack manifests as kubectl (client-
// and server-side) and GitOps tools (Argo CD, Flux) do, on a real
// kube-apiserver with the real conversion webhook, for each storage version,
// and proves that a second apply of the same manifest writes nothing and
// that no diff shows, with the operator's own writes in between; and that
// two appliers owning different fields, through the same or different
// versions, do not take each other's fields (docs/api-versions.md, "GitOps
// and server-side apply").
package gitops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/cmd/apply"
	"k8s.io/kubectl/pkg/cmd/diff"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

const (
	crdName = "inferencestacks.inferencestack.io"
	// operatorManager is the field manager of the operator's writes.
	operatorManager = "inferencestack-operator"
	// finalizer is operator/internal/controller.Finalizer (not imported:
	// that package's whole tree for one string).
	finalizer = "inferencestack.io/cleanup"
	// lastApplied is kubectl's client-side apply annotation.
	lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
)

// cluster is a control plane with the repository's CRD served in both
// versions, one of them stored, converted by the real webhook.
type cluster struct {
	storage string
	env     *testenv.Env
	dyn     dynamic.Interface
	core    kubernetes.Interface
	crd     *apiextensionsv1.CustomResourceDefinition
	kubectl cmdutil.Factory
}

// startCluster starts it: the CRD as a CRD package release ships it (both
// versions served, storage stored), and the conversion webhook server.
func startCluster(t *testing.T, storage string) *cluster {
	t.Helper()
	ctx := t.Context()
	ports, err := testenv.FreePorts(1)
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	env, err := testenv.Start(testenv.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	core, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)

	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "operator", "config", "crd", "bases", "inferencestack.io_inferencestacks.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Served = true
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == storage
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://" + addr + conversion.Path)},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inferencestack-system"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	sctx, cancel := context.WithCancel(context.Background())
	s := &conversion.Server{Core: core, Extensions: ext, Namespace: "inferencestack-system", SecretName: "inferencestack-conversion-tls", CRDName: crdName,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Addr: addr, Validity: time.Hour, CheckInterval: time.Minute, SwitchAfter: time.Second, Log: testr.New(t)}
	_, err = s.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("the conversion webhook server stopped: %v", err)
		}
	})

	c := &cluster{storage: storage, env: env, dyn: dyn, core: core, crd: &crd}
	// Served and converted: a dry-run create through each version goes
	// through the storage version (the webhook for the other one).
	for _, version := range []string{"v1alpha1", "v1alpha2"} {
		probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "inferencestack.io/" + version, "kind": "InferenceStack",
			"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"distribution": map[string]any{"name": "starter"}}}}
		eventually(t, "the API server to convert InferenceStacks written through "+version, func() error {
			_, err := c.resource(version).Namespace("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(env.Kubeconfig())
	flags.CacheDir = ptr.To(t.TempDir())
	c.kubectl = cmdutil.NewFactory(flags)
	return c
}

func (c *cluster) resource(version string) dynamic.NamespaceableResourceInterface {
	return c.dyn.Resource(schema.GroupVersionResource{Group: "inferencestack.io", Version: version, Resource: "inferencestacks"})
}

// get reads the manifest's object through the manifest's version.
func (c *cluster) get(ctx context.Context, m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.resource(version(m)).Namespace(m.GetNamespace()).Get(ctx, m.GetName(), metav1.GetOptions{})
}

// serverSideApply is what Argo CD and Flux do (and kubectl apply
// --server-side), through the dynamic client.
func (c *cluster) serverSideApply(ctx context.Context, m *unstructured.Unstructured, manager string, force, dryRun bool) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(m.Object)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: manager, Force: ptr.To(force)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.resource(version(m)).Namespace(m.GetNamespace()).Patch(ctx, m.GetName(), types.ApplyPatchType, data, opts)
}

// fatal is kubectl's exit, recovered (kubectl's own tests do the same).
type fatal struct {
	code int
	msg  string
}

// run runs kubectl's own command for verb (apply or diff) in this process,
// as `kubectl verb args...`: its output, and its exit code.
func (c *cluster) run(verb string, args ...string) (out string, code int) {
	streams, _, stdout, stderr := genericiooptions.NewTestIOStreams()
	var cmd *cobra.Command
	switch verb {
	case "apply":
		cmd = apply.NewCmdApply("kubectl", c.kubectl, streams)
	case "diff":
		cmd = diff.NewCmdDiff(c.kubectl, streams)
	default:
		panic("kubectl " + verb + " is not wired here")
	}
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(fatal{code: code, msg: msg}) })
	defer cmdutil.DefaultBehaviorOnFatal()
	func() {
		defer func() {
			if r := recover(); r != nil {
				f, ok := r.(fatal)
				if !ok {
					panic(r)
				}
				code = f.code
				stderr.WriteString(f.msg)
			}
		}()
		cmd.SetArgs(args)
		cmd.SetOut(stdout)
		cmd.SetErr(stderr)
		if err := cmd.Execute(); err != nil {
			code = -1
			stderr.WriteString(err.Error())
		}
	}()
	return stdout.String() + stderr.String(), code
}

func version(m *unstructured.Unstructured) string {
	return strings.TrimPrefix(m.GetAPIVersion(), "inferencestack.io/")
}

// applier is one way to apply a manifest, and the diff its users see.
type applier struct {
	name string
	// labels the tool adds to every manifest it applies (its tracking).
	labels map[string]string
	// apply applies the manifest (written to file).
	apply func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string)
	// diff is the diff the tool shows ("" for none).
	diff func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) string
}

func kubectlApply(serverSide bool) func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) {
	return func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) {
		t.Helper()
		args := []string{"-f", file}
		if serverSide {
			args = append(args, "--server-side")
		}
		out, code := c.run("apply", args...)
		require.Zero(t, code, "kubectl apply %s: %s", strings.Join(args, " "), out)
		// Client-side apply says "configured", not "unchanged", for a
		// manifest with a list whose items the API server defaults
		// (resources.models[].modelType): a JSON merge patch sends the list
		// whole, and the API server finds nothing to write. What proves no
		// write is the resourceVersion and the watch.
		t.Logf("kubectl apply %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
	}
}

func kubectlDiff(serverSide bool) func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) string {
	return func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) string {
		t.Helper()
		args := []string{"-f", file}
		if serverSide {
			args = append(args, "--server-side")
		}
		out, code := c.run("diff", args...)
		// kubectl diff: 0 no differences, 1 differences, above 1 an error.
		require.LessOrEqual(t, code, 1, "kubectl diff %s: %s", strings.Join(args, " "), out)
		if code == 1 && out == "" {
			return "(kubectl diff exited 1 without output)"
		}
		return out
	}
}

func gitopsApply(manager string) func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) {
	return func(t *testing.T, c *cluster, m *unstructured.Unstructured, _ string) {
		t.Helper()
		_, err := c.serverSideApply(t.Context(), m, manager, true, false)
		require.NoError(t, err, "server-side apply as %s", manager)
	}
}

// argoDiff is the diff Argo CD shows: the live object, normalised (the
// fields the API server and the operator set, status ignored, as Argo CD
// does for custom resources), against the desired manifest defaulted by
// the CRD's schema of the manifest's version (as the API server defaults
// it), and, as gitops-engine's two-way diff does (pkg/diff TwoWayDiff:
// RemoveMapFields), only in the map fields the manifest has: a field the
// API server defaulted in the stored version (networking.port beside an
// annotation's allowedFrom, stored as v1alpha2) is no difference, while
// every field and annotation the manifest sets must read back byte for
// byte.
func argoDiff(t *testing.T, c *cluster, m *unstructured.Unstructured, _ string) string {
	t.Helper()
	live, err := c.get(t.Context(), m)
	require.NoError(t, err)
	desired := defaulted(t, c.crd, m).Object
	return cmp.Diff(desired, removeMapFields(desired, normalised(live, m).Object))
}

// removeMapFields is live with only the map fields config has (lists and
// values whole), as gitops-engine's RemoveMapFields.
func removeMapFields(config, live map[string]any) map[string]any {
	out := map[string]any{}
	for k, c := range config {
		l, ok := live[k]
		if !ok {
			continue
		}
		cm, cok := c.(map[string]any)
		lm, lok := l.(map[string]any)
		if cok && lok {
			out[k] = removeMapFields(cm, lm)
			continue
		}
		out[k] = l
	}
	return out
}

// fluxDiff is Flux's drift detection (fluxcd/pkg/ssa): a server-side
// dry-run apply of the manifest (its field manager, force) compared with
// the live object: labels, annotations, and everything but metadata and
// status.
func fluxDiff(manager string) func(t *testing.T, c *cluster, m *unstructured.Unstructured, _ string) string {
	return func(t *testing.T, c *cluster, m *unstructured.Unstructured, _ string) string {
		t.Helper()
		live, err := c.get(t.Context(), m)
		require.NoError(t, err)
		dry, err := c.serverSideApply(t.Context(), m, manager, true, true)
		require.NoError(t, err, "dry-run apply as %s", manager)
		return fluxDrift(live, dry)
	}
}

func fluxDrift(live, dry *unstructured.Unstructured) string {
	strip := func(u *unstructured.Unstructured) map[string]any {
		o := u.DeepCopy().Object
		delete(o, "metadata")
		delete(o, "status")
		return o
	}
	return cmp.Diff(live.GetLabels(), dry.GetLabels()) + cmp.Diff(live.GetAnnotations(), dry.GetAnnotations()) + cmp.Diff(strip(live), strip(dry))
}

// fluxApply is Flux's apply: a dry-run first, and the apply only when the
// object drifted (or does not exist).
func fluxApply(manager string) func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) {
	return func(t *testing.T, c *cluster, m *unstructured.Unstructured, file string) {
		t.Helper()
		live, err := c.get(t.Context(), m)
		if err == nil {
			dry, err := c.serverSideApply(t.Context(), m, manager, true, true)
			require.NoError(t, err, "dry-run apply as %s", manager)
			if fluxDrift(live, dry) == "" {
				return
			}
		}
		gitopsApply(manager)(t, c, m, file)
	}
}

var appliers = []applier{
	{name: "kubectl-csa", apply: kubectlApply(false), diff: kubectlDiff(false)},
	{name: "kubectl-ssa", apply: kubectlApply(true), diff: kubectlDiff(true)},
	{name: "argocd", labels: map[string]string{"app.kubernetes.io/instance": "stacks"}, apply: gitopsApply("argocd-controller"), diff: argoDiff},
	{name: "flux", labels: map[string]string{"kustomize.toolkit.fluxcd.io/name": "stacks", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
		apply: fluxApply("kustomize-controller"), diff: fluxDiff("kustomize-controller")},
}

// defaulted is m as the API server defaults it (the CRD's structural
// schema of m's version, apiextensions-apiserver's own defaulting).
func defaulted(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, m *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name != version(m) {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		require.NoError(t, apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil))
		s, err := structuralschema.NewStructural(&internal)
		require.NoError(t, err)
		out := m.DeepCopy()
		structuraldefaulting.Default(out.Object, s)
		return out
	}
	t.Fatalf("the CRD has no version %s", version(m))
	return nil
}

// normalised is live without what the API server sets, the operator's
// finalizer and labels, kubectl's last-applied annotation, and status.
func normalised(live, desired *unstructured.Unstructured) *unstructured.Unstructured {
	n := live.DeepCopy()
	unstructured.RemoveNestedField(n.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "finalizers"} {
		unstructured.RemoveNestedField(n.Object, "metadata", f)
	}
	annotations := n.GetAnnotations()
	delete(annotations, lastApplied)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(n.Object, "metadata", "annotations")
	} else {
		n.SetAnnotations(annotations)
	}
	labels := map[string]string{}
	for k, v := range n.GetLabels() {
		if _, ok := desired.GetLabels()[k]; ok {
			labels[k] = v
		}
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(n.Object, "metadata", "labels")
	} else {
		n.SetLabels(labels)
	}
	return n
}

// operatorWrites does to the stack what the operator does, as the operator
// (its field manager, through v1alpha1, which it reads): it adds the
// finalizer (as releases before owner references removed all a stack has
// did) and a label (merge patches of metadata), and writes the status.
func operatorWrites(t *testing.T, c *cluster, m *unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	r := c.resource("v1alpha1").Namespace(m.GetNamespace())
	opts := metav1.PatchOptions{FieldManager: operatorManager}
	for _, patch := range []string{
		`{"metadata":{"finalizers":["` + finalizer + `"]}}`,
		`{"metadata":{"labels":{"inferencestack.io/operator-major":"2"}}}`,
	} {
		_, err := r.Patch(ctx, m.GetName(), types.MergePatchType, []byte(patch), opts)
		require.NoError(t, err, "the operator's patch %s", patch)
	}
	live, err := r.Get(ctx, m.GetName(), metav1.GetOptions{})
	require.NoError(t, err)
	status := fmt.Sprintf(`{"status":{"phase":"Deploying","observedGeneration":%d,"conditions":[{"type":"Available","status":"False","reason":"Deploying",`+
		`"message":"waiting for the server's pods","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":%[1]d}]}}`, live.GetGeneration())
	_, err = r.Patch(ctx, m.GetName(), types.MergePatchType, []byte(status), opts, "status")
	require.NoError(t, err, "the operator's status")
}

// manifest is one InferenceStack manifest under test.
type manifest struct {
	name string
	obj  *unstructured.Unstructured
}

// manifests are the samples, v1alpha1 manifests that carry v1alpha2's
// annotations as people write them (pretty-printed, keys in their own
// order, empty), and v1alpha2 manifests with fields only v1alpha2 has.
func manifests(t *testing.T) []manifest {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "operator", "config", "samples", "inferencestack_v1alpha*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []manifest
	add := func(name string, data []byte) {
		// Through JSON into unstructured: numbers as the API server's int64.
		j, err := yaml.YAMLToJSON(data)
		require.NoError(t, err, name)
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(j), name)
		out = append(out, manifest{name: name, obj: obj})
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		add(strings.TrimSuffix(filepath.Base(f), ".yaml"), data)
	}
	const starter = `
spec:
  distribution:
    name: starter`
	// More than one replica needs shared state (a CEL rule).
	const shared = `
  cache:
    enabled: true
  storage:
    kv:
      type: redis
      endpoint: redis:6379`
	for name, body := range map[string]string{
		"v1alpha1-pretty-spec-annotation": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: pretty-spec
  annotations:
    ` + v1alpha2.SpecAnnotation + `: |
      {
        "networking": {
          "allowedFrom": {
            "namespaces": ["clients"]
          }
        }
      }` + starter,
		"v1alpha1-pretty-metrics-annotation": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: pretty-metrics
  annotations:
    ` + v1alpha2.MetricsAnnotation + `: |
      [
        {"resource": "cpu", "averageUtilization": 70},
        {"resource": "memory", "averageUtilization": 60}
      ]` + starter + shared + `
  workload:
    autoscaling:
      minReplicas: 1
      maxReplicas: 3
      targetCPUUtilizationPercentage: 70`,
		"v1alpha1-spec-annotation-keys-in-own-order": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: own-order
  annotations:
    ` + v1alpha2.SpecAnnotation + `: '{"workload":{"workers":2},"networking":{"route":{},"allowedFrom":{"namespaces":["clients"]}}}'` + starter,
		"v1alpha1-empty-spec-annotation": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: empty-spec
  annotations:
    ` + v1alpha2.SpecAnnotation + `: '{}'` + starter,
		"v1alpha1-empty-scaling-annotation": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: empty-scaling
  annotations:
    ` + v1alpha2.SpecAnnotation + `: '{"scaling":{}}'` + starter,
		"v1alpha1-metrics-annotation-without-autoscaling": `
apiVersion: inferencestack.io/v1alpha1
kind: InferenceStack
metadata:
  name: metrics-alone
  annotations:
    ` + v1alpha2.MetricsAnnotation + `: '[{"resource":"memory","averageUtilization":60}]'` + starter,
		"v1alpha2-memory-target-only": `
apiVersion: inferencestack.io/v1alpha2
kind: InferenceStack
metadata:
  name: memory-only` + starter + shared + `
  scaling:
    autoscaling:
      minReplicas: 1
      maxReplicas: 3
      metrics:
      - resource: memory
        averageUtilization: 70`,
		"v1alpha2-empty-workload-beside-scaling": `
apiVersion: inferencestack.io/v1alpha2
kind: InferenceStack
metadata:
  name: empty-workload` + starter + shared + `
  workload: {}
  scaling:
    replicas: 2`,
		"v1alpha2-empty-scaling": `
apiVersion: inferencestack.io/v1alpha2
kind: InferenceStack
metadata:
  name: empty-scaling-v2` + starter + `
  scaling: {}`,
	} {
		add(name, []byte(body))
	}
	return out
}

// knownDefects are the cases that fail today because of the conversion
// (operator/api/v1alpha1/conversion.go and v1alpha1's CRD default, being
// reworked), by test name below the storage version, with what fails. Each
// must still fail somewhere (the failures are logged); once fixed, the test
// fails until its entry is removed.
var knownDefects = map[string]string{}

// expectations runs the cases below t: a failure fails the test (fail is
// nil: use the case's own t.Errorf), except in a known defect, where a case
// that no longer fails does.
func expectations(t *testing.T) (fail func(format string, args ...any), done func()) {
	t.Helper()
	name := t.Name()[strings.Index(t.Name(), "/")+1:]
	known, ok := knownDefects[name]
	if !ok {
		return nil, func() {}
	}
	failed := false
	return func(format string, args ...any) {
			failed = true
			t.Logf("known defect: "+format, args...)
		}, func() {
			if !failed {
				t.Errorf("known defect %q (%s) no longer shows: remove it from knownDefects", name, known)
			}
		}
}

// TestApplyTwiceWritesNothing: for each storage version, each manifest and
// each applier, the second apply of the same manifest (after the
// operator's writes) makes no write (the same resourceVersion and
// generation, and a watch of the namespace sees no event before a marker
// object's), and the applier's diff shows nothing after either apply.
func TestApplyTwiceWritesNothing(t *testing.T) {
	all := manifests(t)
	for _, storage := range []string{"v1alpha1", "v1alpha2"} {
		t.Run("stored_"+storage, func(t *testing.T) {
			c := startCluster(t, storage)
			n := 0
			for _, m := range all {
				t.Run(m.name, func(t *testing.T) {
					fail, done := expectations(t)
					for _, a := range appliers {
						n++
						t.Run(a.name, func(t *testing.T) {
							applyTwice(t, c, a, m, "case-"+strconv.Itoa(n), fail)
						})
					}
					done()
				})
			}
		})
	}
}

func applyTwice(t *testing.T, c *cluster, a applier, m manifest, namespace string, fail func(format string, args ...any)) {
	if fail == nil {
		fail = t.Errorf
	}
	ctx := t.Context()
	_, err := c.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	desired := m.obj.DeepCopy()
	desired.SetNamespace(namespace)
	if len(a.labels) > 0 {
		labels := desired.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range a.labels {
			labels[k] = v
		}
		desired.SetLabels(labels)
	}
	data, err := yaml.Marshal(desired.Object)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), m.name+".yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	where := fmt.Sprintf("%s (%s, stored as %s) applied by %s", m.name, version(desired), c.storage, a.name)

	a.apply(t, c, desired, file)
	if d := a.diff(t, c, desired, file); d != "" {
		fail("%s: a diff right after the first apply:\n%s", where, d)
	}
	operatorWrites(t, c, desired)
	if d := a.diff(t, c, desired, file); d != "" {
		fail("%s: a diff after the operator's writes:\n%s", where, d)
	}
	before, err := c.get(ctx, desired)
	require.NoError(t, err)

	w, err := c.resource(version(desired)).Namespace(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: before.GetResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	a.apply(t, c, desired, file)
	// A marker written after the second apply: the watch delivers events
	// in order, so any write of the second apply comes before the marker's.
	marker := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "inferencestack.io/v1alpha1", "kind": "InferenceStack",
		"metadata": map[string]any{"name": "marker"}, "spec": map[string]any{"distribution": map[string]any{"name": "starter"}}}}
	_, err = c.resource("v1alpha1").Namespace(namespace).Create(ctx, marker, metav1.CreateOptions{})
	require.NoError(t, err)
	timeout := time.After(time.Minute)
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "%s: the watch closed before the marker's event", where)
			o, ok := ev.Object.(*unstructured.Unstructured)
			require.True(t, ok, "%s: watch event %s: %v", where, ev.Type, ev.Object)
			if o.GetName() == "marker" && ev.Type == watch.Added {
				seen = true
				continue
			}
			fail("%s: the second apply wrote: watch event %s of %s, resourceVersion %s -> %s:\n%s", where, ev.Type, o.GetName(),
				before.GetResourceVersion(), o.GetResourceVersion(), cmp.Diff(before.Object, o.Object))
		case <-timeout:
			t.Fatalf("%s: no watch event for the marker within a minute", where)
		}
	}
	after, err := c.get(ctx, desired)
	require.NoError(t, err)
	if after.GetResourceVersion() != before.GetResourceVersion() || after.GetGeneration() != before.GetGeneration() {
		fail("%s: the second apply wrote: resourceVersion %s -> %s, generation %d -> %d", where,
			before.GetResourceVersion(), after.GetResourceVersion(), before.GetGeneration(), after.GetGeneration())
	}
	if d := a.diff(t, c, desired, file); d != "" {
		fail("%s: a diff after the second apply:\n%s", where, d)
	}
}

// eventually retries f until it succeeds, failing the test after a minute.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, what, time.Minute, f)
}

// owner is one of two appliers of one stack: its field manager, and the
// manifest it applies (its fields only).
type owner struct {
	manager, manifest string
	// owns is a field it owns; notOwns the fields of the other owner.
	owns    []string
	notOwns [][]string
}

// TestTwoAppliersKeepTheirFields: two appliers of one stack, each owning
// its own fields, through the same version or through both, with the
// operator's writes in between: neither takes the other's fields
// (managedFields), neither's second apply conflicts or writes.
func TestTwoAppliersKeepTheirFields(t *testing.T) {
	const (
		workloadV1 = `{apiVersion: inferencestack.io/v1alpha1, kind: InferenceStack, metadata: {name: shared}, spec: {distribution: {name: starter},
			cache: {enabled: true}, storage: {kv: {type: redis, endpoint: "redis:6379"}}, workload: {replicas: 2, env: [{name: LOG_LEVEL, value: debug}]}}}`
		networkingV1 = `{apiVersion: inferencestack.io/v1alpha1, kind: InferenceStack, metadata: {name: shared}, spec: {distribution: {name: starter},
			networking: {port: 8443}}}`
		allowedFromV2 = `{apiVersion: inferencestack.io/v1alpha2, kind: InferenceStack, metadata: {name: shared}, spec: {distribution: {name: starter},
			networking: {allowedFrom: {namespaces: [clients]}}}}`
		scalingV2 = `{apiVersion: inferencestack.io/v1alpha2, kind: InferenceStack, metadata: {name: shared}, spec: {distribution: {name: starter},
			cache: {enabled: true}, storage: {kv: {type: redis, endpoint: "redis:6379"}},
			scaling: {autoscaling: {minReplicas: 1, maxReplicas: 3, metrics: [{resource: memory, averageUtilization: 60}]}}}}`
		envV1 = `{apiVersion: inferencestack.io/v1alpha1, kind: InferenceStack, metadata: {name: shared}, spec: {distribution: {name: starter},
			workload: {env: [{name: LOG_LEVEL, value: debug}]}}}`
	)
	pairs := []struct {
		name string
		a, b owner
	}{
		{"workload_and_networking_through_v1alpha1",
			owner{"team-workload", workloadV1, []string{"spec", "workload", "replicas"}, [][]string{{"spec", "networking"}}},
			owner{"team-networking", networkingV1, []string{"spec", "networking", "port"}, [][]string{{"spec", "workload"}}}},
		{"workload_through_v1alpha1_allowedFrom_through_v1alpha2",
			owner{"team-workload", workloadV1, []string{"spec", "workload", "replicas"}, [][]string{{"spec", "networking"}, {"metadata", "annotations"}}},
			owner{"team-networking", allowedFromV2, []string{"spec", "networking", "allowedFrom"}, [][]string{{"spec", "workload"}, {"spec", "scaling"}}}},
		{"scaling_through_v1alpha2_env_through_v1alpha1",
			owner{"team-scaling", scalingV2, []string{"spec", "scaling", "autoscaling"}, [][]string{{"spec", "workload"}}},
			owner{"team-env", envV1, []string{"spec", "workload", "env"}, [][]string{{"spec", "workload", "autoscaling"}, {"spec", "scaling"}, {"metadata", "annotations"}}}},
	}
	for _, storage := range []string{"v1alpha1", "v1alpha2"} {
		t.Run("stored_"+storage, func(t *testing.T) {
			c := startCluster(t, storage)
			for i, p := range pairs {
				t.Run(p.name, func(t *testing.T) {
					ctx := t.Context()
					fail, done := expectations(t)
					if fail == nil {
						fail = t.Errorf
					}
					defer done()
					namespace := "owners-" + strconv.Itoa(i)
					_, err := c.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
					require.NoError(t, err)
					manifest := func(o owner) *unstructured.Unstructured {
						j, err := yaml.YAMLToJSON([]byte(o.manifest))
						require.NoError(t, err)
						u := &unstructured.Unstructured{}
						require.NoError(t, u.UnmarshalJSON(j))
						u.SetNamespace(namespace)
						return u
					}
					for _, o := range []owner{p.a, p.b} {
						_, err := c.serverSideApply(ctx, manifest(o), o.manager, false, false)
						require.NoError(t, err, "%s's first apply", o.manager)
					}
					operatorWrites(t, c, manifest(p.a))
					before, err := c.get(ctx, manifest(p.a))
					require.NoError(t, err)
					for _, o := range []owner{p.a, p.b} {
						_, err := c.serverSideApply(ctx, manifest(o), o.manager, false, false)
						require.NoError(t, err, "%s's second apply (stored as %s): a conflict takes another's field", o.manager, storage)
					}
					after, err := c.get(ctx, manifest(p.a))
					require.NoError(t, err)
					if after.GetResourceVersion() != before.GetResourceVersion() {
						fail("stored as %s: the second applies of %s and %s wrote: resourceVersion %s -> %s:\n%s", storage, p.a.manager, p.b.manager,
							before.GetResourceVersion(), after.GetResourceVersion(), cmp.Diff(before.Object, after.Object))
					}
					for _, o := range []owner{p.a, p.b} {
						fields := managed(t, after, o.manager)
						if !has(fields, o.owns...) {
							fail("stored as %s: %s does not own %s, which it applies: %s", storage, o.manager, strings.Join(o.owns, "."), fields)
						}
						for _, path := range o.notOwns {
							if has(fields, path...) {
								fail("stored as %s: %s owns %s, the other applier's: %s", storage, o.manager, strings.Join(path, "."), fields)
							}
						}
					}
					if op := managed(t, after, operatorManager); has(op, "spec") {
						fail("stored as %s: the operator owns spec fields: %s", storage, op)
					}
				})
			}
		})
	}
}

// managed is the union of manager's fieldsV1 on obj (one entry per version
// and operation), as JSON.
func managed(t *testing.T, obj *unstructured.Unstructured, manager string) map[string]any {
	t.Helper()
	union := map[string]any{}
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields))
		merge(union, fields)
	}
	return union
}

func merge(into, from map[string]any) {
	for k, v := range from {
		sub, ok := v.(map[string]any)
		have, ok2 := into[k].(map[string]any)
		if ok && ok2 {
			merge(have, sub)
			continue
		}
		into[k] = v
	}
}

// has says whether the field set holds the field at path.
func has(fields map[string]any, path ...string) bool {
	for _, p := range path {
		next, ok := fields["f:"+p].(map[string]any)
		if !ok {
			return false
		}
		fields = next
	}
	return true
}
