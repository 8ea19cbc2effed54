// Command bundlegen makes the OLM bundles, file-based catalog and images of
// Inference Stack.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.NewCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
