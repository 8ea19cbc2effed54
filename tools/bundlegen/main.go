// Command bundlegen cuts releases of the Inference Stack operator: OLM
// bundles, the operand pin, the file-based catalog, its validation and upgrade
// graph (see docs/release.md and docs/catalog.md).
//
// Exit codes: 0 success, 1 any error (including validation errors).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels ctx, which every verb honours (a write past
	// its commit point still finishes); a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := root.NewCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
