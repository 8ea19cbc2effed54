package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// startClaimer runs a Claimer of major (narrowed by extra) in a manager of
// its own until the test ends.
func startClaimer(t *testing.T, major string, extra labels.Selector) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &controller.Claimer{Client: mgr.GetClient(), Major: major, Extra: extra}
	if err := c.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// labelHistory records, per stack of namespace ns, every value its
// LabelOperatorMajor took, from a watch of the API server.
type labelHistory struct {
	mu     sync.Mutex
	values map[string][]string
}

func watchLabels(t *testing.T, ns string) *labelHistory {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &v1alpha1.InferenceStackList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	h := &labelHistory{values: map[string][]string{}}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*v1alpha1.InferenceStack)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			v := s.Labels[v1alpha1.LabelOperatorMajor]
			h.mu.Lock()
			if vs := h.values[s.Name]; len(vs) == 0 || vs[len(vs)-1] != v {
				h.values[s.Name] = append(vs, v)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *labelHistory) of(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values[name]...)
}

// TestClaimersRaceForUnlabelledStacks: even when two majors both take
// unlabelled stacks (a misconfiguration), each stack is claimed once: the
// label is set once and never overwritten by the other major.
func TestClaimersRaceForUnlabelledStacks(t *testing.T) {
	ns := namespace(t)
	history := watchLabels(t, ns)
	// Both claimers select every unlabelled stack; a stack labelled only-N
	// is one only claimer N selects: its sentinel.
	only := func(major string) labels.Selector {
		other := map[string]string{"1": "2", "2": "1"}[major]
		sel, err := labels.Parse("!only-" + other)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	startClaimer(t, "1", only("1"))
	startClaimer(t, "2", only("2"))
	const n = 30
	for i := range n {
		create(t, testutil.Stack(fmt.Sprintf("s%02d", i), testutil.WithNamespace(ns)))
	}
	claimed := func(name string) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			if vs := history.of(name); len(vs) < 2 {
				return fmt.Errorf("stack %s not claimed yet: label history %q", name, vs)
			}
			return nil
		})
	}
	for i := range n {
		claimed(fmt.Sprintf("s%02d", i))
	}
	// A second claim would come from the claimer that lost the race, when it
	// gets to the stack. Each claimer works through its events one at a time,
	// in order, and learnt of every claim above before of its sentinel,
	// created now: once it has claimed its sentinel, it has handled them all.
	// (A claim refused by the optimistic lock is retried later, but only
	// while the stack is unlabelled in its cache, which it no longer is.)
	for _, major := range []string{"1", "2"} {
		s := testutil.Stack("sentinel-"+major, testutil.WithNamespace(ns))
		s.Labels = map[string]string{"only-" + major: "true"}
		create(t, s)
	}
	for _, major := range []string{"1", "2"} {
		claimed("sentinel-" + major)
		if vs := history.of("sentinel-" + major); vs[1] != major {
			t.Fatalf("sentinel-%s was claimed by major %s, which does not select it", major, vs[1])
		}
	}
	won := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		vs := history.of(name)
		if len(vs) != 2 || vs[0] != "" {
			t.Errorf("stack %s: label %s took the values %q, want unset then one major", name, v1alpha1.LabelOperatorMajor, vs)
			continue
		}
		won[vs[1]]++
	}
	t.Logf("stacks claimed per major: %v", won)
}

// TestClaimerKeepsToItsSelector: a Claimer narrowed by a selector (the
// operator's --stack-selector) claims only the unlabelled stacks it selects.
func TestClaimerKeepsToItsSelector(t *testing.T) {
	ns := namespace(t)
	extra, err := labels.Parse("team=a")
	if err != nil {
		t.Fatal(err)
	}
	startClaimer(t, "3", extra)
	a := testutil.Stack("a", testutil.WithNamespace(ns))
	a.Labels = map[string]string{"team": "a"}
	b := testutil.Stack("b", testutil.WithNamespace(ns))
	b.Labels = map[string]string{"team": "b"}
	create(t, b)
	create(t, a)
	eventually(t, 30*time.Second, func() error {
		got, err := get(t, &v1alpha1.InferenceStack{}, ns, "a")
		if err != nil {
			return err
		}
		if v := got.Labels[v1alpha1.LabelOperatorMajor]; v != "3" {
			return fmt.Errorf("stack a has %s=%q, want 3", v1alpha1.LabelOperatorMajor, v)
		}
		return nil
	})
	got, err := get(t, &v1alpha1.InferenceStack{}, ns, "b")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Labels[v1alpha1.LabelOperatorMajor]; ok {
		t.Errorf("stack b (team=b) was claimed (%s=%q) by a claimer of team=a", v1alpha1.LabelOperatorMajor, v)
	}
}

// keyStack is a stack of major whose inference provider takes its API key
// from Secret keySecret.
func keyStack(ns, name, keySecret, major string) *v1alpha1.InferenceStack {
	s := testutil.Stack(name, testutil.WithNamespace(ns),
		testutil.WithDistribution(v1alpha1.DistributionRemoteVLLM),
		testutil.WithProviders("inference", testutil.Provider("vllm",
			testutil.WithEndpoint("http://vllm:8000/v1"), testutil.WithAPIKey(keySecret, "token"))))
	s.Labels = map[string]string{v1alpha1.LabelOperatorMajor: major}
	return s
}

// watchedLabel waits until Secret name's watched label is (want) or is not
// there.
func watchedLabel(t *testing.T, ns, name string, want bool) {
	t.Helper()
	eventually(t, timeout, func() error {
		s, err := get(t, &corev1.Secret{}, ns, name)
		if err != nil {
			return err
		}
		if got := s.Labels[components.LabelWatched] == "true"; got != want {
			return fmt.Errorf("Secret %s/%s: watched label present %v, want %v (labels %v)", ns, name, got, want, s.Labels)
		}
		return nil
	})
}

// TestUnreferencedObjectsAreUnwatched: a user Secret keeps the watched label
// while some stack, of any major, references it, and loses it (nothing else
// of it changes) once none does: after a spec change and after deletions.
func TestUnreferencedObjectsAreUnwatched(t *testing.T) {
	ctx := context.Background()
	startOperator(t, onlyMajor(t, "1"))
	ns := namespace(t)
	for _, name := range []string{"key-a", "key-shared"} {
		create(t, secret(ns, name, map[string]string{"token": name}))
	}
	create(t, keyStack(ns, "a", "key-a", "1"))
	create(t, keyStack(ns, "b", "key-shared", "1"))
	// A stack of a major that does not run here: this operator never sees it
	// in its cache, yet it references key-shared too.
	create(t, keyStack(ns, "other-major", "key-shared", "9"))
	converged(t, ns, "a")
	converged(t, ns, "b")
	watchedLabel(t, ns, "key-a", true)
	watchedLabel(t, ns, "key-shared", true)

	// a moves to the shared key: key-a is no longer referenced.
	a, err := get(t, &v1alpha1.InferenceStack{}, ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.Providers.Inference[0].APIKey.Name = "key-shared"
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	watchedLabel(t, ns, "key-a", false)
	if s, _ := get(t, &corev1.Secret{}, ns, "key-a"); string(s.Data["token"]) != "key-a" {
		t.Errorf("Secret key-a changed beyond its label: %v", s.Data)
	}

	// Deleting every stack of this major leaves key-shared watched: the other
	// major's stack still references it.
	for _, name := range []string{"a", "b"} {
		s, err := get(t, &v1alpha1.InferenceStack{}, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		eventually(t, timeout, func() error {
			if _, err := get(t, &v1alpha1.InferenceStack{}, ns, name); err == nil {
				return fmt.Errorf("stack %s still exists", name)
			}
			return nil
		})
	}
	watchedLabel(t, ns, "key-shared", true)

	// Once the other major's stack moves here and is deleted, nothing
	// references key-shared.
	other, err := get(t, &v1alpha1.InferenceStack{}, ns, "other-major")
	if err != nil {
		t.Fatal(err)
	}
	other.Labels[v1alpha1.LabelOperatorMajor] = "1"
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	converged(t, ns, "other-major")
	if err := env.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	watchedLabel(t, ns, "key-shared", false)
}
