// Command bundlegen cuts releases of the Inference Stack operator: OLM
// bundles, the operand pin, the file-based catalog, its validation and upgrade
// graph (see docs/release.md and docs/catalog.md).
//
// Exit codes: 0 success, 1 any error (including validation errors).
package main

import (
	"os"

	"github.com/inferencestack/inferencestack/tools/bundlegen/root"
)

func main() {
	os.Exit(root.Main(os.Args[1:], os.Stdout, os.Stderr))
}
