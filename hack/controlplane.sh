#!/usr/bin/env bash
# Builds the real Kubernetes control plane the tests run against — etcd,
# kube-apiserver and kube-controller-manager — from the Go module proxy, out of
# the wrapper modules in hack/controlplane/{etcd,kube} (their go.mod and go.sum
# pin every version). No prebuilt binary is downloaded.
#
# Output: $CONTROLPLANE_BIN (default bin/controlplane), the folder tests use as
# KUBEBUILDER_ASSETS. The build is skipped when a stamp there says the binaries
# were built from the same wrapper modules.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${CONTROLPLANE_BIN:-$root/bin/controlplane}
wrappers=$root/hack/controlplane

# The pinned version of a module in a wrapper's go.mod (`require m v` or inside a block).
pinned() { sed -nE "s#^(require)?[[:space:]]*$2[[:space:]]+(v[^[:space:]]+).*#\2#p" "$1" | head -1; }
kube_version=$(pinned "$wrappers/kube/go.mod" k8s.io/kubernetes)
etcd_version=$(pinned "$wrappers/etcd/go.mod" go.etcd.io/etcd/server/v3)
if [[ -z $kube_version || -z $etcd_version ]]; then
	echo "controlplane: cannot read the pinned versions from $wrappers/{kube,etcd}/go.mod" >&2
	exit 1
fi
want="kube-apiserver+kube-controller-manager $kube_version, etcd $etcd_version, go.sum $(cat "$wrappers"/*/go.sum "$wrappers"/*/go.mod | sha256sum | cut -c1-16), $(go env GOVERSION)"
stamp=$out/.stamp

if [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $out/etcd && -x $out/kube-apiserver && -x $out/kube-controller-manager ]]; then
	echo "controlplane: up to date in $out ($want)"
	exit 0
fi

mkdir -p "$out"
rm -f "$stamp"
# No DWARF from the compiler (the binaries are stripped of it anyway): a
# tenth less CPU cold. Every script building a wrapper uses the same flags, so
# that the kube wrapper's packages are shared between hack/controlplane.sh
# and hack/node.sh in the build cache.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -gcflags=all=-dwarf=false"

step() {
	local what=$1 dir=$2
	shift 2
	local start=$SECONDS
	echo "controlplane: downloading modules for $what..."
	if ! (cd "$dir" && go mod download) >"$out/.download.log" 2>&1; then
		cat "$out/.download.log" >&2
		echo "controlplane: cannot fetch the modules of $dir from the Go module proxy ($(go env GOPROXY))." >&2
		echo "controlplane: check the network or GOPROXY, then run 'make controlplane' again." >&2
		exit 1
	fi
	echo "controlplane: building $what (a cold build takes minutes; the Go build cache makes later ones quick)..."
	(cd "$dir" && go build -trimpath "$@")
	echo "controlplane: built $what in $((SECONDS - start))s"
}

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
step "etcd $etcd_version" "$wrappers/etcd" -ldflags "-s -w" -o "$out/etcd" .
# One go build for both: the packages they share are compiled once. The
# lock (hack/kube-build-lock.sh) keeps hack/node.sh's build of the same
# wrapper's kubelet, kube-scheduler and kube-proxy from compiling those
# packages at the same time (make test and .ci/run build both side by side):
# whichever comes second finds them in the build cache.
. "$root/hack/kube-build-lock.sh"
kube_build_lock
step "kube-apiserver and kube-controller-manager $kube_version" "$wrappers/kube" -ldflags "$ldflags" -o "$out/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
kube_build_unlock

echo "$want" >"$stamp"
echo "controlplane: ready in $out"
