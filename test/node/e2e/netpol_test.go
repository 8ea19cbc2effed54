//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	testnode "github.com/inferencestack/inferencestack/test/node"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// Timeouts of the NetworkPolicy test.
const (
	// enforceTimeout bounds the policy controller's reaction to a new pod
	// or policy (it syncs on every change; seconds when the node is idle).
	enforceTimeout = time.Minute
	// proberTimeout bounds the operator's first reading of a server: it
	// reads each Available server at once, then every minute.
	proberTimeout = 150 * time.Second
	// dialTimeout bounds one connection attempt: a refusal is an answer
	// (ICMP port unreachable from the policy's REJECT), well within it.
	dialTimeout = 5 * time.Second
)

// networkPolicies: the node enforces NetworkPolicy (kube-router's policy
// controller). In namespace np, whose default-deny policy refuses every
// connection in and out of its pods, a stack's networking.allowedFrom
// admits namespace np-clients. From the network namespaces of client pods
// (their IPs, as NetworkPolicy sees pods), a connection to the server's
// Service from np-others is refused by the policy (ECONNREFUSED, the
// REJECT's answer: a signal, not a timeout) while one from np-clients is
// answered, and the same straight to the server pod's IP (bridged); pods
// of their own in the two namespaces, running a client, fail with
// "connection refused" and succeed. The operator, in its own namespace,
// still reads the live server (status.server, through the cluster DNS
// stand-in and the Service), and reads it again once the policies hold (a
// provider's health changed after the refusal shows in ProvidersHealthy):
// the server's policy admits the operator's pods whatever allowedFrom
// says. Then allowedFrom removed, the same np-others
// client is answered: the refusals were the policy's.
func networkPolicies(t *testing.T, in *install) {
	ctx := context.Background()
	const ns, admitted, others = "np", "np-clients", "np-others"
	for _, n := range []string{ns, admitted, others} {
		restrictedNamespace(t, n)
	}
	ref, err := node.PushGoImage(ctx, "./test/node/httpserver", image.BinaryOptions{}, "registry.test/inferencestack/httpserver:netpol")
	require.NoError(t, err)
	// Clients: pods that serve (and so hold a network namespace) in each
	// client namespace.
	clients := map[string]*corev1.Pod{}
	for _, n := range []string{admitted, others} {
		require.NoError(t, node.Env.Client.Create(ctx, restrictedPod(n, "client", ref, "-listen=:8080")))
		clients[n] = waitPod(t, n, "client", podTimeout, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}

	// Default deny, in and out, for every pod of the stack's namespace.
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{
			networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	}
	require.NoError(t, node.Env.Client.Create(ctx, deny))

	s := sample(t, "starter")
	s.Name, s.Namespace = "guarded", ns
	s.Spec.Workload = &v1alpha1.WorkloadSpec{Resources: smallResources()}
	s.Annotations = map[string]string{v1alpha2.SpecAnnotation: `{"networking": {"allowedFrom": {"namespaces": ["` + admitted + `"]}}}`}
	in.label(s)
	require.NoError(t, kube.Create(ctx, s))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- kube-router log ----\n%s", testenv.LastLines(node.Logs("kube-router"), 40))
		}
	})
	waitStack(t, s, readyTimeout, "Ready", isReady)
	svc := &corev1.Service{}
	require.NoError(t, node.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: server.Name(s)}, svc))
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(server.Port(testutil.Hub(s)))))

	// The signal that the policy is enforced: np-others' connection is
	// refused (until the policy controller has synced the new server pod,
	// it may still get through).
	otherDial, err := node.PodDialer(clients[others])
	require.NoError(t, err)
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, enforceTimeout, true, func(ctx context.Context) (bool, error) {
		last = dial(ctx, otherDial, addr)
		return errors.Is(last, syscall.ECONNREFUSED), nil
	})
	require.NoError(t, err, "a client in %s connected to %s (Service %s/%s) or failed otherwise: %v", others, addr, ns, svc.Name, last)
	t.Logf("policy enforced: the %s client's connection to %s is refused: %v", others, addr, last)

	// np-clients is admitted: the server answers its client.
	admittedDial, err := node.PodDialer(clients[admitted])
	require.NoError(t, err)
	health := "http://" + addr + "/v1/health"
	status, err := get(ctx, admittedDial, health)
	require.NoError(t, err, "the client in %s, which allowedFrom admits, did not reach %s", admitted, health)
	require.Equal(t, http.StatusOK, status, "GET %s from %s", health, admitted)
	t.Logf("the %s client reached %s: %d", admitted, health, status)

	// Past the Service, straight to the server pod's IP on the node's
	// bridge (no routing: the policy sees it only through br_netfilter),
	// the same.
	pods := stackPods(t, s)
	require.Len(t, pods, 1, "the server pod")
	podAddr := net.JoinHostPort(pods[0].Status.PodIP, strconv.Itoa(int(runconfig.ServerPort)))
	require.ErrorIs(t, dial(ctx, otherDial, podAddr), syscall.ECONNREFUSED, "the %s client, to the server pod's IP %s", others, podAddr)
	status, err = get(ctx, admittedDial, "http://"+podAddr+"/v1/health")
	require.NoError(t, err, "the %s client, to the server pod's IP %s", admitted, podAddr)
	require.Equal(t, http.StatusOK, status)
	t.Logf("to the server pod's IP %s: the %s client refused, the %s client answered", podAddr, others, admitted)

	// The same by pods' own processes: a client program in each namespace.
	// The admitted one may start before the policy controller has added
	// its new IP to the admitted namespace's set: the kubelet restarts it
	// until it is answered. The other one is refused at once: a source the
	// policy does not know is refused.
	for n, want := range map[string]corev1.PodPhase{admitted: corev1.PodSucceeded, others: corev1.PodFailed} {
		p := restrictedPod(n, "get", ref, "-get="+health)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		if want == corev1.PodSucceeded {
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}
		require.NoError(t, node.Env.Client.Create(ctx, p))
		got := waitPod(t, n, "get", podTimeout, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		logs := node.PodLogs(n, "get")["get"]
		require.Equal(t, want, got.Status.Phase, "the client pod in %s; its log: %s", n, logs)
		if want == corev1.PodFailed {
			require.Contains(t, logs, "connection refused", "the client pod in %s failed otherwise", n)
		} else {
			require.Contains(t, logs, "200 OK")
		}
		t.Logf("client pod %s/get: %s: %s", n, got.Status.Phase, strings.TrimSpace(logs))
	}

	// The operator, in its own namespace, reads the server through the
	// same policies: its first reading fills status.server...
	start := time.Now()
	got := waitStack(t, s, proberTimeout, "read by the operator (status.server)", func(got *v1alpha1.InferenceStack) bool {
		return got.Status.Server != nil && got.Status.Server.Version == in.pin.LlamaStackVersion && len(got.Status.Server.Providers) > 0
	})
	t.Logf("the operator in %s read the server in %s after it was Ready: version %s, %d providers",
		in.namespace, time.Since(start).Round(100*time.Millisecond), got.Status.Server.Version, len(got.Status.Server.Providers))
	// ... and, as that reading may have come before the policies took
	// hold, a reading certainly after it: a provider's health changed now
	// (by the admitted client) shows in the status only once the operator
	// has read the server again.
	provider := got.Status.Server.Providers[0].ProviderID
	const message = "set by the NetworkPolicy test"
	status, err = put(ctx, admittedDial, "http://"+addr+"/standin/v1/health/"+provider, `{"status": "Error", "message": "`+message+`"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "PUT the stand-in's health of %s", provider)
	start = time.Now()
	got = waitStack(t, s, proberTimeout, "read again by the operator (ProvidersHealthy False)", func(got *v1alpha1.InferenceStack) bool {
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha2.TypeProvidersHealthy)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, message)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha2.TypeProvidersHealthy)
	t.Logf("the operator read the server again %s after the change: ProvidersHealthy %s: %s", time.Since(start).Round(100*time.Millisecond), c.Status, c.Message)
	last = dial(ctx, otherDial, addr)
	require.ErrorIs(t, last, syscall.ECONNREFUSED, "the %s client, after the operator's reading", others)

	// Control: without allowedFrom the server's policy admits every
	// namespace (the default deny still there): the same client connects.
	update(t, s, func(s *v1alpha1.InferenceStack) { delete(s.Annotations, v1alpha2.SpecAnnotation) })
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, enforceTimeout, true, func(ctx context.Context) (bool, error) {
		last = dial(ctx, otherDial, addr)
		return last == nil, nil
	})
	require.NoError(t, err, "without allowedFrom, the client in %s still cannot connect to %s: %v", others, addr, last)
	t.Logf("without allowedFrom the %s client connects to %s", others, addr)
	deleteStack(t, s)
}

// dial opens a TCP connection to addr with dialer and closes it: nil when
// it was accepted.
func dial(ctx context.Context, dialer testnode.DialFunc, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := dialer(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// get sends GET url through dialer and returns the answer's status code.
func get(ctx context.Context, dialer testnode.DialFunc, url string) (int, error) {
	return send(ctx, dialer, http.MethodGet, url, "")
}

// put sends PUT url with a JSON body through dialer and returns the
// answer's status code.
func put(ctx context.Context, dialer testnode.DialFunc, url, body string) (int, error) {
	return send(ctx, dialer, http.MethodPut, url, body)
}

func send(ctx context.Context, dialer testnode.DialFunc, method, url, body string) (int, error) {
	c := &http.Client{Timeout: dialTimeout, Transport: &http.Transport{DialContext: dialer, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
