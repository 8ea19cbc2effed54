// Package olm runs OLM v1 for end-to-end tests without containers:
// catalogd and operator-controller (built by hack/olm.sh into bin/olm) run as
// plain processes against the real control plane of test/testenv, and the
// catalog and bundle images they pull come from an in-process registry on
// 127.0.0.1.
//
// Out of a cluster, three things a Pod would give them are made here:
//   - a service-account token at the in-cluster path: each binary runs in its
//     own mount namespace (`unshare -m`) with /run bind-mounted over a folder
//     holding a token from the TokenRequest API (what `kubectl create token`
//     calls);
//   - catalogd's serving certificate, signed by a CA made at start and trusted
//     by operator-controller;
//   - registry settings: a private HOME whose registries.conf sends
//     quay.io/inferencestack to the local registry over plain HTTP, so the
//     catalog's own image references are pulled unchanged.
//
// catalogd's mutating webhook does not run (there is no Service to reach it),
// so ApplyCatalog sets the label it would add. Every process dies with the test
// binary (PR_SET_PDEATHSIG), so a panic or a `go test -timeout` leaves nothing
// running.
package olm
