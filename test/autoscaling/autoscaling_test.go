// Package autoscaling_test shows that the server pods the operator makes can
// be scaled by Kubernetes' own HorizontalPodAutoscaler controller on CPU and
// on memory: the operator binary reconciles stacks on a real control plane
// whose kube-controller-manager runs the deployment, replicaset and
// horizontalpodautoscaling controllers, and the HPA controller reads pod
// metrics through the API server's aggregation layer from a metrics API
// stand-in served by the test (these machines cannot pull metrics-server).
// No kubelet runs the pods: the test marks the ReplicaSets' pods Running
// and Ready, as a kubelet would, long enough ago that the HPA counts them.
package autoscaling_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "operator", "config", "crd", "bases")},
		Scheme:            local.Scheme(),
		Controllers:       []string{"deployment", "replicaset", "horizontalpodautoscaling"},
		APIServerArgs: map[string][]string{
			// The aggregator dials the metrics stand-in at its endpoint's
			// address: no kube-proxy gives Services their cluster IPs here.
			"enable-aggregator-routing": {"true"},
			"service-cluster-ip-range":  {"10.0.0.0/16"},
		},
	}, &env)
}

const timeout = 3 * time.Minute

// usage is the CPU and memory the stand-in reports for the server container
// of each pod of a stack.
type usage struct{ cpu, memory resource.Quantity }

// TestHPAScalesTheServerOnCPUAndMemory: the HPA controller computes each
// stack's utilization from the requests the operator sized and scales the
// server Deployment from 1 to 2 replicas (and more):
//   - on memory, for a stack that autoscales on memory (and CPU) and sets
//     only a CPU request itself: the operator adds the memory request the
//     metric needs (without it the HPA reports "missing request for memory"
//     and scales nothing);
//   - on CPU, for a stack with 2 uvicorn workers: its CPU request is 2, so
//     1500m of use is 75%.
func TestHPAScalesTheServerOnCPUAndMemory(t *testing.T) {
	ctx := context.Background()
	ns := "autoscaling"
	require(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		StringData: map[string]string{"uri": "postgresql://llama@pg:5432/llama"}}))

	usages := map[string]usage{
		// 10% of the 1 CPU it requests, 450Mi of the 512Mi the operator adds
		// (88%, against a target of 60%).
		"memory": {resource.MustParse("100m"), resource.MustParse("450Mi")},
		// 1500m of the 2 CPUs its 2 workers request (75%, against 50%), 100Mi
		// of 2 × 512Mi.
		"cpu": {resource.MustParse("1500m"), resource.MustParse("100Mi")},
	}
	serveMetrics(t, usages)

	binary, err := testenv.BuildOperator(t.TempDir())
	require(t, err)
	op, err := local.StartOperator(binary, env.Kubeconfig(), filepath.Join(t.TempDir(), "operator.log"), local.DemoPin("1.1.0"))
	require(t, err)
	t.Cleanup(func() {
		if !op.Stop(10*time.Second) || t.Failed() {
			t.Logf("operator log:\n%s", testenv.LastLines(op.Log(), 40))
		}
	})

	shared := []testutil.Option{testutil.WithNamespace(ns),
		testutil.WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
		testutil.WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres, ConnectionString: testutil.SecretKey("pg", "uri")})}
	memory := testutil.Stack("memory", append(shared, testutil.WithAutoscaling(1, 3, 80),
		testutil.WithResources(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}))...)
	memory.Annotations = map[string]string{v1alpha2.MetricsAnnotation: `[{"resource": "memory", "averageUtilization": 60}]`}
	cpu := testutil.Stack("cpu", append(shared, testutil.WithAutoscaling(1, 3, 50), testutil.WithWorkers(2))...)
	for _, s := range []*v1alpha1.InferenceStack{memory, cpu} {
		require(t, env.Client.Create(ctx, s))
	}

	for _, tc := range []struct {
		stack    string
		resource corev1.ResourceName
		percent  int32
	}{
		{"memory", corev1.ResourceMemory, 87}, // 450Mi / 512Mi, rounded down
		{"cpu", corev1.ResourceCPU, 75},
	} {
		hpa := scaledTo2(t, ns, tc.stack)
		got, ok := currentUtilization(hpa, tc.resource)
		if !ok || got != tc.percent {
			t.Errorf("stack %s: the HPA computed %s utilization %d (found %v), want %d%% from the requests the operator sized; status %+v",
				tc.stack, tc.resource, got, ok, tc.percent, hpa.Status)
		}
	}
}

// scaledTo2 waits until the HPA controller has scaled the stack's server
// Deployment to 2 replicas or more (with the same use per pod it goes on to
// its maximum of 3) and has recorded that scale in the HPA's status, marking
// the pods Running and Ready meanwhile. It returns the HPA as recorded. The
// controller writes the Deployment's scale before the HPA's status, so the
// Deployment alone does not say the status holds the figures it scaled on.
func scaledTo2(t *testing.T, ns, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		markPodsReady(t, ns)
		dep := &appsv1.Deployment{}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: server.Name(&v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Name: name}})}, dep)
		if err == nil {
			err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hpa)
		}
		if err == nil && ptr.Deref(dep.Spec.Replicas, 0) >= 2 && hpa.Status.DesiredReplicas >= 2 {
			return hpa
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack %s: the server Deployment was not scaled to 2 replicas, or the HPA did not record it, in %s (read: %v, spec.replicas %v, HPA desiredReplicas %d); HPA metrics %+v, conditions %+v",
				name, timeout, err, ptr.Deref(dep.Spec.Replicas, 0), hpa.Status.DesiredReplicas, hpa.Status.CurrentMetrics, hpa.Status.Conditions)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// currentUtilization is the utilization of resource the HPA last computed.
func currentUtilization(hpa *autoscalingv2.HorizontalPodAutoscaler, name corev1.ResourceName) (int32, bool) {
	for _, m := range hpa.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == name &&
			m.Resource.Current.AverageUtilization != nil {
			return *m.Resource.Current.AverageUtilization, true
		}
	}
	return 0, false
}

// markPodsReady does what a kubelet would for the pods of namespace ns that
// are not Ready yet: Running and Ready, started an hour ago (past the HPA's
// CPU initialization period, so their CPU counts).
func markPodsReady(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	require(t, env.Client.List(ctx, pods, client.InNamespace(ns)))
	longAgo := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &longAgo
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: longAgo},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: longAgo},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: longAgo},
		}
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: longAgo}}})
		}
		if err := env.Client.Status().Update(ctx, p); err != nil && !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatalf("marking pod %s/%s Ready: %v", ns, p.Name, err)
		}
	}
}

// serveMetrics serves the resource metrics API (metrics.k8s.io/v1beta1, the
// part the HPA controller reads: pod metrics by namespace and label
// selector) from the usages, by stack, and registers it with the API
// server's aggregation layer: an APIService backed by a Service without
// selector whose endpoint is the stand-in's address.
func serveMetrics(t *testing.T, usages map[string]usage) {
	t.Helper()
	ip, err := hostIP()
	require(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require(t, err)
	var mu sync.Mutex
	served := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/metrics.k8s.io/v1beta1", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
			"resources": []map[string]any{{"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": []string{"get", "list"}}}})
	})
	mux.HandleFunc("GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(r.Context(), pods, client.InNamespace(r.PathValue("ns")), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		items := []map[string]any{}
		for _, p := range pods.Items {
			u, ok := usages[p.Labels[components.LabelInstance]]
			if !ok || p.Status.Phase != corev1.PodRunning {
				continue
			}
			var containers []map[string]any
			for _, c := range p.Spec.Containers {
				cu := map[string]string{"cpu": "0", "memory": "0"}
				if c.Name == server.ContainerName {
					cu = map[string]string{"cpu": u.cpu.String(), "memory": u.memory.String()}
				}
				containers = append(containers, map[string]any{"name": c.Name, "usage": cu})
			}
			items = append(items, map[string]any{
				"metadata":   map[string]any{"name": p.Name, "namespace": p.Namespace, "labels": p.Labels},
				"timestamp":  time.Now().UTC().Format(time.RFC3339),
				"window":     "30s",
				"containers": containers,
			})
			mu.Lock()
			served[p.Name]++
			mu.Unlock()
		}
		writeJSON(w, map[string]any{"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": map[string]any{}, "items": items})
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("the metrics stand-in answered for these pods this many times: %v", served)
	})
	port := ln.Addr().(*net.TCPAddr).Port

	ctx := context.Background()
	const ns, name = "default", "metrics-standin"
	require(t, env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}))
	require(t, env.Client.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}))
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": ns, "name": name, "port": int64(443)},
		},
	}}
	require(t, env.Client.Create(ctx, apiService))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), apiService) })
}

// hostIP is an IPv4 address of this machine other than loopback: the API
// server refuses loopback endpoints.
func hostIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no IPv4 address but loopback: the metrics stand-in needs one the API server accepts as an endpoint")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func require(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
