package controller_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/apply"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// starterSample is the starter sample as users apply it, in namespace ns.
func starterSample(t *testing.T, ns string) *v1alpha1.InferenceStack {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "inferencestack_v1alpha1_starter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.InferenceStack{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		t.Fatal(err)
	}
	s.Namespace = ns
	return s
}

// TestCreationWritesEachObjectOnce: unlabelled stacks taken by the
// operator's major, the starter sample and one of each feature mix, get one
// write of each object, one status write, no label, no event, no finalizer
// and no patch of their metadata: 6 writes for the starter sample, its
// floor, and the floor for every kind of the mix (volumes the stack must
// delete with it are owned by it, so the garbage collector does). The user objects they share are labelled once,
// and each stack is reconciled once.
func TestCreationWritesEachObjectOnce(t *testing.T) {
	op := startOperator(t, onlyMajor(t, "1"), takingUnlabeled(nil))
	ns := namespace(t)
	override, err := runconfig.Base(stackconfig.Line02, string(v1alpha1.DistributionStarter)) // testPin pins 0.2.23
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range testutil.FeatureObjects(ns, override) {
		create(t, obj)
	}
	starter := starterSample(t, ns)
	create(t, starter)
	names := []string{starter.Name}
	for i := range testutil.FeatureVariants {
		names = append(names, fmt.Sprintf("feature%d", i))
		create(t, testutil.FeatureStack(ns, names[i+1], i))
	}
	for _, name := range names {
		converged(t, ns, name)
	}
	// One more reconcile of each: had a write of the creation been left to
	// a later reconcile, it would show now.
	op.reconcileAll(t, ns, names, "after-creation")
	// Nor did the operator's own writes bring the stacks back.
	for _, name := range names {
		if n := op.reconciles.Finished(types.NamespacedName{Namespace: ns, Name: name}); n != 2 {
			t.Errorf("stack %s was reconciled %d times, want once at creation and once more", name, n)
		}
	}

	writes := op.writes.Writes()
	seen := map[string]int{}
	for _, w := range writes {
		seen[w]++
	}
	for w, n := range seen {
		if n > 1 {
			t.Errorf("written %d times: %s", n, w)
		}
	}
	for _, name := range names {
		key := ns + "/" + name
		var metadata, status int
		for _, w := range writes {
			switch {
			case strings.HasPrefix(w, "status patch ") && strings.HasSuffix(w, " "+key):
				status++
			case strings.HasPrefix(w, "patch ") && strings.HasSuffix(w, " "+key):
				metadata++
			}
		}
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := s.Labels[v1alpha2.LabelOperatorMajor]; ok {
			t.Errorf("stack %s was labelled %s=%q: a stack the major takes unlabelled stays so", name, v1alpha2.LabelOperatorMajor, v)
		}
		if metadata != 0 || status != 1 || len(s.Finalizers) != 0 {
			t.Errorf("stack %s (finalizers %v): %d patches of its metadata and %d of its status, want 0 and 1, and no finalizer",
				name, s.Finalizers, metadata, status)
		}
		eventually(t, timeout, func() error {
			if n := eventsOf(t, ns, name); n != 0 {
				return fmt.Errorf("stack %s has %d events, want none", name, n)
			}
			return nil
		})
	}
	var ofStarter []string
	for _, w := range writes {
		if strings.HasSuffix(w, " "+ns+"/"+starter.Name) || strings.Contains(w, " "+ns+"/"+starter.Name+"-") {
			ofStarter = append(ofStarter, w)
		}
	}
	golden(t, filepath.Join("testdata", "creation-writes.golden"), writeList(writes, ns, names))
	// Its ConfigMap, ServiceAccount, Deployment, Service and NetworkPolicy,
	// and the status.
	if len(ofStarter) != 6 {
		t.Errorf("the starter sample took %d writes, want 6:\n%s", len(ofStarter), strings.Join(ofStarter, "\n"))
	}
}

// TestLabelledStackCreationIsAtTheFloor: a stack created with its major's
// label and nothing owner references cannot remove (no cache, no state
// volume, no referenced user object: the starter sample) takes one write
// per object and one status write, no patch of its metadata (no finalizer)
// and no Event; deleted, its objects go with it (the garbage collector) and
// the operator forgets it. One that references a user Secret is at the
// floor too (no finalizer); deleted, its Secret loses the watched label.
func TestLabelledStackCreationIsAtTheFloor(t *testing.T) {
	op := startOperator(t, onlyMajor(t, "1"))
	ns := namespace(t)
	starter := starterSample(t, ns)
	starter.Labels = map[string]string{v1alpha2.LabelOperatorMajor: "1"}
	create(t, starter)
	converged(t, ns, starter.Name)
	op.reconcileAll(t, ns, []string{starter.Name}, "after-creation")

	var writes []string
	for _, w := range op.writes.Writes() {
		if strings.HasSuffix(w, " "+ns+"/"+starter.Name) || strings.Contains(w, " "+ns+"/"+starter.Name+"-") {
			writes = append(writes, w)
		}
	}
	// Its ConfigMap, ServiceAccount, Deployment, Service and NetworkPolicy,
	// and the status.
	if len(writes) != 6 || slices.ContainsFunc(writes, func(w string) bool {
		return strings.HasPrefix(w, "patch ") && strings.HasSuffix(w, " "+ns+"/"+starter.Name)
	}) {
		t.Errorf("the labelled starter sample took %d writes, want 6 and none of its metadata:\n%s", len(writes), strings.Join(writes, "\n"))
	}
	stack := &v1alpha1.InferenceStack{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(starter), stack); err != nil {
		t.Fatal(err)
	}
	if len(stack.Finalizers) != 0 {
		t.Errorf("the starter sample has finalizers %v, want none", stack.Finalizers)
	}
	if n := eventsOf(t, ns, starter.Name); n != 0 {
		t.Errorf("the starter sample has %d events, want none", n)
	}
	if op.reconciler.RunConfigsMade(stack.UID) != 1 {
		t.Fatalf("the operator made %d run configs for the stack, want 1", op.reconciler.RunConfigsMade(stack.UID))
	}
	deletedAndForgotten(t, op, stack)
	eventually(t, timeout, func() error {
		dep := &appsv1.Deployment{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: starter.Name}, dep)
		if apierrors.IsNotFound(err) || (err == nil && !dep.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("the deleted stack's Deployment is still there (err %w)", err)
	})

	withSecret := testutil.Stack("with-secret", testutil.WithNamespace(ns),
		testutil.WithProviders("inference", testutil.Provider("openai", testutil.WithAPIKey("openai-key", "key"))))
	withSecret.Labels = map[string]string{v1alpha2.LabelOperatorMajor: "1"}
	create(t, secret(ns, "openai-key", map[string]string{"key": "sk-1"}))
	create(t, withSecret)
	got := converged(t, ns, "with-secret")
	if len(got.Finalizers) != 0 {
		t.Errorf("a stack that references a user Secret has finalizers %v, want none", got.Finalizers)
	}
	labelled, err := get(t, &corev1.Secret{}, ns, "openai-key")
	if err != nil || labelled.Labels[components.LabelWatched] != "true" {
		t.Fatalf("the referenced Secret has labels %v (err %v), want %s=true", labelled.Labels, err, components.LabelWatched)
	}
	// Deleted, its delete event makes the operator forget it and remove
	// the label no other stack needs.
	deletedAndForgotten(t, op, got)
	eventually(t, timeout, func() error {
		s, err := get(t, &corev1.Secret{}, ns, "openai-key")
		if err != nil {
			return err
		}
		if v, ok := s.Labels[components.LabelWatched]; ok {
			return fmt.Errorf("the Secret of the deleted stack still has %s=%s", components.LabelWatched, v)
		}
		return nil
	})
}

// deletedAndForgotten deletes stack and waits until the operator no longer
// remembers its run configs.
func deletedAndForgotten(t *testing.T, op *operator, stack *v1alpha1.InferenceStack) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), stack); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if n := op.reconciler.RunConfigsMade(stack.UID); n != 0 {
			return fmt.Errorf("the operator still remembers %d run configs of the deleted stack %s (finalizers %v)", n, stack.Name, stack.Finalizers)
		}
		return nil
	})
}

// eventsOf counts the events.k8s.io Events about stack name.
func eventsOf(t *testing.T, ns, name string) int {
	t.Helper()
	return len(eventReasonsOf(t, ns, name))
}

// eventReasonsOf are the reasons of the events.k8s.io Events about stack
// name.
func eventReasonsOf(t *testing.T, ns, name string) []string {
	t.Helper()
	var events eventsv1.EventList
	if err := env.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "InferenceStack" && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// TestCacheHoldsOnlyWhatTheOperatorReads: the manager's cache holds no
// managed fields, the digest of the fields the operator owns on its
// objects instead, its Deployments trimmed to what the status reads and its
// own ConfigMaps without their data; user objects keep their data.
// (TestSteadyStateMakesNoWrites and TestHandEditsAreRepaired show the
// digest does what the managed fields did.)
func TestCacheHoldsOnlyWhatTheOperatorReads(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	for _, obj := range testutil.FeatureObjects(ns, nil) {
		create(t, obj)
	}
	create(t, testutil.FeatureStack(ns, "lean", 0))
	converged(t, ns, "lean")
	ctx := context.Background()
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

	dep := &appsv1.Deployment{}
	eventually(t, timeout, func() error { return op.cache.Get(ctx, key("lean"), dep) })
	if len(dep.ManagedFields) != 0 {
		t.Errorf("the cached Deployment has %d managed fields entries", len(dep.ManagedFields))
	}
	if dep.Annotations[apply.DigestAnnotation] == "" {
		t.Errorf("the cached Deployment has no %s annotation: %v", apply.DigestAnnotation, dep.Annotations)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Image == "" || len(pod.Containers[0].Env) != 0 || len(pod.Volumes) != 0 {
		t.Errorf("the cached Deployment's pod holds more than its containers' names and images: %+v", pod)
	}
	if dep.Spec.Replicas == nil {
		t.Error("the cached Deployment lost its replicas, which the status reports")
	}

	cm := &corev1.ConfigMap{}
	if err := op.cache.Get(ctx, key(config.ConfigMapName("lean")), cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 0 || len(cm.ManagedFields) != 0 {
		t.Errorf("the cached run config ConfigMap holds %d data keys and %d managed fields entries, want none", len(cm.Data), len(cm.ManagedFields))
	}
	user := &corev1.Secret{}
	eventually(t, timeout, func() error { return op.cache.Get(ctx, key(testutil.FeatureAPIKeySecret), user) })
	if len(user.Data) == 0 || len(user.ManagedFields) != 0 {
		t.Errorf("the cached user Secret holds %d data keys (want its data) and %d managed fields entries (want none)",
			len(user.Data), len(user.ManagedFields))
	}
	stack := &v1alpha1.InferenceStack{}
	if err := op.cache.Get(ctx, key("lean"), stack); err != nil {
		t.Fatal(err)
	}
	if len(stack.ManagedFields) != 0 {
		t.Errorf("the cached InferenceStack has %d managed fields entries", len(stack.ManagedFields))
	}
}

// notFound is a cache that never sees anything: the worst case of a cache
// behind the API server.
type notFound struct{}

func (notFound) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("any").GroupResource(), key.Name)
}

func (notFound) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestApplierWritesOnceBeforeItsCacheCatchesUp: an object the Applier wrote
// and its cache has not seen is not written again (the API server says it
// holds it already), but is written again once deleted.
func TestApplierWritesOnceBeforeItsCacheCatchesUp(t *testing.T) {
	ns := namespace(t)
	stale, err := client.New(env.Config, client.Options{Scheme: scheme(), Cache: &client.CacheOptions{Reader: notFound{}}})
	if err != nil {
		t.Fatal(err)
	}
	counter := &writeCounter{}
	a := &apply.Applier{Client: &countingClient{Client: stale, counter: counter}, Reader: env.Client}
	desired := func() *corev1ac.ConfigMapApplyConfiguration {
		return corev1ac.ConfigMap("written-once", ns).WithData(map[string]string{"a": "1"})
	}
	ctx := context.Background()
	for range 3 {
		if _, _, err := apply.Apply(ctx, a, apply.ConfigMap, desired()); err != nil {
			t.Fatal(err)
		}
	}
	if w := counter.Writes(); len(w) != 1 {
		t.Errorf("3 applies of one ConfigMap before the cache saw it wrote %d times, want 1: %v", len(w), w)
	}
	if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "written-once"}}); err != nil {
		t.Fatal(err)
	}
	if _, wrote, err := apply.Apply(ctx, a, apply.ConfigMap, desired()); err != nil || !wrote {
		t.Errorf("applying a deleted ConfigMap again: wrote %v, err %v; want a write", wrote, err)
	}
	live, err := get(t, &corev1.ConfigMap{}, ns, "written-once")
	if err != nil {
		t.Fatal(err)
	}
	// Once its cache has seen the last write, nothing is pending.
	if a.Observe(live); a.Pending() != 0 {
		t.Errorf("%d writes pending after the cache saw the object", a.Pending())
	}
}

// TestRequeuesOnlyWhatNoEventBrings: a stack waiting for a user object that
// does not exist is looked at again after RetryInterval (the cache holds no
// such object, so no event comes); one whose fix shows in an event (its
// spec, or a watched object it references) is not requeued.
func TestRequeuesOnlyWhatNoEventBrings(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken-override"},
		Data: map[string]string{"run.yaml": "version: [not a run config"}})
	tests := []struct {
		name        string
		stack       *v1alpha1.InferenceStack
		wantReason  string
		wantRequeue bool
	}{{
		name: "missing Secret",
		stack: testutil.Stack("missing", testutil.WithNamespace(ns),
			testutil.WithProviders("inference", testutil.Provider("openai", testutil.WithAPIKey("absent", "key")))),
		wantReason:  v1alpha2.ReasonSecretNotFound,
		wantRequeue: true,
	}, {
		name:       "invalid override config",
		stack:      testutil.Stack("invalid", testutil.WithNamespace(ns), testutil.WithOverrideConfig("broken-override")),
		wantReason: v1alpha2.ReasonInvalidConfig,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			create(t, tc.stack)
			eventually(t, timeout, func() error {
				s, err := get(t, &v1alpha1.InferenceStack{}, ns, tc.stack.Name)
				if err != nil {
					return err
				}
				for _, c := range s.Status.Conditions {
					if c.Reason == tc.wantReason {
						return nil
					}
				}
				return fmt.Errorf("no condition with reason %s: %+v", tc.wantReason, s.Status.Conditions)
			})
			res, err := op.reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.stack)})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.RequeueAfter > 0; got != tc.wantRequeue {
				t.Errorf("requeued after %s, want a requeue: %v", res.RequeueAfter, tc.wantRequeue)
			}
		})
	}
}

// TestConcurrencyIsConfigurable: the reconciler runs Concurrency workers,
// by default 4 per GOMAXPROCS.
func TestConcurrencyIsConfigurable(t *testing.T) {
	tests := []struct {
		name string
		opts []operatorOption
		want int
	}{
		{name: "default", want: 4 * runtime.GOMAXPROCS(0)},
		{name: "set", opts: []operatorOption{withConcurrency(3)}, want: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := startOperator(t, tc.opts...)
			eventually(t, timeout, func() error {
				if got := gauge(t, "controller_runtime_max_concurrent_reconciles", "inferencestack"); got != tc.want {
					return fmt.Errorf("controller_runtime_max_concurrent_reconciles = %d, want %d", got, tc.want)
				}
				return nil
			})
			op.stop()
		})
	}
	if controller.DefaultConcurrency() != 4*runtime.GOMAXPROCS(0) {
		t.Errorf("DefaultConcurrency() = %d, want 4 per GOMAXPROCS", controller.DefaultConcurrency())
	}
}

// gauge reads a gauge of controller-runtime's registry for one controller.
func gauge(t *testing.T, name, ctrlName string) int {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == "controller" && l.GetValue() == ctrlName
			}) {
				return int(m.GetGauge().GetValue())
			}
		}
	}
	return -1
}

// TestRunConfigMadeOnlyWhenItsInputsChange: the config step makes a stack's
// run config (the pipeline, or the override's check) once for each set of
// its inputs: reconciles that change nothing make none; a spec change, an
// edit of the override's text, a hand edit of the run-config ConfigMap and
// its deletion each make one, and the edit and the deletion are repaired.
func TestRunConfigMadeOnlyWhenItsInputsChange(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	base, err := runconfig.Base(stackconfig.Line02, string(v1alpha1.DistributionStarter)) // testPin pins 0.2.23
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "override"}, Data: map[string]string{"run.yaml": string(base)}})
	create(t, testutil.Stack("gen", testutil.WithNamespace(ns)))
	create(t, testutil.Stack("ovr", testutil.WithNamespace(ns), testutil.WithOverrideConfig("override")))
	names := []string{"gen", "ovr"}
	uids := map[string]types.UID{}
	for _, name := range names {
		uids[name] = converged(t, ns, name).UID
	}
	want := map[string]int{"gen": 1, "ovr": 1}
	check := func(what string) {
		t.Helper()
		for _, name := range names {
			if got := op.reconciler.RunConfigsMade(uids[name]); got != want[name] {
				t.Errorf("%s: %d run configs made for stack %s, want %d", what, got, name, want[name])
			}
		}
	}
	// checkSoon is check for a change the test sees in the run-config
	// ConfigMap: the reconcile that applied it counts what it made just
	// after the apply returns. Once the counts are what the test wants, the
	// operator's cache catches up with the objects the change touched
	// (changed, as the test last read them), a reconcile of each stack after
	// that finishes, and the counts must still be exactly what the test
	// wants: a run config made later than the one expected shows there.
	checkSoon := func(what string, changed ...client.Object) {
		t.Helper()
		eventually(t, timeout, func() error {
			for _, name := range names {
				if got := op.reconciler.RunConfigsMade(uids[name]); got != want[name] {
					return fmt.Errorf("%s: %d run configs made for stack %s, want %d", what, got, name, want[name])
				}
			}
			return nil
		})
		for _, obj := range changed {
			op.cached(t, obj)
		}
		op.reconcileAll(t, ns, names, what)
		check(what + ", then a reconcile of each stack")
	}
	check("at creation")
	op.reconcileAll(t, ns, names, "same-1")
	op.reconcileAll(t, ns, names, "same-2")
	check("after two reconciles of each with the same inputs")

	configOf := func(name string) *corev1.ConfigMap {
		t.Helper()
		cm, err := get(t, &corev1.ConfigMap{}, ns, config.ConfigMapName(name))
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	update(t, ns, "gen", testutil.WithEnv("EXTRA", "1"))
	converged(t, ns, "gen")
	want["gen"]++
	check("after a spec change")

	cm := edit(t, &corev1.ConfigMap{}, ns, "override", func(cm *corev1.ConfigMap) { cm.Data["run.yaml"] += "# edited\n" })
	var applied *corev1.ConfigMap
	eventually(t, timeout, func() error {
		if applied = configOf("ovr"); applied.Data[runconfig.ConfigKey] != cm.Data["run.yaml"] {
			return errors.New("the run-config ConfigMap does not hold the edited override yet")
		}
		return nil
	})
	want["ovr"]++
	checkSoon("after the override was edited", cm, applied)

	var text string
	edit(t, &corev1.ConfigMap{}, ns, config.ConfigMapName("gen"), func(cm *corev1.ConfigMap) {
		text = cm.Data[runconfig.ConfigKey]
		cm.Data[runconfig.ConfigKey] = "version: 2\n"
	})
	var repaired *corev1.ConfigMap
	eventually(t, timeout, func() error {
		if repaired = configOf("gen"); repaired.Data[runconfig.ConfigKey] != text {
			return errors.New("the hand edit of the run config is not repaired yet")
		}
		return nil
	})
	want["gen"]++
	checkSoon("after a hand edit of the run-config ConfigMap", repaired)

	gone := configOf("gen")
	if err := env.Client.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	var again *corev1.ConfigMap
	eventually(t, timeout, func() error {
		var err error
		if again, err = get(t, &corev1.ConfigMap{}, ns, config.ConfigMapName("gen")); err != nil {
			return err
		}
		if again.UID == gone.UID || again.Data[runconfig.ConfigKey] != text {
			return errors.New("the deleted run-config ConfigMap is not made again yet")
		}
		return nil
	})
	want["gen"]++
	checkSoon("after the run-config ConfigMap was deleted", again)
}

// updateGolden rewrites the golden files of the tests instead of comparing
// with them.
var updateGolden = flag.Bool("update", false, "rewrite the golden files (testdata/*.golden)")

// writeList is the exact list of writes of each stack (the writes naming
// it or an object of its, "<stack>-..."), sorted, with the namespace
// written as <ns>, and then the writes of no stack (the user objects they
// share): what the creation of the stacks costs, kind by kind.
func writeList(writes []string, ns string, names []string) string {
	var b strings.Builder
	of := map[string][]string{}
	for _, w := range writes {
		owner := ""
		for _, name := range names {
			if (strings.HasSuffix(w, " "+ns+"/"+name) || strings.Contains(w, " "+ns+"/"+name+"-")) && len(name) > len(owner) {
				owner = name
			}
		}
		of[owner] = append(of[owner], strings.ReplaceAll(w, " "+ns+"/", " <ns>/"))
	}
	for _, name := range append(slices.Clone(names), "") {
		list := of[name]
		slices.Sort(list)
		title := name
		if title == "" {
			title = "(no stack: the user objects the stacks share)"
		}
		fmt.Fprintf(&b, "# %s: %d writes\n", title, len(list))
		for _, w := range list {
			b.WriteString(w + "\n")
		}
	}
	return b.String()
}

// golden compares got with the golden file path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run the test with -update to write it, and review it", err)
	}
	if got != string(want) {
		t.Errorf("the writes differ from %s (run with -update to rewrite it, then review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestSpecJudgedOncePerSpec: a stack read through v1alpha1 is judged by
// v1alpha2's rules (3 ms of CPU a stack: BenchmarkValidate) once per spec:
// reconciles that find the spec unchanged judge nothing again; an edit of
// the annotation alone (no new generation) is judged, once.
func TestSpecJudgedOncePerSpec(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	stack := testutil.Stack("judged", testutil.WithNamespace(ns), func(s *v1alpha1.InferenceStack) {
		s.Annotations = map[string]string{v1alpha2.SpecAnnotation: `{"networking":{"allowedFrom":{"namespaces":["clients"]}}}`}
	})
	create(t, stack)
	uid := converged(t, ns, stack.Name).UID
	op.reconcileAll(t, ns, []string{stack.Name}, "unchanged")
	op.reconcileAll(t, ns, []string{stack.Name}, "unchanged again")
	if n := op.reconciler.SpecsJudged(uid); n != 1 {
		t.Fatalf("the spec was judged %d times in three reconciles of it, want once", n)
	}
	update(t, ns, stack.Name, func(s *v1alpha1.InferenceStack) {
		s.Annotations[v1alpha2.SpecAnnotation] = `{"networking":{"allowedFrom":{"namespaces":["clients","batch"]}}}`
	})
	eventually(t, timeout, func() error {
		if n := op.reconciler.SpecsJudged(uid); n != 2 {
			return fmt.Errorf("the spec was judged %d times, want twice after an edit of its annotation", n)
		}
		return nil
	})
	op.reconcileAll(t, ns, []string{stack.Name}, "after the edit")
	if n := op.reconciler.SpecsJudged(uid); n != 2 {
		t.Errorf("the spec was judged %d times, want twice: once before, once after the edit", n)
	}
}

// TestOverrideNamedAsTheRunConfigIsNotOverwritten: a stack whose override
// ConfigMap bears the name of the run-config ConfigMap the operator makes
// for it (<name>-run-config) is refused (NameTaken), and the user's
// ConfigMap keeps its text and labels but the operator's watch label, also
// once the operator's cache holds it (the operator labels what a stack
// references): an apply would have overwritten it.
func TestOverrideNamedAsTheRunConfigIsNotOverwritten(t *testing.T) {
	startOperator(t)
	ns := namespace(t)
	base, err := runconfig.Base(stackconfig.Line02, string(v1alpha1.DistributionStarter)) // testPin pins 0.2.23
	if err != nil {
		t.Fatal(err)
	}
	text := "# the user's own\n" + string(base)
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash-run-config"}, Data: map[string]string{"run.yaml": text}})
	create(t, testutil.Stack("clash", testutil.WithNamespace(ns), testutil.WithOverrideConfig("clash-run-config")))
	// The operator labels the override to watch it, which brings it into
	// its cache, and the label's arrival wakes the stack again: wait for
	// a reconcile after the label, then for the status of that reconcile.
	eventually(t, timeout, func() error {
		cm, err := get(t, &corev1.ConfigMap{}, ns, "clash-run-config")
		if err != nil {
			return err
		}
		if len(cm.Labels) == 0 {
			return fmt.Errorf("the override ConfigMap is not labelled to be watched yet")
		}
		return nil
	})
	update(t, ns, "clash", func(s *v1alpha1.InferenceStack) {
		s.Annotations = map[string]string{"test.inferencestack.io/poke": "1"}
	})
	settled(t, ns, "clash")
	eventually(t, timeout, func() error {
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, "clash")
		if err != nil {
			return err
		}
		if c := findCondition(s, v1alpha2.TypeDegraded); c == nil || c.Reason != v1alpha2.ReasonNameTaken {
			return fmt.Errorf("Degraded %+v, want reason %s", c, v1alpha2.ReasonNameTaken)
		}
		return nil
	})
	cm, err := get(t, &corev1.ConfigMap{}, ns, "clash-run-config")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["run.yaml"] != text || cm.Labels[components.LabelManagedBy] != "" || len(cm.OwnerReferences) != 0 {
		t.Errorf("the user's ConfigMap was taken over: labels %v, owners %v, its text changed: %v", cm.Labels, cm.OwnerReferences, cm.Data["run.yaml"] != text)
	}
}
