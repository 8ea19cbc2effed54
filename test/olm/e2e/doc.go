// Package e2e holds the OLM v1 end-to-end tests (build tag e2e; run them with
// `make test-e2e`): the release's catalog and bundles, served from an
// in-process registry, are installed and upgraded by real catalogd and
// operator-controller processes (package olm) on a real control plane,
// and the installed operator runs with only what OLM installed for it.
package e2e
