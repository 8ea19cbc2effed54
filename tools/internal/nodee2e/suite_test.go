//go:build e2e

package nodee2e_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/testenv"
	"github.com/inferencestack/inferencestack/tools/internal/image/imagetest"
	"github.com/inferencestack/inferencestack/tools/internal/nodetest"
)

// node is the running node with its control plane.
var node *nodetest.Node

func TestMain(m *testing.M) {
	testenv.Main(m, func() (func() error, error) {
		registry := imagetest.Start()
		start := time.Now()
		n, err := nodetest.Start(context.Background(), nodetest.Options{Registry: registry})
		if err != nil {
			registry.Close()
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "nodee2e: control plane and node %s ready in %s\n", nodetest.Name, time.Since(start).Round(100*time.Millisecond))
		node = n
		return func() error {
			defer registry.Close()
			return n.Stop()
		}, nil
	})
}

// waitPod polls the pod namespace/name until done accepts it, or fails after
// timeout with its status, its events and the kubelet's last log lines.
func waitPod(t *testing.T, namespace, name string, timeout time.Duration, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := node.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return done(pod), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v\nphase %s, conditions %+v, container statuses %+v\nevents:\n%s\nkubelet:\n%s",
			namespace, name, err, pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses,
			events(t, namespace, name), testenv.LastLines(node.Logs("kubelet"), 30))
	}
	return pod
}

// events lists the events about the object namespace/name, one a line.
func events(t *testing.T, namespace, name string) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := node.Env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			fmt.Fprintf(&b, "  %s %s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restrictedNamespace creates a namespace enforcing the restricted Pod
// Security Standard, deleted when the test ends.
func restrictedNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := node.Env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := node.Env.Client.Delete(ctx, ns); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
}
