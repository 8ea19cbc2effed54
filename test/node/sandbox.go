package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inferencestack/inferencestack/test/testenv"
)

const (
	// hostLink is this machine's end of the veth pair; the node's end is eth0.
	hostLink = "isnode0"
	// cgroupRoot is the kubelet's cgroup root: every pod cgroup lives below it.
	cgroupRoot = "inferencestack-node"
	// lockWait bounds waiting for another node run on this machine to end.
	lockWait = 15 * time.Minute
)

// kernelTunables are the machine-wide kernel settings kubelet sets at start
// (setupKernelTunables), with the values it wants. Inside the node's mount
// namespace each /proc/sys file is covered by a file holding that value, so
// kubelet finds them set and the machine keeps its own.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hostTools are the programs the node runs from this machine's PATH.
var hostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "conntrack", "ipset", "ip", "unshare", "nsenter", "mount"}

// stateDir is the node's state folder (containerd's images, the kubelet's
// pods, logs); one per machine, removed by Stop or the next New.
func stateDir() string { return filepath.Join(os.TempDir(), "inferencestack-node") }

// checkHost fails, saying how to get them, unless the node's binaries, the
// host tools and the CNI plugins are present.
func (n *Node) checkHost() error {
	for _, name := range []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-router"} {
		if _, err := os.Stat(filepath.Join(n.binDir, name)); err != nil {
			return fmt.Errorf("node: %s is missing in %s: build the node with `make node` (hack/node.sh) "+
				"or point NODE_BIN at a folder holding kubelet, kube-proxy, kube-scheduler and kube-router", name, n.binDir)
		}
	}
	for _, tool := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("node: %s is not installed: run `make node` as root (hack/node.sh installs containerd, runc, "+
				"the CNI plugins, iptables, conntrack and ipset)", tool)
		}
	}
	n.cniBinDir = n.opts.CNIBinDir
	if n.cniBinDir == "" {
		for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
			if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
				n.cniBinDir = d
				break
			}
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(n.cniBinDir, plugin)); err != nil {
			return fmt.Errorf("node: the CNI plugin %s is missing (in %q): run `make node` as root (hack/node.sh installs containernetworking-plugins)", plugin, n.cniBinDir)
		}
	}
	return nil
}

// lockMachine takes the machine's node lock (one node at a time: the
// network, the cgroup root and the state folder are per machine), waiting
// for another run to end. The lock goes with the returned file, and with
// the process.
func lockMachine(ctx context.Context) (*os.File, error) {
	path := filepath.Join(os.TempDir(), "inferencestack-node.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for said := false; ; said = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("node: another node test holds %s (one node runs per machine at a time): %w", path, errors.Join(err, ctx.Err()))
		}
		if !said {
			fmt.Fprintf(os.Stderr, "node: waiting (up to %s) for another node test on this machine to end (lock %s)\n", lockWait, path)
		}
		time.Sleep(time.Second)
	}
}

// cleanLeftovers removes what a node run leaves on the machine when killed:
// the host end of its veth pair (normally gone with its network namespace),
// the pod cgroups and the state folder. It runs holding the machine lock, so
// no node uses them.
func cleanLeftovers() error {
	var errs []error
	if _, err := net.InterfaceByName(hostLink); err == nil {
		out, err := exec.Command("ip", "link", "del", hostLink).CombinedOutput()
		// The kernel may remove it meanwhile, with its network namespace.
		if _, gone := net.InterfaceByName(hostLink); err != nil && gone == nil {
			errs = append(errs, fmt.Errorf("node: removing the link %s: %w: %s", hostLink, err, out))
		}
	}
	for _, root := range cgroupRoots() {
		errs = append(errs, removeCgroupTree(root))
	}
	if err := os.RemoveAll(stateDir()); err != nil {
		errs = append(errs, fmt.Errorf("node: removing the state folder: %w", err))
	}
	return errors.Join(errs...)
}

// hostTraces lists what of a node could show on this machine outside the
// node's namespaces: the host link, the cgroup roots, the state folder,
// mounts of it, iptables rules of the chains kube-proxy, kube-router and
// the CNI plugins make (KUBE-*, CNI-*), and kube-router's ipsets. New
// records it before the node starts; Stop fails if it differs after.
func hostTraces() []string {
	var traces []string
	if _, err := net.InterfaceByName(hostLink); err == nil {
		traces = append(traces, "link "+hostLink)
	}
	for _, root := range append(cgroupRoots(), stateDir()) {
		if _, err := os.Stat(root); err == nil {
			traces = append(traces, "folder "+root)
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, stateDir()) {
				traces = append(traces, "mount "+line)
			}
		}
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") {
				traces = append(traces, "iptables "+line)
			}
		}
	}
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for _, set := range strings.Fields(string(out)) {
			if strings.HasPrefix(set, "KUBE-") || strings.HasPrefix(set, "kube-router") || strings.HasPrefix(set, "inet6:") {
				traces = append(traces, "ipset "+set)
			}
		}
	}
	return traces
}

// cgroupRoots are the kubelet's cgroup root in every hierarchy: one folder
// with cgroup v2, one per controller with v1.
func cgroupRoots() []string {
	const mnt = "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(mnt, "cgroup.controllers")); err == nil {
		return []string{filepath.Join(mnt, cgroupRoot)}
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		return nil
	}
	var roots []string
	for _, e := range entries {
		// Symbolic links (cpu,cpuacct) name a hierarchy listed under its own name too.
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(mnt, e.Name(), "cgroup.procs")); err == nil {
			roots = append(roots, filepath.Join(mnt, e.Name(), cgroupRoot))
		}
	}
	return roots
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist).
func makeCgroupRoot() error {
	for _, root := range cgroupRoots() {
		if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("node: creating the cgroup %s: %w", root, err)
		}
	}
	return nil
}

// removeCgroupTree removes the cgroup folder root and every cgroup below
// it, deepest first, killing any process still in one (a container of a
// killed run) and waiting for the kernel to release them.
func removeCgroupTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: listing the cgroups under %s: %w", root, err)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		deadline := time.Now().Add(15 * time.Second)
		for {
			if data, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node: removing the cgroup %s: %w", d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// startSandbox starts the node's namespaces: pause as the first process of
// new PID, mount and network namespaces (unshare; when unshare dies, with
// the test binary, the kernel kills pause and so every process of the
// namespace). Inside, /run is a private tmpfs, /var/lib and /var/log are
// bound to the state folder and kernelTunables covered; a veth pair joins
// the namespace (eth0, NodeIP) to this machine (hostLink, HostIP).
func (n *Node) startSandbox(pause string) error {
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--net",
		"--propagation", "private", pause)
	p, err := testenv.StartProcess(cmd, n.path("logs", "sandbox.log"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.sandbox = p
	// The first process is unshare's child; it has mounted /proc of the new
	// PID namespace once it runs pause.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ended, err := p.Wait(0); ended {
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("node: unshare exited at start (%w): %s", err, p.Log())
		}
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Cmd.Process.Pid, p.Cmd.Process.Pid))
		if f := strings.Fields(string(children)); len(f) == 1 {
			pid, _ := strconv.Atoi(f[0])
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == pause {
				n.initPID = pid
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: the node's namespaces did not start in 10s: %s", p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}

	sysctls := n.path("sysctl")
	if err := os.MkdirAll(sysctls, 0o755); err != nil {
		return err
	}
	script := []string{
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		fmt.Sprintf("mount --bind %q /var/lib", n.path("var-lib")),
		fmt.Sprintf("mount --bind %q /var/log", n.path("var-log")),
	}
	for _, key := range slices.Sorted(maps.Keys(kernelTunables)) {
		file := filepath.Join(sysctls, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(file, []byte(kernelTunables[key]+"\n"), 0o644); err != nil {
			return err
		}
		script = append(script, fmt.Sprintf("mount --bind %q /proc/sys/%s", file, key))
	}
	script = append(script, "ip link set lo up")
	if err := n.inside("/bin/sh", "-ec", strings.Join(script, "\n")); err != nil {
		return err
	}

	for _, args := range [][]string{
		{"link", "add", hostLink, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(n.initPID)},
		{"addr", "add", HostIP + "/30", "dev", hostLink},
		{"link", "set", hostLink, "up"},
		// The API server (on this machine) reaches Services as a control
		// plane node does: ClusterIPs through kube-proxy's rules in the
		// node, which forwards to the pods (webhooks such as the CRD
		// package's conversion webhook are called this way).
		{"route", "add", ServiceCIDR, "via", NodeIP, "dev", hostLink},
		{"route", "add", PodCIDR, "via", NodeIP, "dev", hostLink},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("node: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := n.inside("/bin/sh", "-ec", strings.Join([]string{
		"ip addr add " + NodeIP + "/30 dev eth0",
		"ip link set eth0 up",
		"ip route add default via " + HostIP,
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
	}, "\n")); err != nil {
		return err
	}
	return n.checkBridgeNetfilter()
}

// inside runs a command in the node's mount and network namespaces and
// waits for it.
func (n *Node) inside(args ...string) error {
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(n.initPID), "--mount", "--net", "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node: in the node's namespaces, %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// startInside starts a component in the node's PID, mount and network
// namespaces.
func (n *Node) startInside(name, bin string, args ...string) error {
	nsenter := append([]string{"--target", strconv.Itoa(n.initPID), "--mount", "--net", "--pid", "--", bin}, args...)
	return n.start(name, exec.Command("nsenter", nsenter...))
}

// startContainerd writes containerd's configuration (CRI with the pause
// image, the CNI network and the registry mirrors) and starts it.
func (n *Node) startContainerd(ctx context.Context) error {
	cniConf := n.path("cni")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-inferencestack-node.conflist"), []byte(cniConflist()), 0o644); err != nil {
		return err
	}
	hosts := n.path("certs.d")
	for _, registry := range MirroredRegistries {
		dir := filepath.Join(hosts, registry)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hostsTOML(n.RegistryHost)), 0o644); err != nil {
			return err
		}
	}
	config := n.path("containerd.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(n.cniBinDir, cniConf, hosts)), 0o644); err != nil {
		return err
	}
	if err := n.startInside("containerd", "containerd", "--config", config); err != nil {
		return err
	}
	// The socket is in the node's private /run, seen through pause's root.
	socket := fmt.Sprintf("/proc/%d/root%s", n.initPID, containerdSocket)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			return nil
		}
		if n.procs[len(n.procs)-1].Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node: containerd did not open %s; its log:\n%s", containerdSocket, testenv.LastLines(n.Logs("containerd"), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
