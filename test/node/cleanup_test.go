//go:build e2e

package node

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCleanLeftoversRemovesAKilledRun: what a killed run can leave on the
// machine (the host link, nested pod cgroups with a process still in one,
// the state folder) is gone after cleanLeftovers, and hostTraces sees it
// before and not after.
func TestCleanLeftoversRemovesAKilledRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it makes links and cgroups as a node does")
	}
	lock, err := lockMachine(context.Background())
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, cleanLeftovers())
	before := hostTraces()

	out, err := exec.Command("ip", "link", "add", hostLink, "type", "veth", "peer", "name", hostLink+"p").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.MkdirAll(filepath.Join(stateDir(), "var-lib", "containerd"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stateDir(), "var-lib", "containerd", "x"), []byte("x"), 0o644))
	require.NoError(t, makeCgroupRoot())
	roots := cgroupRoots()
	require.NotEmpty(t, roots)
	for _, root := range roots {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "kubepods", "besteffort", "pod1"), 0o755))
	}
	sleep := exec.Command("sleep", "600")
	sleep.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, sleep.Start())
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	procs := filepath.Join(roots[0], "kubepods", "besteffort", "pod1", "cgroup.procs")
	require.NoError(t, os.WriteFile(procs, []byte(strconv.Itoa(sleep.Process.Pid)), 0o644))
	require.NotEqual(t, before, hostTraces(), "hostTraces does not see the leftovers")

	require.NoError(t, cleanLeftovers())
	_, err = net.InterfaceByName(hostLink)
	require.Error(t, err, "the link %s is still there", hostLink)
	for _, root := range roots {
		require.NoDirExists(t, root)
	}
	require.NoDirExists(t, stateDir())
	select {
	case err := <-done:
		require.Error(t, err, "the process in a leftover cgroup was not killed")
	case <-time.After(10 * time.Second):
		t.Fatal("the process in a leftover cgroup still runs")
	}
	require.Equal(t, before, hostTraces())
}
