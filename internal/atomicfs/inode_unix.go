//go:build unix

package atomicfs

import (
	"io/fs"
	"syscall"
)

// devIno identifies the file st describes.
func devIno(st fs.FileInfo) (dev, ino uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), s.Ino //nolint:unconvert // Dev is int32 on some systems
	}
	return 0, 0
}
