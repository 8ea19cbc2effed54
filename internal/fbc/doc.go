// Package fbc renders a package's file-based catalog (FBC) from its semver
// template in channels/ and the bundle directories under bundle/, using
// operator-registry's own semver template and render action, so no registry
// or container engine is needed. It then applies the catalog extras kept in
// channels/<package>.release.yaml (image reference template, default channel,
// deprecations, opt-in cross-major bridges) and writes
// catalog/<package>/catalog.yaml deterministically and atomically.
//
// Load reads a catalog folder into the upgrade graph of package olmgraph,
// which the graph and upgrades packages use without importing
// operator-registry.
package fbc
