package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// HTTPClient is an HTTP client whose connections are made in the node's
// network namespace, so that it reaches pod IPs (on the node's bridge) as
// a process of the node would; this machine has no route to them.
func (n *Node) HTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: n.dialContext}}
}

// dialContext dials from a thread that entered the node's network
// namespace: a socket belongs to the namespace of the thread that made it.
// The thread stays locked and so ends with its goroutine, never running
// other goroutines in the node's namespace.
func (n *Node) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", n.initPID))
		if err != nil {
			done <- result{err: fmt.Errorf("node: the node's network namespace: %w", err)}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("node: entering the node's network namespace: %w", err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}
