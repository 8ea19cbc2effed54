package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// pullError is what a kubelet (v1.35, containerd) writes when the registry
// has no such image.
const pullError = `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/llamastack/distribution-starter:0.2.23": ` +
	`failed to resolve reference "docker.io/llamastack/distribution-starter:0.2.23": ` +
	`docker.io/llamastack/distribution-starter:0.2.23: not found`

// TestImagePullFailureDegradesTheStack: a server pod whose container waits
// in ErrImagePull (its status written here as the kubelet writes it: no
// kubelet runs) makes the stack Degraded with reason ImagePullFailed,
// naming the pod, the image and the kubelet's error; the kubelet's
// ImagePullBackOff with the same error changes nothing (no status write);
// a pod of another image is not read, nor one without the managed-by label,
// which the operator's cache does not hold; the
// condition clears when the container runs.
func TestImagePullFailureDegradesTheStack(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	create(t, testutil.Stack("pull", testutil.WithNamespace(ns)))
	converged(t, ns, "pull")
	var dep *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		dep, err = get(t, &appsv1.Deployment{}, ns, "pull")
		return err
	})
	// The status reads the pods of the Deployment in the operator's cache:
	// until the cache holds it, a pod's failure goes unseen, and the
	// Deployment's arrival (the operator's own object) brings no reconcile.
	op.cached(t, dep)
	image := dep.Spec.Template.Spec.Containers[0].Image

	// pod makes a pod of the server Deployment's labels (less the ones
	// drop names) running img, with its container waiting for reason.
	pod := func(name, img, reason, message string, drop ...string) *corev1.Pod {
		t.Helper()
		labels := map[string]string{}
		for k, v := range dep.Spec.Template.Labels {
			labels[k] = v
		}
		for _, k := range drop {
			delete(labels, k)
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: img}}},
		}
		create(t, p)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", Image: img,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
		if err := env.Client.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	degraded := func() (*metav1.Condition, *v1alpha1.InferenceStack) { return degradedOf(t, ns, "pull") }

	// Neither a pod of an image the Deployment no longer runs nor a pod
	// outside the operator's cache (no managed-by label) degrades the stack:
	// a reconcile after the cache holds the first (the second it never
	// holds, as the cache below shows) leaves it as it was.
	old := pod("old", "docker.io/llamastack/distribution-starter:0.1.0", "ErrImagePull", "not found")
	pod("foreign", image, "ErrImagePull", pullError, components.LabelManagedBy)
	op.cached(t, old)
	op.reconcileAll(t, ns, []string{"pull"}, "ignored")
	if c, _ := degraded(); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Degraded %+v with only a pod of an old image and an unmanaged pod failing, want False", c)
	}

	// The operator's cache (CacheOptions) holds the managed pods only.
	opts := controller.CacheOptions(nil)
	opts.Scheme = scheme()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached := &corev1.PodList{}
	if err := c.List(ctx, cached, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if names := podNames(cached); !slices.Equal(names, []string{"old"}) {
		t.Errorf("the operator's cache holds pods %v, want only the managed one, [old]", names)
	}

	failing := pod("pull-abc", image, "ErrImagePull", pullError)
	want := fmt.Sprintf("pod pull-abc cannot pull image %s: %s", image, pullError)
	waitDegraded(t, ns, "pull", v1alpha2.ReasonImagePullFailed, want)

	// The kubelet backs off: same error, another reason and wording.
	op.writes.Reset()
	failing.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
		Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, pullError)}
	if err := env.Client.Status().Update(context.Background(), failing); err != nil {
		t.Fatal(err)
	}
	// The pod's update reaches the operator's cache on a watch of its own:
	// once the cache holds it, a reconcile reads it.
	op.cached(t, failing)
	op.reconcileAll(t, ns, []string{"pull"}, "backoff")
	if c, _ := degraded(); c.Message != want {
		t.Errorf("after ImagePullBackOff: Degraded %+v, want it unchanged", c)
	}
	// (Other tests' stacks, in other namespaces, may be reconciled by this
	// operator too.)
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("the kubelet's back-off made the operator write:\n%s", strings.Join(w, "\n"))
	}

	// The image arrives: the container runs.
	failing.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	failing.Status.ContainerStatuses[0].Ready = false
	failing.Status.ContainerStatuses[0].Started = ptr.To(true)
	if err := env.Client.Status().Update(context.Background(), failing); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if c, _ := degraded(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha2.ReasonAsExpected {
			return fmt.Errorf("Degraded %+v after the container started, want False/%s", c, v1alpha2.ReasonAsExpected)
		}
		return nil
	})
}

// degradedOf returns stack name's Degraded condition and the stack.
func degradedOf(t *testing.T, ns, name string) (*metav1.Condition, *v1alpha1.InferenceStack) {
	t.Helper()
	stack, err := get(t, &v1alpha1.InferenceStack{}, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeDegraded), stack
}

// waitDegraded waits until stack name is Degraded (condition and phase)
// for reason, with message.
func waitDegraded(t *testing.T, ns, name, reason, message string) {
	t.Helper()
	eventually(t, timeout, func() error {
		c, stack := degradedOf(t, ns, name)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.Message != message {
			return fmt.Errorf("Degraded %+v, want True/%s %q", c, reason, message)
		}
		if stack.Status.Phase != v1alpha2.PhaseDegraded {
			return fmt.Errorf("phase %s, want Degraded", stack.Status.Phase)
		}
		return nil
	})
}

func podNames(list *corev1.PodList) []string {
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// TestCrashLoopDegradesTheStack: a server container that exits with an
// error and that the kubelet restarts (its statuses written here as a
// kubelet writes them: no kubelet runs) makes the stack Degraded with
// reason CrashLooping, naming the container, the pod and the exit code;
// the turns of the loop (running not ready, terminated, CrashLoopBackOff
// with a longer back-off) change nothing and write nothing; the condition
// clears once the container is ready.
func TestCrashLoopDegradesTheStack(t *testing.T) {
	op := startOperator(t)
	ns := namespace(t)
	create(t, testutil.Stack("crash", testutil.WithNamespace(ns)))
	converged(t, ns, "crash")
	var dep *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		dep, err = get(t, &appsv1.Deployment{}, ns, "crash")
		return err
	})
	// The status reads the pods of the Deployment in the operator's cache:
	// until the cache holds it, a pod's failure goes unseen, and the
	// Deployment's arrival (the operator's own object) brings no reconcile.
	op.cached(t, dep)
	image := dep.Spec.Template.Spec.Containers[0].Image
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash-abc", Labels: dep.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: image}}},
	}
	create(t, pod)
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error",
			StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
	}
	backOff := func(d string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=server pod=crash-abc_%s(%s)", d, ns, pod.UID)}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	status := func(state corev1.ContainerState, restarts int32, ready bool) {
		t.Helper()
		// A kubelet names the image of a container that ran by the
		// runtime's ID, not as the pod's spec does.
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", Image: "sha256:38bbfc15c81645f6e731afbc23b717caeaae5ece38019004347805374c500f96", State: state,
			LastTerminationState: exited(1), RestartCount: restarts, Ready: ready, Started: ptr.To(state.Running != nil)}}
		if err := env.Client.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	degraded := func() (*metav1.Condition, *v1alpha1.InferenceStack) { return degradedOf(t, ns, "crash") }

	status(backOff("10s"), 1, false)
	want := fmt.Sprintf("container server of pod crash-abc exits with code 1 and the kubelet keeps restarting it; "+
		"`kubectl logs -n %s crash-abc -c server --previous` shows why", ns)
	waitDegraded(t, ns, "crash", v1alpha2.ReasonCrashLooping, want)

	// The loop turns: the container runs (not ready), exits again, waits
	// longer. Each turn is read by a reconcile that began once the
	// operator's cache held it.
	op.writes.Reset()
	for i, turn := range []struct {
		state    corev1.ContainerState
		restarts int32
	}{{running, 2}, {exited(1), 2}, {backOff("20s"), 2}, {running, 3}} {
		status(turn.state, turn.restarts, false)
		op.cached(t, pod)
		op.reconcileAll(t, ns, []string{"crash"}, fmt.Sprintf("turn-%d", i))
		if c, _ := degraded(); c.Reason != v1alpha2.ReasonCrashLooping || c.Message != want {
			t.Errorf("after turn %d of the loop: Degraded %+v, want it unchanged", i, c)
		}
	}
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("the turns of the crash loop made the operator write:\n%s", strings.Join(w, "\n"))
	}

	// The container stays up and passes its readiness probe.
	status(running, 3, true)
	eventually(t, timeout, func() error {
		if c, _ := degraded(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha2.ReasonAsExpected {
			return fmt.Errorf("Degraded %+v after the container became ready, want False/%s", c, v1alpha2.ReasonAsExpected)
		}
		return nil
	})
}
