package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/internal/testutil"
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
	c := &controller.Claimer{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), Major: major, Extra: extra}
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
	startClaimer(t, "1", nil)
	startClaimer(t, "2", nil)
	const n = 30
	for i := range n {
		create(t, testutil.Stack(fmt.Sprintf("s%02d", i), testutil.WithNamespace(ns)))
	}
	won := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		eventually(t, 30*time.Second, func() error {
			if vs := history.of(name); len(vs) < 2 {
				return fmt.Errorf("stack %s not claimed yet: label history %q", name, vs)
			}
			return nil
		})
	}
	// Give a second claim, were there one, time to land.
	time.Sleep(2 * time.Second)
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
