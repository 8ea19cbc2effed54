//go:build unix

package atomicfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lock takes an exclusive flock(2) on the folder dir, waiting for another
// run that holds it; the kernel drops it when the process dies. It is not
// reentrant: a second lock of the same folder by the same process waits
// forever, so writes never nest.
func lock(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
