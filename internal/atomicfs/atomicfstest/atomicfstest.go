// Package atomicfstest kills a writer with SIGKILL before each step of its
// atomicfs writes, in a child process of the test binary, so tests can check
// what a stopped run leaves behind: the old tree or the new one, and
// leftovers that the next run removes.
package atomicfstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// envStep carries, to the child, the number of the step to die at.
const envStep = "ATOMICFSTEST_KILL_AT"

// maxSteps bounds the loop of EveryStep.
const maxSteps = 200

// Child reports whether this process is a child started by EveryStep. Its
// context makes atomicfs kill the process (SIGKILL, no cleanup of any kind)
// when it reaches the chosen step.
func Child() (context.Context, bool) {
	v := os.Getenv(envStep)
	if v == "" {
		return nil, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", envStep, v, err))
	}
	count := 0
	return atomicfs.WithHook(context.Background(), func(path, step string) {
		count++
		if count == n {
			fmt.Fprintf(os.Stderr, "atomicfstest: killed before step %d, %s of %s\n", n, step, path)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}), true
}

// EveryStep runs the test named helper (which calls Child and then the
// writer) in a child process, once for each step the writer's atomicfs
// writes take, killing it before step 1, then before step 2, and so on,
// until a run ends without being killed. prepare is called before each run
// (to reset the tree), check after it with the step number and whether the
// child was killed. env is added to the child's environment. The child's
// temporary files go into a folder of the test's (TMPDIR): a killed child
// removes none of its own.
func EveryStep(t *testing.T, helper string, env []string, prepare func(n int), check func(n int, killed bool, log string)) {
	t.Helper()
	tmp := t.TempDir()
	for n := 1; n <= maxSteps; n++ {
		prepare(n)
		cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), env...), envStep+"="+strconv.Itoa(n), "TMPDIR="+tmp)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		killed := false
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				killed = true
			}
		}
		if err != nil && !killed {
			t.Fatalf("the writer failed at step %d: %v\n%s", n, err, out)
		}
		check(n, killed, string(out))
		if !killed {
			return
		}
	}
	t.Fatalf("the writer still had steps left after %d", maxSteps)
}

// LastLine is the last line of a child's output (where EveryStep killed it).
func LastLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return lines[len(lines)-1]
}
