package controller_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/test/testutil"
)

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
			v := s.Labels[v1alpha2.LabelOperatorMajor]
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

// TestTwoTakersLeaveEachStackToOne: while two majors both take unlabelled
// stacks (one upgraded to a release that takes them before the other to
// one that does not), each unlabelled stack ends up with exactly one of
// them: the one whose status write took it (the status names its release),
// the other labels it for that one. A stack one major reconciled before the
// other started stays with it, its objects untouched.
func TestTwoTakersLeaveEachStackToOne(t *testing.T) {
	ns := namespace(t)
	history := watchLabels(t, ns)
	// Major 2's pin deploys another image (a name no registry serves: the
	// envtest runs no pods), so the Deployment tells whose objects are in
	// force.
	two := pin.Pin{OperatorVersion: "2.0.0", LlamaStackVersion: testPin.LlamaStackVersion, Operands: maps.Clone(testPin.Operands)}
	two.Operands["starter"] = "registry.invalid/major-two/distribution-starter:0.2.23"
	pins := map[string]pin.Pin{"1": testPin, "2": two}
	image := func(s *v1alpha1.InferenceStack) string {
		t.Helper()
		dep, err := get(t, &appsv1.Deployment{}, s.Namespace, server.Name(s))
		if err != nil {
			t.Fatal(err)
		}
		return dep.Spec.Template.Spec.Containers[0].Image
	}

	// Major 1 works on one stack at a time, major 2 on several: each wins
	// some of the stacks created at once.
	startOperator(t, onlyMajor(t, "1"), takingUnlabeled(nil), withConcurrency(1))
	create(t, testutil.Stack("old", testutil.WithNamespace(ns)))
	old := converged(t, ns, "old")
	oldDep, err := get(t, &appsv1.Deployment{}, ns, server.Name(old))
	if err != nil {
		t.Fatal(err)
	}

	startOperator(t, withPin(two), onlyMajor(t, "2"), takingUnlabeled(nil))
	const n = 10
	names := []string{"old"}
	for i := range n {
		names = append(names, fmt.Sprintf("s%02d", i))
		create(t, testutil.Stack(names[i+1], testutil.WithNamespace(ns)))
	}
	won := map[string]int{}
	for _, name := range names {
		var s *v1alpha1.InferenceStack
		eventually(t, timeout, func() error {
			s = converged(t, ns, name)
			major, by := s.Labels[v1alpha2.LabelOperatorMajor], s.Status.ResolvedDistribution
			switch {
			case major == "":
				return fmt.Errorf("stack %s is not labelled yet", name)
			case by == nil || by.OperatorVersion != pins[major].OperatorVersion:
				return fmt.Errorf("stack %s labelled %s has the status of %+v", name, major, by)
			case image(s) != pins[major].Operands["starter"]:
				return fmt.Errorf("stack %s labelled %s runs %s", name, major, image(s))
			}
			return nil
		})
		if vs := history.of(name); len(vs) != 2 || vs[0] != "" {
			t.Errorf("stack %s: label %s took the values %q, want unset then one major", name, v1alpha2.LabelOperatorMajor, vs)
		}
		won[s.Labels[v1alpha2.LabelOperatorMajor]]++
	}
	t.Logf("stacks per major: %v", won)
	if got := history.of("old"); got[len(got)-1] != "1" {
		t.Errorf("stack old, reconciled by major 1 before major 2 started, was labelled %q", got[len(got)-1])
	}
	dep, err := get(t, &appsv1.Deployment{}, ns, server.Name(old))
	if err != nil {
		t.Fatal(err)
	}
	if dep.Generation != oldDep.Generation {
		t.Errorf("stack old's Deployment changed (generation %d, was %d) when major 2 started", dep.Generation, oldDep.Generation)
	}
}

// TestTakerKeepsToItsSelector: an operator narrowed by a selector (its
// --stack-selector) takes only the unlabelled stacks it selects.
func TestTakerKeepsToItsSelector(t *testing.T) {
	ns := namespace(t)
	extra, err := labels.Parse("team=a")
	if err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, onlyMajor(t, "1"), takingUnlabeled(extra))
	a := testutil.Stack("a", testutil.WithNamespace(ns))
	a.Labels = map[string]string{"team": "a"}
	b := testutil.Stack("b", testutil.WithNamespace(ns))
	b.Labels = map[string]string{"team": "b"}
	create(t, b)
	create(t, a)
	got := converged(t, ns, "a")
	if v, ok := got.Labels[v1alpha2.LabelOperatorMajor]; ok {
		t.Errorf("stack a was labelled %s=%q", v1alpha2.LabelOperatorMajor, v)
	}
	// b, created first, would have been reconciled first.
	got, err = get(t, &v1alpha1.InferenceStack{}, ns, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "" || op.reconciles.Finished(client.ObjectKeyFromObject(got)) != 0 {
		t.Errorf("stack b (team=b) was reconciled by an operator of team=a: status %+v", got.Status)
	}
}

// keyStack is a stack of major whose inference provider takes its API key
// from Secret keySecret.
func keyStack(ns, name, keySecret, major string) *v1alpha1.InferenceStack {
	s := testutil.Stack(name, testutil.WithNamespace(ns),
		testutil.WithDistribution(v1alpha1.DistributionRemoteVLLM),
		testutil.WithProviders("inference", testutil.Provider("vllm",
			testutil.WithEndpoint("http://vllm:8000/v1"), testutil.WithAPIKey(keySecret, "token"))))
	s.Labels = map[string]string{v1alpha2.LabelOperatorMajor: major}
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
	op := startOperator(t, onlyMajor(t, "1"))
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
	update(t, ns, "a", func(a *v1alpha1.InferenceStack) { a.Spec.Providers.Inference[0].APIKey.Name = "key-shared" })
	watchedLabel(t, ns, "key-a", false)
	if s, _ := get(t, &corev1.Secret{}, ns, "key-a"); string(s.Data["token"]) != "key-a" {
		t.Errorf("Secret key-a changed beyond its label: %v", s.Data)
	}

	// A stack relabelled for another major leaves this one's cache, with a
	// delete event, but is not deleted: its Secret stays watched and no
	// event says its volumes were kept.
	create(t, secret(ns, "key-leaving", map[string]string{"token": "key-leaving"}))
	leaving := keyStack(ns, "leaving", "key-leaving", "1")
	testutil.WithCache()(leaving)
	create(t, leaving)
	converged(t, ns, "leaving")
	watchedLabel(t, ns, "key-leaving", true)
	handled := controller.DeletionsHandled(op.reconciler)
	update(t, ns, "leaving", func(l *v1alpha1.InferenceStack) { l.Labels[v1alpha2.LabelOperatorMajor] = "9" })
	eventually(t, timeout, func() error {
		if controller.DeletionsHandled(op.reconciler) == handled {
			return errors.New("the operator has not handled the delete event of the relabelled stack")
		}
		return nil
	})
	watchedLabel(t, ns, "key-leaving", true)
	if reasons := eventReasonsOf(t, ns, "leaving"); slices.Contains(reasons, "CacheRetained") {
		t.Errorf("the relabelled stack, not deleted, has events %v", reasons)
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
	update(t, ns, "other-major", func(other *v1alpha1.InferenceStack) { other.Labels[v1alpha2.LabelOperatorMajor] = "1" })
	converged(t, ns, "other-major")
	if err := env.Client.Delete(ctx, &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-major"}}); err != nil {
		t.Fatal(err)
	}
	watchedLabel(t, ns, "key-shared", false)
}
