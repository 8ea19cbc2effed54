package controller_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// overrideOf is a ConfigMap holding the line's starter config as an
// override, with edit applied to its text.
func overrideOf(t *testing.T, ns, name string, line stackconfig.Line, edit func(string) string) *corev1.ConfigMap {
	t.Helper()
	base, err := runconfig.Base(line, string(v1alpha1.DistributionStarter))
	if err != nil {
		t.Fatal(err)
	}
	text := string(base)
	if edit != nil {
		text = edit(text)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{runconfig.ConfigKey: text}}
}

// serverGeneration is the generation of the stack's server Deployment.
func serverGeneration(t *testing.T, ns, name string) int64 {
	t.Helper()
	dep, err := get(t, &appsv1.Deployment{}, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return dep.Generation
}

// onOverride creates the stack mv in ns, labelled for major, on the
// override ConfigMap cm, and waits until it converged: it returns the
// stack and its server Deployment's generation.
func onOverride(t *testing.T, ns, major, cm string) (*v1alpha1.InferenceStack, int64) {
	t.Helper()
	stack := testutil.Stack("mv", testutil.WithNamespace(ns), testutil.WithOverrideConfig(cm))
	stack.Labels = map[string]string{v1alpha2.LabelOperatorMajor: major}
	create(t, stack)
	return converged(t, ns, "mv"), serverGeneration(t, ns, "mv")
}

// relabel moves the stack mv to major, on the override ConfigMap cm.
func relabel(t *testing.T, ns, major, cm string) {
	t.Helper()
	update(t, ns, "mv", func(s *v1alpha1.InferenceStack) {
		s.Labels[v1alpha2.LabelOperatorMajor] = major
		s.Spec.OverrideConfig.ConfigMapName = cm
	})
}

// lineMove sets a v1alpha1 stack's spec.lineMove through the spec
// annotation (patch, the merge patch onto the v1alpha2 spec) and waits
// until op has finished a reconcile that read it: an annotation changes
// no generation. It waits for the resourceVersion the update answered,
// not one read after it: the operator's status write that follows its
// reconcile would make that newer than anything a reconcile read.
func lineMove(t *testing.T, op *operator, ns, name, patch string) {
	t.Helper()
	stack := edit(t, &v1alpha1.InferenceStack{}, ns, name, func(s *v1alpha1.InferenceStack) {
		s.Annotations = map[string]string{v1alpha2.SpecAnnotation: patch}
	})
	eventually(t, timeout, func() error {
		if ok, err := op.reconciles.Read(client.ObjectKeyFromObject(stack), stack.ResourceVersion); err != nil || !ok {
			return fmt.Errorf("no reconcile of %s/%s at resourceVersion %s has finished yet (%w)", ns, name, stack.ResourceVersion, err)
		}
		return nil
	})
}

// describedGeneration waits until the stack's status describes its
// current generation (a reconcile that saw the last change finished) and
// returns the stack.
func describedGeneration(t *testing.T, ns, name string) *v1alpha1.InferenceStack {
	t.Helper()
	var stack *v1alpha1.InferenceStack
	eventually(t, timeout, func() error {
		var err error
		if stack, err = get(t, &v1alpha1.InferenceStack{}, ns, name); err != nil {
			return err
		}
		if stack.Status.ObservedGeneration != stack.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d", stack.Status.ObservedGeneration, stack.Generation)
		}
		return nil
	})
	return stack
}

// TestLineMoveThatDropsResourcesWaitsForConsent: a stack deployed by the
// 0.2 major, whose run config registers a vector database (0.3 has no
// vector_db resources: upstream renamed them vector_store), is moved to
// the 0.3 major by its label. 0.3 also reads no registry entry 0.2 wrote
// (registry keys v9 -> v10). The move is refused, naming both losses,
// and the old server Deployment keeps its generation and its run config;
// status.stateLine stays 0.2. Once spec.lineMove accepts the loss for
// 0.3 (through v1alpha1's spec annotation), the new line rolls out and
// stateLine still says 0.2.
func TestLineMoveThatDropsResourcesWaitsForConsent(t *testing.T) {
	startOperator(t, onlyMajor(t, "1"))
	to := startOperator(t, onlyMajor(t, "2"), withPin(pin03))
	ns := namespace(t)
	create(t, overrideOf(t, ns, "run-02", stackconfig.Line02, func(s string) string {
		return strings.Replace(s, "vector_dbs: []", "vector_dbs:\n- vector_db_id: docs\n  embedding_model: all-MiniLM-L6-v2\n  embedding_dimension: 384\n  provider_id: faiss", 1)
	}))
	create(t, overrideOf(t, ns, "run-03", stackconfig.Line03, nil))
	before, gen := onOverride(t, ns, "1", "run-02")
	if got := before.Status.StateLine; got != "0.2" {
		t.Fatalf("status.stateLine = %q after the 0.2 major deployed the stack, want 0.2", got)
	}
	cm, err := get(t, &corev1.ConfigMap{}, ns, "mv-run-config")
	if err != nil {
		t.Fatal(err)
	}

	relabel(t, ns, "2", "run-03")
	refused := describedGeneration(t, ns, "mv")
	c := meta.FindStatusCondition(refused.Status.Conditions, v1alpha2.TypeDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha2.ReasonLineMoveLosesResources {
		t.Fatalf("after the move to 0.3, Degraded = %+v, want True with reason %s", c, v1alpha2.ReasonLineMoveLosesResources)
	}
	for _, loss := range []string{"vector_db/docs", "registry/v9"} {
		if !strings.Contains(c.Message, loss) {
			t.Errorf("the refusal does not name %s: %s", loss, c.Message)
		}
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after the refused move, was %d: the old server was changed", got, gen)
	}
	if again, _ := get(t, &corev1.ConfigMap{}, ns, "mv-run-config"); again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("the run-config ConfigMap was rewritten by the refused move")
	}
	if rd := refused.Status.ResolvedDistribution; rd == nil || rd.OperandVersion != testPin.LlamaStackVersion {
		t.Errorf("resolvedDistribution %+v after the refused move, want operand version %s (the old server still runs)", rd, testPin.LlamaStackVersion)
	}

	// Accepting another line's losses does not do.
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.8","acceptLosses":["vector_db/docs","registry/v9"]}}`)
	if c := meta.FindStatusCondition(describedGeneration(t, ns, "mv").Status.Conditions, v1alpha2.TypeDegraded); c == nil || c.Reason != v1alpha2.ReasonLineMoveLosesResources {
		t.Fatalf("acceptance for line 0.8 let the move to 0.3 go on: Degraded %+v", c)
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after a move accepted for another line, was %d", got, gen)
	}

	// Accepting one loss of two does not do either.
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.3","acceptLosses":["vector_db/docs"]}}`)
	c = meta.FindStatusCondition(describedGeneration(t, ns, "mv").Status.Conditions, v1alpha2.TypeDegraded)
	if c == nil || c.Reason != v1alpha2.ReasonLineMoveLosesResources || !strings.Contains(c.Message, "registry/v9") || strings.Contains(c.Message, "vector_db/docs") {
		t.Fatalf("with vector_db/docs accepted, Degraded %+v, want the refusal naming registry/v9 alone", c)
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after a move accepted in part, was %d", got, gen)
	}

	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.3","acceptLosses":["vector_db/docs","registry/v9"]}}`)
	moved := converged(t, ns, "mv")
	if got := serverGeneration(t, ns, "mv"); got == gen {
		t.Errorf("server Deployment generation still %d after the move was accepted", got)
	}
	if got := moved.Status.StateLine; got != "0.2" {
		t.Errorf("status.stateLine = %q after the move to 0.3, want 0.2 (the line the state was written by)", got)
	}
	eventually(t, timeout, func() error {
		s, _ := get(t, &v1alpha1.InferenceStack{}, ns, "mv")
		if rd := s.Status.ResolvedDistribution; rd == nil || rd.OperandVersion != pin03.LlamaStackVersion {
			return fmt.Errorf("resolvedDistribution %+v, want operand version %s", rd, pin03.LlamaStackVersion)
		}
		return nil
	})
}

// pin07 is testPin for the 0.7 line (release 3.0.0's operand: upstream
// publishes a starter image only at v0.7.1).
var pin07 = pin.Pin{OperatorVersion: "3.0.0", LlamaStackVersion: "0.7.1", Operands: map[string]string{
	"starter": "docker.io/llamastack/distribution-starter:0.7.1",
}}

// TestLineMoveThatDropsNothingGoesOn: a stack moved from 0.3 to 0.7 (the
// same registry keys, no resource type dropped) moves at once, and keeps
// its state line.
func TestLineMoveThatDropsNothingGoesOn(t *testing.T) {
	startOperator(t, onlyMajor(t, "2"), withPin(pin03))
	startOperator(t, onlyMajor(t, "3"), withPin(pin07))
	ns := namespace(t)
	create(t, overrideOf(t, ns, "run-03", stackconfig.Line03, nil))
	create(t, overrideOf(t, ns, "run-07", stackconfig.Line07, nil))
	_, gen := onOverride(t, ns, "2", "run-03")
	relabel(t, ns, "3", "run-07")
	moved := converged(t, ns, "mv")
	if got := serverGeneration(t, ns, "mv"); got == gen {
		t.Errorf("server Deployment generation still %d after the move", got)
	}
	if got := moved.Status.StateLine; got != "0.3" {
		t.Errorf("status.stateLine = %q after the move, want 0.3", got)
	}
}

// TestLineMoveTheNewLineCannotExpressIsRefused: a stack moved to the 0.7
// major with a spec 0.7 cannot express (its override is a 0.3 run config)
// is refused by the config step before anything is written: the old
// server Deployment keeps its generation, the run-config ConfigMap its
// content.
func TestLineMoveTheNewLineCannotExpressIsRefused(t *testing.T) {
	startOperator(t, onlyMajor(t, "2"), withPin(pin03))
	startOperator(t, onlyMajor(t, "3"), withPin(pin07))
	ns := namespace(t)
	create(t, overrideOf(t, ns, "run-03", stackconfig.Line03, nil))
	_, gen := onOverride(t, ns, "2", "run-03")
	cm, err := get(t, &corev1.ConfigMap{}, ns, "mv-run-config")
	if err != nil {
		t.Fatal(err)
	}
	update(t, ns, "mv", func(s *v1alpha1.InferenceStack) {
		s.Labels[v1alpha2.LabelOperatorMajor] = "3"
		// A spec change the reconcile must describe (observedGeneration).
		s.Spec.Cache = &v1alpha1.CacheSpec{}
	})
	refused := describedGeneration(t, ns, "mv")
	c := meta.FindStatusCondition(refused.Status.Conditions, v1alpha2.TypeConfigGenerated)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha2.ReasonInvalidConfig {
		t.Fatalf("ConfigGenerated = %+v after moving a 0.3 override to 0.7, want False with reason %s", c, v1alpha2.ReasonInvalidConfig)
	}
	t.Logf("refused: %s", c.Message)
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after the refused move, was %d", got, gen)
	}
	if again, _ := get(t, &corev1.ConfigMap{}, ns, "mv-run-config"); again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("the run-config ConfigMap was rewritten by the refused move")
	}
}

// TestSameLineHandOverChangesNothing: a stack relabelled from one major
// to another that serves the same Llama Stack line is taken over without
// a rollout: once the new major has reconciled it (its release in
// status.resolvedDistribution), the server Deployment keeps its
// generation and the run-config ConfigMap its content, so the server
// keeps answering throughout (docs/moving-between-lines.md).
func TestSameLineHandOverChangesNothing(t *testing.T) {
	// Two majors after 1.x (whose default resources differ, so a
	// hand-over from it rolls out a stack that sets none:
	// server.DefaultResources) on the same line.
	sameLine := pin03
	sameLine.OperatorVersion = "3.0.0"
	startOperator(t, onlyMajor(t, "2"), withPin(pin03))
	startOperator(t, onlyMajor(t, "3"), withPin(sameLine))
	ns := namespace(t)
	stack := testutil.Stack("mv", testutil.WithNamespace(ns))
	stack.Spec.Workload = &v1alpha1.WorkloadSpec{StateVolume: &v1alpha1.StateVolumeSpec{}}
	stack.Labels = map[string]string{v1alpha2.LabelOperatorMajor: "2"}
	create(t, stack)
	converged(t, ns, "mv")
	dep, err := get(t, &appsv1.Deployment{}, ns, "mv")
	if err != nil {
		t.Fatal(err)
	}
	cm, err := get(t, &corev1.ConfigMap{}, ns, "mv-run-config")
	if err != nil {
		t.Fatal(err)
	}
	update(t, ns, "mv", func(s *v1alpha1.InferenceStack) { s.Labels[v1alpha2.LabelOperatorMajor] = "3" })
	eventually(t, timeout, func() error {
		s, _ := get(t, &v1alpha1.InferenceStack{}, ns, "mv")
		if rd := s.Status.ResolvedDistribution; rd == nil || rd.OperatorVersion != sameLine.OperatorVersion {
			return fmt.Errorf("resolvedDistribution %+v: the 3.x major has not reconciled the stack yet", rd)
		}
		return nil
	})
	again, _ := get(t, &appsv1.Deployment{}, ns, "mv")
	if again.Generation != dep.Generation {
		t.Errorf("server Deployment generation %d after the hand-over, was %d: the server was rolled out; template %s",
			again.Generation, dep.Generation, cmp.Diff(dep.Spec.Template, again.Spec.Template))
	}
	if cmAgain, _ := get(t, &corev1.ConfigMap{}, ns, "mv-run-config"); cmAgain.ResourceVersion != cm.ResourceVersion {
		t.Errorf("the run-config ConfigMap was rewritten by the hand-over")
	}
}

// TestMovedStackReadsTheOldLinesState: a generated stack the 0.3 major
// deployed and the 0.7 major took over gets the run config 0.7 renders
// for state written by 0.3 (Operand.StateLine: 0.3's table names), not a
// new stack's (0.7's starter names, under which 0.7.1 would see no
// history): status.config names exactly Generate's config with StateLine
// 0.3, which differs from the one without it.
func TestMovedStackReadsTheOldLinesState(t *testing.T) {
	startOperator(t, onlyMajor(t, "2"), withPin(pin03))
	startOperator(t, onlyMajor(t, "3"), withPin(pin07))
	ns := namespace(t)
	stack := testutil.Stack("mv", testutil.WithNamespace(ns))
	stack.Spec.Workload = &v1alpha1.WorkloadSpec{StateVolume: &v1alpha1.StateVolumeSpec{}}
	stack.Labels = map[string]string{v1alpha2.LabelOperatorMajor: "2"}
	create(t, stack)
	converged(t, ns, "mv")
	update(t, ns, "mv", func(s *v1alpha1.InferenceStack) { s.Labels[v1alpha2.LabelOperatorMajor] = "3" })
	var moved *v1alpha1.InferenceStack
	eventually(t, timeout, func() error {
		moved, _ = get(t, &v1alpha1.InferenceStack{}, ns, "mv")
		if rd := moved.Status.ResolvedDistribution; rd == nil || rd.OperandVersion != pin07.LlamaStackVersion {
			return fmt.Errorf("resolvedDistribution %+v, want operand version %s", rd, pin07.LlamaStackVersion)
		}
		return nil
	})
	if got := moved.Status.StateLine; got != "0.3" {
		t.Errorf("status.stateLine = %q after the move, want 0.3", got)
	}
	hub := testutil.Hub(moved)
	oldState, err := runconfig.Generate("mv", hub.Spec, runconfig.Operand{LlamaStackVersion: pin07.LlamaStackVersion, StateLine: stackconfig.Line03})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := runconfig.Generate("mv", hub.Spec, runconfig.Operand{LlamaStackVersion: pin07.LlamaStackVersion})
	if err != nil {
		t.Fatal(err)
	}
	if oldState.Hash == fresh.Hash {
		t.Fatalf("0.7's run config for 0.3's state is the same as a new stack's (%.12s): this test cannot tell them apart", fresh.Hash)
	}
	if got := moved.Status.Config; got == nil || got.Hash != oldState.Hash {
		t.Errorf("status.config %+v, want hash %.12s (0.7 reading 0.3's state; a new stack's is %.12s)", got, oldState.Hash, fresh.Hash)
	}
}

// pin08 is testPin for the 0.8 line (release 4.0.0's operand: OGX's
// starter image).
var pin08 = pin.Pin{OperatorVersion: "4.0.0", LlamaStackVersion: "0.8.0", Operands: map[string]string{
	"starter": "docker.io/ogx/distribution-starter:0.8.0",
}}

// TestMoveToOGXNamesTheDroppedDatasets: a stack whose 0.7 run config
// registers a dataset, moved to the 0.8 major (OGX has no datasets), is
// refused naming dataset/evals, the old Deployment untouched, until
// spec.lineMove accepts it for 0.8.
func TestMoveToOGXNamesTheDroppedDatasets(t *testing.T) {
	startOperator(t, onlyMajor(t, "3"), withPin(pin07))
	to := startOperator(t, onlyMajor(t, "4"), withPin(pin08))
	ns := namespace(t)
	create(t, overrideOf(t, ns, "run-07", stackconfig.Line07, func(s string) string {
		return strings.Replace(s, "  datasets: []", "  datasets:\n  - dataset_id: evals\n    purpose: eval/messages-answer\n    source: {type: uri, uri: 'huggingface://datasets/llamastack/simpleqa'}", 1)
	}))
	create(t, overrideOf(t, ns, "run-08", stackconfig.Line08, nil))
	_, gen := onOverride(t, ns, "3", "run-07")
	relabel(t, ns, "4", "run-08")
	c := meta.FindStatusCondition(describedGeneration(t, ns, "mv").Status.Conditions, v1alpha2.TypeDegraded)
	if c == nil || c.Reason != v1alpha2.ReasonLineMoveLosesResources || !strings.Contains(c.Message, "dataset/evals") || strings.Contains(c.Message, "registry/") {
		t.Fatalf("after the move to 0.8, Degraded = %+v, want reason %s naming dataset/evals alone", c, v1alpha2.ReasonLineMoveLosesResources)
	}
	t.Logf("refused: %s", c.Message)
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after the refused move, was %d", got, gen)
	}
	// Accepting the configured dataset alone leaves what clients may have
	// registered through the API: still refused, still untouched.
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.8","acceptLosses":["dataset/evals"]}}`)
	c = meta.FindStatusCondition(describedGeneration(t, ns, "mv").Status.Conditions, v1alpha2.TypeDegraded)
	if c == nil || c.Reason != v1alpha2.ReasonLineMoveLosesResources || !strings.Contains(c.Message, `"dataset/*"`) || strings.Contains(c.Message, `"dataset/evals"`) {
		t.Fatalf("with dataset/evals accepted, Degraded = %+v, want reason %s naming dataset/* (what the API registered) and not dataset/evals", c, v1alpha2.ReasonLineMoveLosesResources)
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after a partly accepted move, was %d", got, gen)
	}
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.8","acceptLosses":["dataset/evals","dataset/*","scoring_function/*","benchmark/*"]}}`)
	moved := converged(t, ns, "mv")
	if got := serverGeneration(t, ns, "mv"); got == gen {
		t.Errorf("server Deployment generation still %d after the move was accepted", got)
	}
	if got := moved.Status.StateLine; got != "0.7" {
		t.Errorf("status.stateLine = %q after the move to 0.8, want 0.7", got)
	}
}
