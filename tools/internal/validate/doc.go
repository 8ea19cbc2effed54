// Package validate checks release artifacts. Catalog checks a file-based
// catalog with operator-registry's model validation plus the upgrade-graph
// checks it misses; each problem is a Finding naming package, channel and bundle.
package validate
