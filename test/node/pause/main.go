// Command pause is the node tests' pause program, built by the harness
// instead of pulled: the CRI sandbox image of every pod (it holds the pod's
// namespaces and does nothing), and the first process of the node's PID
// namespace (which reaps orphaned processes). It exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		// Reap every child that has exited; orphans are reparented to us
		// when we are the first process of a PID namespace.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
