//go:build !unix

package atomicfs

// lock is a no-op where flock(2) does not exist: concurrent runs are not
// serialized there.
func lock(string) (func(), error) { return func() {}, nil }
