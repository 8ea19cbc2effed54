package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// The policy controller's identity: a user of its own (a client
// certificate), bound to a ClusterRole that reads what it watches.
const (
	policyControllerUser = "inferencestack-node:kube-router"
	// policyHealthPort is kube-router's health endpoint, in the node's
	// network namespace.
	policyHealthPort = 20244
)

// policyControllerRules are what kube-router's informers list and watch
// (its daemonset's ClusterRole, less what only its router and service
// proxy use): it reads pods, namespaces and NetworkPolicies to make the
// rules, the node for its addresses, and starts informers on Services,
// Endpoints and EndpointSlices whatever runs.
var policyControllerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "services", "nodes", "endpoints"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
}

// startPolicyController starts kube-router's network policy controller
// alone (no pod routing, no service proxy, no CNI configuration) in the
// node's namespaces, where it programs iptables and ipset for the node's
// pods as NetworkPolicies say, and waits until it is healthy (its caches
// synced and its first full sync of the rules done).
func (n *Node) startPolicyController(ctx context.Context, env *testenv.Env) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: policyControllerUser}, Rules: policyControllerRules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyControllerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: policyControllerUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: policyControllerUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node: the policy controller's RBAC: %w", err)
		}
	}
	kubeconfig, err := env.KubeconfigForUser(policyControllerUser)
	if err != nil {
		return err
	}
	if err := n.startInside("kube-router", filepath.Join(n.binDir, "kube-router"),
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--enable-cni=false",
		"--kubeconfig="+kubeconfig,
		"--hostname-override="+Name,
		"--service-cluster-ip-range="+ServiceCIDR,
		"--health-port="+strconv.Itoa(policyHealthPort),
		"--metrics-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	c := n.HTTPClient()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", policyHealthPort)
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p := n.procs[len(n.procs)-1]; p.Exited() {
			return false, fmt.Errorf("kube-router exited")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("node: kube-router's network policy controller not healthy (%s): %w; its log:\n%s",
			last, err, testenv.LastLines(n.Logs("kube-router"), 40))
	}
	return nil
}

// checkBridgeNetfilter turns on, in the node's network namespace (the
// setting is per namespace), the passing of bridged IPv4 traffic through
// iptables: pods on the node's bridge reach each other without routing,
// and only so do the policy controller's rules see that traffic. It needs
// the kernel's br_netfilter (hack/node.sh loads it).
func (n *Node) checkBridgeNetfilter() error {
	const setting = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	// /proc/sys/net shows the network namespace of the process reading it:
	// set and check from inside.
	script := fmt.Sprintf(`echo 1 > %[1]s; v=$(cat %[1]s); [ "$v" = 1 ] || { echo "%[1]s is $v"; exit 1; }`, setting)
	if err := n.inside("/bin/sh", "-ec", script); err != nil {
		return fmt.Errorf("node: bridged pod traffic must pass iptables for NetworkPolicy: %w (is br_netfilter loaded? `make node` as root loads it: modprobe br_netfilter)", err)
	}
	return nil
}
