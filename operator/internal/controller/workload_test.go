package controller_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestWorkersAndPodOverridesReachTheServer: a stack with v1alpha2's
// workload.workers and workload.podOverrides (carried by the v1alpha1
// object the operator reads in the spec annotation) gets a server
// Deployment that runs uvicorn with that many workers, requests sized for
// them (and a memory request its memory autoscaler needs), the override
// volumes, mounts, args and grace period; reconciled again it writes
// nothing; a change of workers rolls the server out; an override the CRD
// of v1alpha2 would refuse (a hostPath volume) makes the stack Degraded,
// naming the field, and leaves the Deployment as it was.
func TestWorkersAndPodOverridesReachTheServer(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	overrides := v1alpha2.PodOverrides{
		Volumes: []corev1.Volume{{Name: "prompts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "prompts"}}}}},
		VolumeMounts:                  []corev1.VolumeMount{{Name: "prompts", MountPath: "/opt/prompts", ReadOnly: true}},
		Args:                          []string{"--timeout-keep-alive", "30"},
		TerminationGracePeriodSeconds: ptr.To[int64](45),
	}
	stack := testutil.Stack("w", testutil.WithNamespace(ns), testutil.WithWorkers(3), testutil.WithPodOverrides(overrides),
		testutil.WithCache(), testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
		testutil.WithAutoscaling(1, 3, 70),
		testutil.WithResources(corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}))
	stack.Annotations[v1alpha2.MetricsAnnotation] = `[{"resource":"cpu","averageUtilization":70},{"resource":"memory","averageUtilization":80}]`
	create(t, stack)
	converged(t, ns, "w")

	var dep *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		if dep, err = get(t, &appsv1.Deployment{}, ns, "w"); err != nil {
			return err
		}
		pod := dep.Spec.Template.Spec
		c := pod.Containers[0]
		switch {
		case len(c.Command) < 2 || c.Command[0] != "uvicorn" || !slices.Contains(c.Command, "--workers") ||
			c.Command[slices.Index(c.Command, "--workers")+1] != "3":
			return fmt.Errorf("command %q, want uvicorn with 3 workers", c.Command)
		case !slices.Contains(c.Env, corev1.EnvVar{Name: "LLAMA_STACK_CONFIG", Value: server.ConfigPath}):
			return fmt.Errorf("env %v lacks LLAMA_STACK_CONFIG=%s", c.Env, server.ConfigPath)
		case !slices.Equal(c.Args, overrides.Args):
			return fmt.Errorf("args %q, want %q", c.Args, overrides.Args)
		case pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 45:
			return fmt.Errorf("terminationGracePeriodSeconds %v, want 45", pod.TerminationGracePeriodSeconds)
		case !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "prompts" && v.ConfigMap != nil }):
			return fmt.Errorf("volumes %v lack prompts", pod.Volumes)
		case !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "prompts" && m.MountPath == "/opt/prompts" && m.ReadOnly
		}):
			return fmt.Errorf("mounts %v lack %v", c.VolumeMounts, overrides.VolumeMounts[0])
		}
		// The user's CPU limit stands for the CPU request (Kubernetes
		// defaults it); the memory the workers need is requested.
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			return fmt.Errorf("a CPU request %v beside the user's CPU limit", c.Resources.Requests)
		}
		major, _ := testPin.Major()
		one := server.DefaultResources(major).Requests[corev1.ResourceMemory]
		if m := c.Resources.Requests[corev1.ResourceMemory]; m.Value() != 3*one.Value() {
			return fmt.Errorf("memory request %v, want 3 times one process's %v (3 workers)", m.String(), one.String())
		}
		return nil
	})
	// (The pods get a CPU request equal to the limit: Kubernetes defaults
	// a pod's missing request to its limit, so the autoscaler has a request
	// for both of its metrics. The node test sees a pod.)

	// Steady: nothing to write.
	for round := 1; ; round++ {
		op.writes.Reset()
		op.reconcileAll(t, ns, []string{"w"}, fmt.Sprintf("settle-%d", round))
		if len(op.writes.In(ns)) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("%d rounds of reconciles still write:\n%s", round, strings.Join(op.writes.In(ns), "\n"))
		}
	}
	op.writes.Reset()
	op.reconcileAll(t, ns, []string{"w"}, "steady")
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("reconciling an unchanged stack with workers and overrides wrote %d times:\n%s", len(w), strings.Join(w, "\n"))
	}

	// Fewer workers: a rollout with the new command.
	update(t, ns, "w", func(s *v1alpha1.InferenceStack) { testutil.WithWorkers(2)(s) })
	eventually(t, timeout, func() error {
		d, err := get(t, &appsv1.Deployment{}, ns, "w")
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if d.Generation == dep.Generation || c.Command[slices.Index(c.Command, "--workers")+1] != "2" {
			return fmt.Errorf("generation %d (was %d), command %q: no rollout to 2 workers", d.Generation, dep.Generation, c.Command)
		}
		dep = d
		return nil
	})

	// A hostPath volume through the annotation (no API server rule reads it):
	// refused by the v1alpha2 CRD's rule, which the operator runs.
	update(t, ns, "w", func(s *v1alpha1.InferenceStack) {
		o := overrides
		o.Volumes = append(slices.Clone(o.Volumes), corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		testutil.WithPodOverrides(o)(s)
	})
	eventually(t, timeout, func() error {
		c, _ := degradedOf(t, ns, "w")
		// The v1alpha2 CRD's own rule, at its field path.
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha2.ReasonInvalidSpec ||
			!strings.Contains(c.Message, "spec.workload.podOverrides.volumes: Invalid value") || !strings.Contains(c.Message, "restricted pod security") {
			return fmt.Errorf("Degraded %+v, want True (InvalidSpec) naming spec.workload.podOverrides.volumes", c)
		}
		return nil
	})
	if d, _ := get(t, &appsv1.Deployment{}, ns, "w"); d.Generation != dep.Generation {
		t.Errorf("the refused override changed the Deployment (generation %d -> %d)", dep.Generation, d.Generation)
	}
}
