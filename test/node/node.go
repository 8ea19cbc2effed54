package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/registry"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// The node's name and its network. HostIP (this machine's end of the veth
// pair) and NodeIP (the node's end) form a /30; pods get addresses of
// PodCIDR on the node's bridge, Services ClusterIPs of ServiceCIDR.
const (
	Name                = "inferencestack-node"
	HostIP              = "172.30.254.1"
	NodeIP              = "172.30.254.2"
	PodCIDR             = "10.244.0.0/24"
	ServiceCIDR         = "10.0.0.0/24"
	KubernetesServiceIP = "10.0.0.1"
)

// NodeControllers are the kube-controller-manager controllers a node needs
// besides the garbage collector and namespace controllers: Deployments and
// ReplicaSets, Services' EndpointSlices, every namespace's default
// ServiceAccount and kube-root-ca.crt, the node's lifecycle (its not-ready
// taint), pod garbage collection, PersistentVolume binding and disruption
// budgets.
var NodeControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"endpointslice-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"node-lifecycle-controller",
	"pod-garbage-collector-controller",
	"persistentvolume-binder-controller",
	"disruption-controller",
}

// Options say where the node's parts come from.
type Options struct {
	// BinDir holds kubelet, kube-scheduler and kube-proxy (hack/node.sh's
	// output). Empty means $NODE_BIN, else bin/node at the repository root.
	BinDir string
	// CNIBinDir holds the CNI plugins. Empty means /usr/lib/cni or
	// /opt/cni/bin, whichever holds the bridge plugin.
	CNIBinDir string
	// Registry is the in-process registry every image is pulled from; New
	// also serves it on HostIP.
	Registry *registry.Server
	// ReadyTimeout bounds waiting for the node to be Ready; zero means 2m.
	ReadyTimeout time.Duration
}

// Node is a running node: containerd in its namespaces after New; kubelet,
// kube-proxy and kube-scheduler too after Join.
type Node struct {
	// Env is the control plane the node joined (nil before Join).
	Env *testenv.Env
	// RegistryHost is the registry's address as the node reaches it
	// (HostIP:PORT).
	RegistryHost string

	opts      Options
	binDir    string
	cniBinDir string
	dir       string // the state folder
	lock      *os.File
	sandbox   *testenv.Process
	initPID   int
	procs     []*component // started in order, stopped in reverse
	dns       *clusterDNS  // after Join, until Leave
	ownEnv    bool
	traces    []string // hostTraces before the node started
}

type component struct {
	name string
	*testenv.Process
}

// BinDir returns where hack/node.sh puts the node's binaries: $NODE_BIN,
// else bin/node at the repository root.
func BinDir() (string, error) {
	if dir := os.Getenv("NODE_BIN"); dir != "" {
		return dir, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "node"), nil
}

// Start starts a control plane for a node (ControlPlane's options) and a node
// joined to it; Stop stops both.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	n, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	env, err := testenv.Start(n.ControlPlane(testenv.Options{}))
	if err != nil {
		return nil, err
	}
	n.ownEnv = true
	n.Env = env
	if err := n.Join(ctx, env); err != nil {
		return nil, err
	}
	return n, nil
}

// New checks what the node needs, removes what a killed run left, and
// starts the node's namespaces and containerd in them. Join then makes it a
// node of a control plane started with ControlPlane's options. On error
// nothing is left running.
func New(ctx context.Context, opts Options) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("node: the node tests need root (kubelet, containerd, network and mount namespaces): run them as root")
	}
	if opts.Registry == nil {
		return nil, errors.New("node: Options.Registry is nil: start one with registry.Start")
	}
	n := &Node{opts: opts}
	if n.binDir = opts.BinDir; n.binDir == "" {
		if n.binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if err := n.checkHost(); err != nil {
		return nil, err
	}
	if n.lock, err = lockMachine(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	if err := cleanLeftovers(); err != nil {
		return nil, err
	}
	n.traces = hostTraces()
	n.dir = stateDir()
	for _, d := range []string{n.dir, n.path("logs"), n.path("var-lib"), n.path("var-log"), n.path("bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := makeCgroupRoot(); err != nil {
		return nil, err
	}
	pause := n.path("bin", "pause")
	if err := testenv.BuildStatic("./test/node/pause", pause); err != nil {
		return nil, fmt.Errorf("node: building the pause program: %w", err)
	}
	if err := n.startSandbox(pause); err != nil {
		return nil, err
	}
	if n.RegistryHost, err = opts.Registry.ServeOn(HostIP + ":0"); err != nil {
		return nil, fmt.Errorf("node: serving the registry on %s: %w", HostIP, err)
	}
	if _, err := n.pushBinary(ctx, pause, "/pause", PauseImage, image.BinaryOptions{}); err != nil {
		return nil, fmt.Errorf("node: pushing the pause image: %w", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// ControlPlane returns opts with what the node needs of the control plane:
// the API server on HostIP with a certificate for the `kubernetes` Service,
// the ServiceCIDR, the Node authorizer, the ServiceAccount and
// NodeRestriction admission plugins, and the controllers of NodeControllers
// with the garbage collector.
func (n *Node) ControlPlane(opts testenv.Options) testenv.Options {
	opts.ServingAddress = HostIP
	opts.ServingHosts = append(slices.Clone(opts.ServingHosts), KubernetesServiceIP,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	args := map[string][]string{}
	for k, v := range opts.APIServerArgs {
		args[k] = slices.Clone(v)
	}
	args["service-cluster-ip-range"] = []string{ServiceCIDR}
	args["authorization-mode"] = []string{"Node,RBAC"}
	// envtest disables the ServiceAccount admission plugin; pods need it
	// for their token volume.
	args["disable-admission-plugins"] = nil
	args["enable-admission-plugins"] = append(args["enable-admission-plugins"], "NodeRestriction")
	opts.APIServerArgs = args
	opts.GarbageCollector = true
	opts.Controllers = append(slices.Clone(opts.Controllers), NodeControllers...)
	return opts
}

// Join starts kubelet, kube-proxy and kube-router's network policy
// controller in the node's namespaces, the cluster DNS stand-in
// (clusterDNS) and kube-scheduler beside the control plane, each component
// with its own identity (client certificates of system:node:<Name>,
// system:kube-proxy, policyControllerUser, system:kube-scheduler), and
// waits until the node is Ready and untainted, and the policy controller
// healthy.
func (n *Node) Join(ctx context.Context, env *testenv.Env) error {
	n.Env = env
	kubeletConfig, err := env.KubeconfigForUser("system:node:"+Name, "system:nodes")
	if err != nil {
		return err
	}
	proxyConfig, err := env.KubeconfigForUser("system:kube-proxy")
	if err != nil {
		return err
	}
	schedulerConfig, err := env.KubeconfigForUser("system:kube-scheduler")
	if err != nil {
		return err
	}
	files := map[string]string{
		"kubelet.yaml":    kubeletConfiguration(),
		"kube-proxy.yaml": kubeProxyConfiguration(proxyConfig),
	}
	for name, content := range files {
		if err := os.WriteFile(n.path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := n.startInside("kubelet", filepath.Join(n.binDir, "kubelet"),
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+kubeletConfig,
		"--hostname-override="+Name,
		"--node-ip="+NodeIP,
		"--v=1",
	); err != nil {
		return err
	}
	if err := n.startInside("kube-proxy", filepath.Join(n.binDir, "kube-proxy"), "--config="+n.path("kube-proxy.yaml")); err != nil {
		return err
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return err
	}
	if err := n.start("kube-scheduler", exec.Command(filepath.Join(n.binDir, "kube-scheduler"),
		"--kubeconfig="+schedulerConfig,
		"--authentication-kubeconfig="+schedulerConfig,
		"--authorization-kubeconfig="+schedulerConfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[0]),
	)); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	// The policy controller reads the node's addresses at start: after the
	// kubelet registered it. No pod runs yet.
	if err := n.startPolicyController(ctx, env); err != nil {
		return err
	}
	if err := n.waitServiceProxy(ctx, env.Client); err != nil {
		return err
	}
	return n.startDNS(env.Client)
}

// waitServiceProxy waits until kube-proxy has programmed the `kubernetes`
// Service: a connection to its ClusterIP from the node's network namespace
// reaches the API server. kube-proxy's first sync can fail when it writes
// iptables at the same time as the kubelet ("Failed to ensure chain jumps
// ... Chain 'KUBE-EXTERNAL-SERVICES' does not exist"), and in 3 of 8 runs
// on one machine that kube-proxy then programmed no Service for minutes (no
// pod reached the API server): it is restarted then (its log kept as
// kube-proxy.<n>.log), at most twice.
func (n *Node) waitServiceProxy(ctx context.Context, c client.Reader) error {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, svc); err != nil {
		return fmt.Errorf("node: the kubernetes Service: %w", err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	for restarts := 0; ; restarts++ {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			conn, err := n.dialContext(dctx, "tcp", addr)
			if err != nil {
				return false, nil
			}
			return true, conn.Close()
		})
		if err == nil {
			return nil
		}
		if restarts == 2 {
			return fmt.Errorf("node: the kubernetes Service (%s) unreachable through kube-proxy, restarted twice: %w; its log:\n%s",
				addr, err, testenv.LastLines(n.Logs("kube-proxy"), 40))
		}
		i := slices.IndexFunc(n.procs, func(p *component) bool { return p.name == "kube-proxy" })
		if i < 0 {
			return errors.New("node: kube-proxy is not running")
		}
		n.procs[i].Stop(10 * time.Second)
		n.procs = slices.Delete(n.procs, i, i+1)
		if err := os.Rename(n.path("logs", "kube-proxy.log"), n.path("logs", fmt.Sprintf("kube-proxy.%d.log", restarts+1))); err != nil {
			return err
		}
		if err := n.startInside("kube-proxy", filepath.Join(n.binDir, "kube-proxy"), "--config="+n.path("kube-proxy.yaml")); err != nil {
			return err
		}
	}
}

// waitReady waits until the node is Ready and the node lifecycle
// controller has removed its not-ready taint, so pods can be scheduled.
func (n *Node) waitReady(ctx context.Context) error {
	timeout := n.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	node := &corev1.Node{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, c := range n.procs {
			if c.Exited() {
				return false, fmt.Errorf("node: %s exited; its log:\n%s", c.name, testenv.LastLines(c.Log(), 40))
			}
		}
		if err := n.Env.Client.Get(ctx, client.ObjectKey{Name: Name}, node); err != nil {
			last = err.Error()
			return false, client.IgnoreNotFound(err)
		}
		ready := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		last = fmt.Sprintf("ready=%t taints=%v", ready, node.Spec.Taints)
		return ready && len(node.Spec.Taints) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("node: %s not Ready and untainted in %s (%s): %w; kubelet's log:\n%s",
			Name, timeout, last, err, testenv.LastLines(n.Logs("kubelet"), 40))
	}
	return nil
}

// Logs returns what a component ("containerd", "kubelet", "kube-proxy",
// "kube-router", "kube-scheduler") has logged so far.
func (n *Node) Logs(name string) string {
	data, err := os.ReadFile(n.path("logs", name+".log"))
	if err != nil {
		return fmt.Sprintf("(no log for %s: %v)", name, err)
	}
	return string(data)
}

// PodLogs returns the logs the kubelet kept of every container of the pod
// namespace/name (its files under /var/log/pods), by container.
func (n *Node) PodLogs(namespace, name string) map[string]string {
	out := map[string]string{}
	dirs, _ := filepath.Glob(n.path("var-log", "pods", namespace+"_"+name+"_*", "*"))
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.log"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err == nil {
				out[filepath.Base(d)] += string(data)
			}
		}
	}
	return out
}

// VolumeDir makes an empty folder on the node for a local
// PersistentVolume (no provisioner runs) and returns its path on the node,
// /var/lib/inferencestack-volumes/<name>. Like the root of a new file
// system it belongs to root with mode 0755: a pod's non-root user may
// write there only through the kubelet's fsGroup handling, which local
// volumes have (hostPath volumes do not). A folder of that name is emptied.
func (n *Node) VolumeDir(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return "", fmt.Errorf("node: volume folder name %q must be one non-empty path element", name)
	}
	host := n.path("var-lib", "inferencestack-volumes", name)
	if err := os.RemoveAll(host); err != nil {
		return "", err
	}
	if err := os.MkdirAll(host, 0o755); err != nil {
		return "", err
	}
	if err := os.Chown(host, 0, 0); err != nil {
		return "", err
	}
	return path.Join("/var/lib/inferencestack-volumes", name), os.Chmod(host, 0o755)
}

// KillContainer kills every process of a container of the node with
// SIGKILL, as a crash or the OOM killer would, and returns how many it
// killed; the kubelet then restarts the container as the pod's restart
// policy says. containerID is as a pod's status gives it
// ("containerd://<id>"); the processes are those in its cgroup.
func (n *Node) KillContainer(containerID string) (int, error) {
	return n.SignalContainer(containerID, syscall.SIGKILL)
}

// SignalContainer sends sig to every process of a container of the node
// (SIGSTOP holds them where they are, SIGCONT lets them go on) and returns
// how many it signalled. containerID is as for KillContainer.
func (n *Node) SignalContainer(containerID string, sig syscall.Signal) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	if id == "" || strings.ContainsAny(id, "/:") {
		return 0, fmt.Errorf("node: %q is not a containerd container ID (containerd://<id>)", containerID)
	}
	files, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		return 0, err
	}
	signalled := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), cgroupRoot+"/") || !strings.Contains(string(data), "/"+id+"\n") {
			continue // gone, or not that container's
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, sig); err == nil {
			signalled++
		}
	}
	if signalled == 0 {
		return 0, fmt.Errorf("node: no process of container %s runs", id)
	}
	return signalled, nil
}

// Leave stops kube-scheduler, kube-router, kube-proxy, the kubelet and the
// cluster DNS stand-in: the node leaves the control plane it joined
// (containerd and the containers keep running until Stop). Stop a control plane the node joined but did not start
// between Leave and Stop: its API server waits for their connections to
// end, and listens on HostIP, which goes with the node's namespaces.
func (n *Node) Leave() {
	if n.dns != nil {
		n.dns.stop()
		n.dns = nil
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].name != "containerd" {
			n.procs[i].Stop(10 * time.Second)
		}
	}
}

// Stop stops kube-scheduler, kube-proxy, the kubelet (Leave) and the
// control plane if Start started it, then containerd and the node's
// namespaces with every container; it removes the pod cgroups and the state
// folder.
func (n *Node) Stop() error {
	var errs []error
	n.Leave()
	if n.ownEnv && n.Env != nil {
		errs = append(errs, n.Env.Stop())
		n.Env = nil
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(10 * time.Second)
	}
	n.procs = nil
	if n.sandbox != nil {
		n.sandbox.Stop(10 * time.Second)
		n.sandbox = nil
	}
	if n.lock != nil {
		if err := cleanLeftovers(); err != nil {
			errs = append(errs, err)
		} else if left := hostTraces(); !slices.Equal(left, n.traces) {
			errs = append(errs, fmt.Errorf("node: left on this machine after Stop (before New: %q): %q", n.traces, left))
		}
		_ = n.lock.Close() // releases the lock
		n.lock = nil
	}
	return errors.Join(errs...)
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.dir}, elem...)...)
}

// start runs cmd as component name, logging into logs/<name>.log, and fails
// if it exits at once.
func (n *Node) start(name string, cmd *exec.Cmd) error {
	p, err := testenv.StartProcess(cmd, n.path("logs", name+".log"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.procs = append(n.procs, &component{name: name, Process: p})
	if ended, err := p.Wait(300 * time.Millisecond); ended {
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("node: %s exited at start (%w); its log:\n%s", name, err, testenv.LastLines(p.Log(), 40))
	}
	return nil
}
