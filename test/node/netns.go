package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// HTTPClient is an HTTP client whose connections are made in the node's
// network namespace, so that it reaches pod IPs (on the node's bridge) as
// a process of the node would; this machine has no route to them.
func (n *Node) HTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: n.dialContext}}
}

// DialFunc dials as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// PodDialer returns a dial function whose connections are made in the
// network namespace of the running pod: from the pod's IP, on its
// interface, as the pod's own processes connect, so NetworkPolicy judges
// them as the pod's (the pod needs no client program). The pod must run
// on the node (a process of it in its cgroup).
func (n *Node) PodDialer(pod *corev1.Pod) (DialFunc, error) {
	pid, err := podProcess(pod)
	if err != nil {
		return nil, err
	}
	return dialIn(pid), nil
}

func (n *Node) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(n.initPID)(ctx, network, addr)
}

// dialIn dials from a thread that entered the network namespace of process
// pid (inNetNS).
func dialIn(pid int) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inNetNS(pid, func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}

// inNetNS runs fn on a thread that entered the network namespace of
// process pid: a socket belongs to the namespace of the thread that made
// it, and keeps it. The thread stays locked and so ends with its
// goroutine, never running other goroutines in that namespace.
func inNetNS(pid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			done <- fmt.Errorf("node: the network namespace of process %d: %w", pid, err)
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("node: entering the network namespace of process %d: %w", pid, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// podProcess finds a process of the pod (its sandbox's pause, or a
// container's) by the pod's cgroup, which the kubelet (cgroupfs driver)
// names pod<UID>, under cgroupRoot.
func podProcess(pod *corev1.Pod) (int, error) {
	if pod.UID == "" {
		return 0, fmt.Errorf("node: pod %s/%s has no UID: read it from the API server", pod.Namespace, pod.Name)
	}
	files, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		return 0, err
	}
	want := "/pod" + string(pod.UID) + "/"
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), "/"+cgroupRoot+"/") || !strings.Contains(string(data), want) {
			continue // gone, or not the pod's
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("node: no process of pod %s/%s (UID %s) runs on the node", pod.Namespace, pod.Name, pod.UID)
}
