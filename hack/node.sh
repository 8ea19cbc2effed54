#!/usr/bin/env bash
# Prepares the real one-node cluster of the node tests (test/node):
#   - kubelet, kube-scheduler and kube-proxy, built from the Go module proxy out
#     of the same wrapper module as the control plane (hack/controlplane/kube,
#     whose go.mod and go.sum pin every version), into $NODE_BIN (default
#     bin/node). The build is skipped when a stamp there says they were built
#     from the same wrapper module and Go release;
#   - containerd, runc, the CNI plugins, iptables and conntrack from the
#     distribution (Debian or Ubuntu: apt-get), installed when missing. That
#     needs root, as running the node does; without it the script says what to
#     install and fails.
# No prebuilt Kubernetes binary and no container image is downloaded.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${NODE_BIN:-$root/bin/node}
wrapper=$root/hack/controlplane/kube

# --- Host packages ----------------------------------------------------------

# The Debian/Ubuntu packages providing what the node runs, and a file each installs.
packages=(containerd runc containernetworking-plugins iptables conntrack)
cni_dirs=(/usr/lib/cni /opt/cni/bin)

missing_tools() {
	local missing=()
	for tool in containerd containerd-shim-runc-v2 runc iptables conntrack ip nsenter unshare; do
		command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
	done
	local found=
	for d in "${cni_dirs[@]}"; do
		if [[ -x $d/bridge && -x $d/host-local && -x $d/loopback && -x $d/portmap ]]; then found=$d; fi
	done
	[[ -n $found ]] || missing+=("CNI plugins (bridge, host-local, loopback, portmap in ${cni_dirs[*]})")
	echo "${missing[*]}"
}

missing=$(missing_tools)
if [[ -n $missing ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "node: missing on this machine: $missing." >&2
		echo "node: install them as root: apt-get install -y ${packages[*]} (the node tests run as root too)." >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null; then
		echo "node: missing on this machine: $missing; there is no apt-get to install ${packages[*]}: install their equivalents." >&2
		exit 1
	fi
	echo "node: installing ${packages[*]} (missing: $missing)..."
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${packages[@]}" >"${TMPDIR:-/tmp}/node-apt.log" 2>&1; then
		# Stale package lists are the usual cause: refresh them once.
		apt-get update >>"${TMPDIR:-/tmp}/node-apt.log" 2>&1 || true
		if ! apt-get install -y --no-install-recommends "${packages[@]}" >>"${TMPDIR:-/tmp}/node-apt.log" 2>&1; then
			tail -20 "${TMPDIR:-/tmp}/node-apt.log" >&2
			echo "node: apt-get install ${packages[*]} failed (log above, in full in ${TMPDIR:-/tmp}/node-apt.log)." >&2
			exit 1
		fi
	fi
	missing=$(missing_tools)
	if [[ -n $missing ]]; then
		echo "node: still missing after installing ${packages[*]}: $missing." >&2
		exit 1
	fi
	echo "node: installed: $(containerd --version | head -1); $(runc --version | head -1)"
fi

# --- kubelet, kube-scheduler, kube-proxy -------------------------------------

kube_version=$(sed -nE "s#^(require)?[[:space:]]*k8s.io/kubernetes[[:space:]]+(v[^[:space:]]+).*#\2#p" "$wrapper/go.mod" | head -1)
if [[ -z $kube_version ]]; then
	echo "node: cannot read the pinned k8s.io/kubernetes version from $wrapper/go.mod" >&2
	exit 1
fi
want="kubelet+kube-scheduler+kube-proxy $kube_version, go.sum $(cat "$wrapper/go.sum" "$wrapper/go.mod" | sha256sum | cut -c1-16), $(go env GOVERSION)"
stamp=$out/.stamp
binaries=(kubelet kube-scheduler kube-proxy)

current=true
[[ -f $stamp && "$(cat "$stamp")" == "$want" ]] || current=false
for b in "${binaries[@]}"; do [[ -x $out/$b ]] || current=false; done
if $current; then
	echo "node: up to date in $out ($want)"
	exit 0
fi

mkdir -p "$out"
rm -f "$stamp"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly

echo "node: downloading modules for Kubernetes $kube_version..."
if ! (cd "$wrapper" && go mod download) >"$out/.download.log" 2>&1; then
	cat "$out/.download.log" >&2
	echo "node: cannot fetch the modules of $wrapper from the Go module proxy ($(go env GOPROXY))." >&2
	echo "node: check the network or GOPROXY, then run 'make node' again." >&2
	exit 1
fi

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
for b in "${binaries[@]}"; do
	start=$SECONDS
	echo "node: building $b $kube_version (cold: minutes; the Go build cache makes later builds quick)..."
	(cd "$wrapper" && go build -trimpath -ldflags "$ldflags" -o "$out/$b" "k8s.io/kubernetes/cmd/$b")
	echo "node: built $b in $((SECONDS - start))s"
done

echo "$want" >"$stamp"
echo "node: ready in $out"
