package controller_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestStatusEventsAreNotRepeated: the same status change written twice
// (a reconcile that read a stale copy of the stack writes it again) records
// one Event; a change back and forth records each change.
func TestStatusEventsAreNotRepeated(t *testing.T) {
	record := &eventRecord{}
	r := &controller.InferenceStackReconciler{Recorder: &recordingRecorder{EventRecorder: &events.FakeRecorder{}, record: record}}
	stack := func(phase v1alpha2.Phase, degraded string) *v1alpha2.InferenceStack {
		s := testutil.Hub(testutil.Stack("ev", testutil.WithNamespace("ns")))
		s.UID = "uid-ev"
		s.Status.Phase = phase
		status := metav1.ConditionFalse
		if degraded != "" {
			status = metav1.ConditionTrue
		}
		s.Status.Conditions = []metav1.Condition{{Type: v1alpha2.TypeDegraded, Status: status, Reason: degraded}}
		return s
	}
	missing := stack(v1alpha2.PhaseDegraded, v1alpha2.ReasonSecretNotFound)
	deploying := stack(v1alpha2.PhaseDeploying, "")
	ready := stack(v1alpha2.PhaseReady, "")
	for _, step := range [][2]*v1alpha2.InferenceStack{
		{deploying, missing}, {deploying, missing}, // written twice
		{missing, deploying}, {missing, deploying}, // written twice
		{deploying, ready}, {ready, deploying}, {deploying, ready},
	} {
		controller.StatusEvents(r, step[0], step[1])
	}
	want := []string{v1alpha2.ReasonSecretNotFound, "PhaseDeploying", "PhaseReady", "PhaseDeploying", "PhaseReady"}
	if got := record.of("ns", "ev"); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
