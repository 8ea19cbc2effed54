package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a child process of a test (kube-controller-manager, the
// operator binary) whose output goes to a log file and which the kernel
// kills when the test binary exits by any means.
type Process struct {
	// Cmd is the started command.
	Cmd *exec.Cmd
	// LogFile receives its stdout and stderr.
	LogFile string

	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// StartProcess starts cmd with its output in logFile.
func StartProcess(cmd *exec.Cmd, logFile string) (*Process, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := onLastingThread(cmd.Start); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(cmd.Path), err)
	}
	p := &Process{Cmd: cmd, LogFile: logFile, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); _ = log.Close(); close(p.done) }()
	return p, nil
}

// lastingThread runs the functions given to onLastingThread.
var (
	lastingThread     = make(chan func())
	lastingThreadOnce sync.Once
)

// onLastingThread runs fn on one OS thread that lives as long as the test
// binary, and returns its error: there the test's child processes are
// forked (cmd.Start, the control plane's start). Linux sends a child its
// Pdeathsig when the thread that forked it ends, not the process
// (golang/go#27505), and Go ends a thread whose goroutine exits locked to
// it: test/node's dialer does so on purpose, to drop a thread left in the
// node's network namespace. A child forked from such a thread was killed
// with it ("signal: killed": catalogd in the middle of the node tests).
func onLastingThread(fn func() error) error {
	lastingThreadOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lasts
			for f := range lastingThread {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	lastingThread <- func() { done <- fn() }
	return <-done
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to end and returns its exit status;
// it reports false when it still runs.
func (p *Process) Wait(d time.Duration) (bool, error) {
	if p.Exited() {
		return true, p.err
	}
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// Stop sends SIGTERM to the process's group, kills the group after grace,
// and waits for the process. It reports whether it ended within grace.
func (p *Process) Stop(grace time.Duration) bool {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	if ended, _ := p.Wait(grace); ended {
		return true
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return false
}

// Log returns what the process has written so far.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// LastLines is the last n lines of s (a log), for test failure messages.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// BuildOperator builds the operator binary (./operator/cmd of this
// repository) into dir and returns its path.
func BuildOperator(dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	if err := BuildStatic("./operator/cmd", bin); err != nil {
		return "", fmt.Errorf("building the operator: %w", err)
	}
	return bin, nil
}

// BuildStatic builds the main package pkg of this repository (a path
// relative to its root, e.g. "./operator/cmd") into the file out, as a static
// binary an image can hold: CGO_ENABLED=0, -trimpath, no VCS stamp, symbols
// stripped, with the build tags the repository's tools use.
func BuildStatic(pkg, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	build := exec.Command("go", "build", "-tags", "containers_image_openpgp", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w", "-o", out, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}
