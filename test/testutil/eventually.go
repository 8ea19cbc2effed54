package testutil

import (
	"testing"
	"time"
)

// Eventually retries f every 100ms until it succeeds, failing the test
// with f's last error, naming what it waited for, after timeout.
func Eventually(t testing.TB, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
