package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessOutlivesTheThreadThatStartedIt: a process started from a
// goroutine that ends locked to its OS thread (so Go ends the thread, as
// test/node's dialer does) lives on: it was not forked from that thread, so
// the thread's end sends it no Pdeathsig. The child answers a SIGUSR1 after
// the thread is gone, which a child sent SIGKILL at the thread's end could
// not.
func TestProcessOutlivesTheThreadThatStartedIt(t *testing.T) {
	log := filepath.Join(t.TempDir(), "child.log")
	type started struct {
		p   *Process
		tid int
		err error
	}
	ch := make(chan started, 1)
	var s started
	// A goroutine locked to the main thread does not end it (Go parks
	// the main thread instead), so the test starts the child from a
	// goroutine that runs on another thread.
	for s.p == nil && s.err == nil {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if syscall.Gettid() == syscall.Getpid() {
				runtime.UnlockOSThread()
				ch <- started{}
				return
			}
			p, err := StartProcess(exec.Command("/bin/sh", "-c", `trap 'echo alive' USR1; echo ready; while :; do sleep 0.05; done`), log)
			ch <- started{p, syscall.Gettid(), err}
		}()
		s = <-ch
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.p.Stop(time.Second) })
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	waitFor(t, "the starting thread to end", func() bool {
		_, err := os.Stat(task)
		return errors.Is(err, os.ErrNotExist)
	})
	alive := func() {
		if ended, err := s.p.Wait(0); ended {
			t.Fatalf("the child ended (%v) once the thread that started it ended; its log: %q", err, s.p.Log())
		}
	}
	waitFor(t, "the child to be ready", func() bool { alive(); return strings.Contains(s.p.Log(), "ready") })
	if err := s.p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatalf("the child is gone once the thread that started it ended: %v (exited %v)", err, s.p.Exited())
	}
	waitFor(t, "the child to answer SIGUSR1", func() bool { alive(); return strings.Contains(s.p.Log(), "alive") })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
