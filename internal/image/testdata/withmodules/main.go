// Command withmodules is a tiny program that links a Go module besides the
// standard library, so that its build info lists one for the operator SBOM
// test.
package main

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
)

func main() { fmt.Println(cmp.Diff(1, 2)) }
