//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	testnode "github.com/inferencestack/inferencestack/test/node"
	"github.com/inferencestack/inferencestack/test/olm"
	"github.com/inferencestack/inferencestack/test/registry"
	"github.com/inferencestack/inferencestack/test/testenv"
)

var (
	// node is the running node; node.Env is the control plane.
	node *testnode.Node
	// cluster is OLM v1 on the same control plane.
	cluster *olm.Cluster
	// root is the repository root.
	root string
	// kube is a cluster-admin client that knows InferenceStacks.
	kube client.Client
)

func TestMain(m *testing.M) {
	testenv.Main(m, func() (_ func() error, err error) {
		if root, err = filepath.Abs(filepath.Join("..", "..", "..")); err != nil {
			return nil, err
		}
		ctx := context.Background()
		registry := registry.Start()
		start := time.Now()
		n, err := testnode.New(ctx, testnode.Options{Registry: registry})
		if err != nil {
			registry.Close()
			return nil, err
		}
		c, err := olm.Start(ctx, olm.Options{Registry: registry.Host(), ControlPlane: n.ControlPlane(testenv.Options{})})
		if err == nil {
			err = n.Join(ctx, c.Env)
		}
		// The node leaves, the control plane stops, then the node.
		stop := func() error {
			defer registry.Close()
			n.Leave()
			var errs []error
			if c != nil {
				errs = append(errs, c.Stop())
			}
			return errors.Join(append(errs, n.Stop())...)
		}
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		fmt.Fprintf(os.Stderr, "test/node/e2e: control plane, OLM v1 and node %s ready in %s\n", testnode.Name, time.Since(start).Round(100*time.Millisecond))
		node, cluster = n, c
		scheme := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, errors.Join(err, stop())
		}
		if err := v1alpha1.AddToScheme(scheme); err != nil {
			return nil, errors.Join(err, stop())
		}
		if kube, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, errors.Join(err, stop())
		}
		return stop, nil
	})
}

// dumpLogsOnFailure prints the node's and OLM's logs when the test fails.
func dumpLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range []string{"kubelet", "containerd", "kube-proxy", "kube-scheduler"} {
			t.Logf("---- %s log ----\n%s", name, testenv.LastLines(node.Logs(name), 40))
		}
		for _, name := range []string{"catalogd", "operator-controller"} {
			t.Logf("---- %s log ----\n%s", name, testenv.LastLines(cluster.Logs(name), 40))
		}
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
		var logs strings.Builder
		for c, log := range node.PodLogs(namespace, name) {
			fmt.Fprintf(&logs, "---- %s log ----\n%s\n", c, testenv.LastLines(log, 20))
		}
		t.Fatalf("pod %s/%s: %v\nphase %s, conditions %+v, container statuses %+v\nevents:\n%s\n%skubelet:\n%s",
			namespace, name, err, pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses,
			events(t, namespace, name), logs.String(), testenv.LastLines(node.Logs("kubelet"), 30))
	}
	return pod
}

// events lists the events about the object namespace/name (every object of
// the namespace when name is empty), one a line.
func events(t *testing.T, namespace, name string) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := node.Env.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		if name == "" || e.InvolvedObject.Name == name {
			fmt.Fprintf(&b, "  %s %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
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

// enforceRestricted is the label by which a namespace enforces the
// restricted Pod Security Standard.
var enforceRestricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}

// restrictedNamespace creates a namespace enforcing the restricted Pod
// Security Standard, deleted when the test ends.
func restrictedNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: enforceRestricted}}
	if err := node.Env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := node.Env.Client.Delete(ctx, ns); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
}
