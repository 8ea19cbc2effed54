//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/inferencestack/inferencestack/internal/image"
)

// restrictedPod is a pod of image running args that the restricted Pod
// Security Standard admits: non-root, RuntimeDefault seccomp, no privilege
// escalation, no capabilities, a read-only root filesystem.
func restrictedPod(namespace, name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  name,
				Image: image,
				Args:  args,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// TestRestrictedPodServesThroughAService: in a namespace enforcing the
// restricted Pod Security Standard, a pod of an image built by the test is
// scheduled, pulled by containerd from the registry under its published
// name, started by runc, passes its HTTP readiness probe, and a second pod
// reaches it through a Service (kube-proxy's rules).
func TestRestrictedPodServesThroughAService(t *testing.T) {
	ctx := context.Background()
	const ns = "node-e2e"
	restrictedNamespace(t, ns)

	start := time.Now()
	ref, err := node.PushGoImage(ctx, "./test/node/httpserver", image.BinaryOptions{}, "registry.test/inferencestack/httpserver:e2e")
	require.NoError(t, err)
	t.Logf("image %s built and pushed in %s", ref, time.Since(start).Round(100*time.Millisecond))

	// The namespace enforces the standard: a pod that may run as root is refused.
	rootPod := restrictedPod(ns, "root", ref)
	rootPod.Spec.SecurityContext.RunAsNonRoot = nil
	err = node.Env.Client.Create(ctx, rootPod)
	require.True(t, apierrors.IsForbidden(err), "a pod without runAsNonRoot was not refused: %v", err)
	require.ErrorContains(t, err, `violates PodSecurity "restricted:latest"`)

	web := restrictedPod(ns, "web", ref, "-listen=:8080")
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	start = time.Now()
	require.NoError(t, node.Env.Client.Create(ctx, web))
	got := waitPod(t, ns, "web", 2*time.Minute, podReady)
	t.Logf("pod %s/web Ready on %s (IP %s) in %s", ns, got.Spec.NodeName, got.Status.PodIP, time.Since(start).Round(100*time.Millisecond))

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	require.NoError(t, node.Env.Client.Create(ctx, svc))
	start = time.Now()
	client := restrictedPod(ns, "client", ref, fmt.Sprintf("-get=http://%s/", svc.Spec.ClusterIP))
	client.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	require.NoError(t, node.Env.Client.Create(ctx, client))
	waitPod(t, ns, "client", 2*time.Minute, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs := node.PodLogs(ns, "client")["client"]
	require.True(t, strings.Contains(logs, "200 OK") && strings.Contains(logs, "web"),
		"the client pod's log does not show web's answer through the Service: %q", logs)
	t.Logf("pod %s/client reached web through Service %s in %s: %s", ns, svc.Spec.ClusterIP, time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(logs))
}
