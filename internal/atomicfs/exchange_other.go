//go:build !linux

package atomicfs

// exchange is not available outside Linux: ReplaceDir renames instead.
func exchange(string, string) error { return errExchangeUnsupported }
