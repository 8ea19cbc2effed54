package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	cachecomp "github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/server"
)

// rbac: the status reads the stacks' pods (its cache holds only those labelled managed-by it) for image pull errors and crash loops
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// pullFailureReasons are the waiting reasons the kubelet gives a container
// whose image it cannot pull (k8s.io/kubernetes pkg/kubelet/images and
// k8s.io/cri-api pkg/errors).
var pullFailureReasons = []string{
	"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"RegistryUnavailable", "SignatureValidationFailed",
}

// podFailure describes the first container of the stack's pods (the
// server's, then the cache's) that cannot run: the kubelet cannot pull its
// image (reason ImagePullFailed), or it keeps exiting and the kubelet keeps
// restarting it (reason CrashLooping). It returns "" when none fails. Only
// pods of the Deployments' current pod templates count: an image the spec
// no longer names does not keep the stack degraded while the rollout
// replaces its pods.
func (r *InferenceStackReconciler) podFailure(ctx context.Context, stack *v1alpha2.InferenceStack) (reason, message string, err error) {
	names := []string{server.Name(stack)}
	if cachecomp.Enabled(stack) {
		names = append(names, cachecomp.Name(stack))
	}
	for _, name := range names {
		dep := &appsv1.Deployment{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, dep); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return "", "", err
			}
			continue
		}
		if dep.Spec.Selector == nil || len(dep.Spec.Selector.MatchLabels) == 0 {
			continue
		}
		pods := &corev1.PodList{}
		if err := r.Client.List(ctx, pods, client.InNamespace(stack.Namespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
			return "", "", err
		}
		slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		var images []string
		for _, c := range slices.Concat(dep.Spec.Template.Spec.InitContainers, dep.Spec.Template.Spec.Containers) {
			images = append(images, c.Image)
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !pod.DeletionTimestamp.IsZero() {
				continue
			}
			if reason, image, msg, ok := containerFailure(pod); ok && slices.Contains(images, image) {
				return reason, msg, nil
			}
		}
	}
	return "", "", nil
}

// containerFailure returns the reason, image (as the pod's spec names it)
// and message of the first container of pod that cannot run, as podFailure
// describes it.
func containerFailure(pod *corev1.Pod) (reason, image, message string, ok bool) {
	if c, msg, ok := pullFailure(pod); ok {
		image := specImage(pod, c)
		return v1alpha2.ReasonImagePullFailed, image, fmt.Sprintf("pod %s cannot pull image %s: %s", pod.Name, image, msg), true
	}
	if c, ok := crashLoop(pod); ok {
		image := specImage(pod, c)
		last := c.LastTerminationState.Terminated
		msg := fmt.Sprintf("container %s of pod %s exits with code %d", c.Name, pod.Name, last.ExitCode)
		if last.Reason != "" && last.Reason != "Error" {
			msg += " (" + last.Reason + ")"
		}
		if m := strings.TrimSpace(last.Message); m != "" {
			msg += ": " + m
		}
		msg += fmt.Sprintf(" and the kubelet keeps restarting it; `kubectl logs -n %s %s -c %s --previous` shows why", pod.Namespace, pod.Name, c.Name)
		return v1alpha2.ReasonCrashLooping, image, msg, true
	}
	return "", "", "", false
}

// specImage is the image of container c as the pod's spec names it, which
// is how the Deployment names it: the status of a container that ran names
// its image by the runtime's ID (containerd: sha256:<config digest>).
func specImage(pod *corev1.Pod, c corev1.ContainerStatus) string {
	for _, sc := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if sc.Name == c.Name {
			return sc.Image
		}
	}
	return c.Image
}

// crashLoop returns the first container of pod that the kubelet restarts
// because it exited with an error, and that has not been ready since. Such
// a container goes round waiting in CrashLoopBackOff, running (not ready)
// and terminated; it counts in all three, so the status does not change
// with each turn. The last termination's exit code and reason are what
// the message says (its restart count would change it every turn).
func crashLoop(pod *corev1.Pod) (corev1.ContainerStatus, bool) {
	for _, c := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		last := c.LastTerminationState.Terminated
		if c.Ready || c.RestartCount == 0 || last == nil || last.ExitCode == 0 {
			continue
		}
		if t := c.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		return c, true
	}
	return corev1.ContainerStatus{}, false
}

// pullFailure returns the status and the kubelet's message of the first
// container of pod that waits for an image the kubelet cannot pull. The
// message is the pull error itself: the kubelet alternates ErrImagePull
// ("<error>") with ImagePullBackOff ("Back-off pulling image \"<image>\":
// ErrImagePull: <error>"), and the status should not change with it.
func pullFailure(pod *corev1.Pod) (corev1.ContainerStatus, string, bool) {
	for _, c := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		w := c.State.Waiting
		if w == nil || !slices.Contains(pullFailureReasons, w.Reason) {
			continue
		}
		msg := w.Message
		if rest, found := strings.CutPrefix(msg, fmt.Sprintf("Back-off pulling image %q: ", c.Image)); found {
			msg = rest
			for _, reason := range pullFailureReasons {
				msg = strings.TrimPrefix(msg, reason+": ")
			}
		}
		if msg == "" {
			msg = w.Reason
		}
		return c, msg, true
	}
	return corev1.ContainerStatus{}, "", false
}

// podFailurePredicate passes the pod events that can change a stack's pod
// failure (podFailure): a pod created or deleted with one, or an update that
// changes it. The kubelet's other status updates (and there are many) do
// not reach the reconciler; the Deployment's status carries readiness.
func podFailurePredicate() predicate.Predicate {
	failure := func(obj client.Object) string {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return ""
		}
		reason, image, msg, _ := containerFailure(pod)
		return reason + "\x00" + image + "\x00" + msg
	}
	none := failure(&corev1.Pod{})
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return failure(e.Object) != none },
		DeleteFunc: func(e event.DeleteEvent) bool { return failure(e.Object) != none },
		UpdateFunc: func(e event.UpdateEvent) bool { return failure(e.ObjectOld) != failure(e.ObjectNew) },
	}
}
