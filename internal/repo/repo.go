// Package repo finds the root of the Inference Stack repository, the folder
// every bundlegen default path (channels/, bundle/, catalog/, operator/config/)
// is relative to, so that the release tools work from any of its subfolders.
package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Markers are the entries that identify the repository root: the module's
// go.mod and the release inputs' folder.
var Markers = []string{"go.mod", "channels"}

// ErrNotFound says that no folder at or above the start holds the markers.
var ErrNotFound = errors.New("not inside the Inference Stack repository")

// Root returns the nearest folder at or above start (the working directory
// when empty) that holds go.mod and channels/.
func Root(start string) (string, error) {
	if start == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		start = wd
	}
	abs, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if IsRoot(dir) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: no folder at or above %s holds go.mod and channels/", ErrNotFound, abs)
		}
	}
}

// IsRoot reports whether dir holds go.mod (a file) and channels/ (a folder).
func IsRoot(dir string) bool {
	mod, err := os.Stat(filepath.Join(dir, Markers[0]))
	if err != nil || !mod.Mode().IsRegular() {
		return false
	}
	ch, err := os.Stat(filepath.Join(dir, Markers[1]))
	return err == nil && ch.IsDir()
}

// Protected are the repository folders that hold the release's inputs and
// its generated, committed artifacts, relative to the root: no verb writes
// inside one unless it owns it (bundle/ is `bundlegen bundle`'s, catalog/
// `bundlegen catalog`'s and `bundlegen graph`'s), and none writes into
// channels/ or operator/config/.
var Protected = []string{"bundle", "catalog", "channels", "operator/config"}

// ProtectedWhy says what a folder of Protected holds, for messages.
func ProtectedWhy(p string) string {
	switch p {
	case "bundle":
		return "it holds the releases' bundles, frozen once published, which only `bundlegen bundle` writes"
	case "catalog":
		return "it holds the catalog, which only `bundlegen catalog` and `bundlegen graph` write"
	case "channels":
		return "it holds the release inputs, the image lock and the published sum"
	case "operator/config":
		return "it holds the operator's manifests, the inputs of every bundle"
	}
	return "it is an input of the release"
}
