// Package jsonout writes a verb's result for `-o json`: indented JSON, one
// document, as every verb that has that output prints it.
package jsonout

import (
	"encoding/json"
	"io"
)

// Write writes v to w as indented JSON and a newline.
func Write(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
