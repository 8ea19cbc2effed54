package atomicfs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange swaps the folders a and b in one step (renameat2 RENAME_EXCHANGE).
func exchange(a, b string) error {
	err := exchangeFunc(a, b)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return errExchangeUnsupported
	}
	return err
}

// exchangeFunc is the system call; tests replace it to take the fallback.
var exchangeFunc = func(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
