#!/usr/bin/env bash
# Prepares the real one-node cluster of the node tests (test/node):
#   - kubelet, kube-scheduler and kube-proxy, built from the Go module proxy out
#     of the same wrapper module as the control plane (hack/controlplane/kube,
#     whose go.mod and go.sum pin every version), into $NODE_BIN (default
#     bin/node). The build is skipped when a stamp there says they were built
#     from the same wrapper module and Go release;
#   - kube-router, whose network policy controller (alone: no routing, no
#     service proxy) enforces NetworkPolicy on the node, built the same way
#     out of its own wrapper module (hack/kube-router) into $NODE_BIN, with a
#     stamp of its own: it is rebuilt only when its pin changes;
#   - containerd, runc, the CNI plugins, iptables, conntrack and ipset from the
#     distribution (Debian or Ubuntu: apt-get), installed when missing, and the
#     kernel's br_netfilter (bridged pod traffic through iptables, which the
#     policy controller's rules need), loaded when missing. That needs root, as
#     running the node does; without it the script says what to do and fails.
# No prebuilt Kubernetes binary and no container image is downloaded.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${NODE_BIN:-$root/bin/node}
wrapper=$root/hack/controlplane/kube
router_wrapper=$root/hack/kube-router

# --- Host packages ----------------------------------------------------------

# The Debian/Ubuntu packages providing what the node runs, and a file each installs.
packages=(containerd runc containernetworking-plugins iptables conntrack ipset)
cni_dirs=(/usr/lib/cni /opt/cni/bin)

missing_tools() {
	local missing=()
	for tool in containerd containerd-shim-runc-v2 runc iptables conntrack ipset ip nsenter unshare; do
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

# --- br_netfilter -------------------------------------------------------------

# Pods on the node's bridge talk through it without routing: only with
# br_netfilter do those frames pass iptables, where the policy controller
# filters them (test/node turns net.bridge.bridge-nf-call-iptables on in the
# node's own network namespace). The module is machine-wide; built into the
# kernel it needs nothing.
if [[ ! -d /proc/sys/net/bridge ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "node: the kernel's br_netfilter is not loaded: load it as root (modprobe br_netfilter)." >&2
		exit 1
	fi
	echo "node: loading br_netfilter..."
	if ! modprobe br_netfilter || [[ ! -d /proc/sys/net/bridge ]]; then
		echo "node: cannot load br_netfilter (modprobe br_netfilter): NetworkPolicy cannot be enforced on bridged pod traffic." >&2
		exit 1
	fi
fi

# --- Go builds ------------------------------------------------------------------

mkdir -p "$out"
# No DWARF from the compiler (the binaries are stripped of it anyway): a
# tenth less CPU cold. Every script building a wrapper uses the same flags, so
# that the kube wrapper's packages are shared between hack/controlplane.sh
# and hack/node.sh in the build cache.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -gcflags=all=-dwarf=false"

# pinned prints the version of module $2 in go.mod $1 (`require m v` or in a block).
pinned() { sed -nE "s#^(require)?[[:space:]]*$2[[:space:]]+(v[^[:space:]]+).*#\2#p" "$1" | head -1; }

# download fetches the modules of wrapper module $1 for $2.
download() {
	if ! (cd "$1" && go mod download) >"$out/.download.log" 2>&1; then
		cat "$out/.download.log" >&2
		echo "node: cannot fetch the modules of $1 ($2) from the Go module proxy ($(go env GOPROXY))." >&2
		echo "node: check the network or GOPROXY, then run 'make node' again." >&2
		exit 1
	fi
}

# --- kube-router (the network policy controller) -----------------------------

router_module=github.com/cloudnativelabs/kube-router/v2
router_version=$(pinned "$router_wrapper/go.mod" "$router_module")
if [[ -z $router_version ]]; then
	echo "node: cannot read the pinned $router_module version from $router_wrapper/go.mod" >&2
	exit 1
fi
want="kube-router $router_version, go.sum $(cat "$router_wrapper/go.sum" "$router_wrapper/go.mod" | sha256sum | cut -c1-16), $(go env GOVERSION)"
stamp=$out/.stamp-kube-router
if [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $out/kube-router ]]; then
	echo "node: up to date in $out ($want)"
else
	rm -f "$stamp"
	echo "node: downloading modules for kube-router $router_version..."
	download "$router_wrapper" "kube-router $router_version"
	start=$SECONDS
	echo "node: building kube-router $router_version (cold: minutes; the Go build cache makes later builds quick)..."
	(cd "$router_wrapper" && go build -trimpath -ldflags "-s -w -X $router_module/pkg/version.Version=$router_version" \
		-o "$out/kube-router" "$router_module/cmd/kube-router")
	echo "node: built kube-router in $((SECONDS - start))s"
	echo "$want" >"$stamp"
fi

# --- kubelet, kube-scheduler, kube-proxy -------------------------------------

kube_version=$(pinned "$wrapper/go.mod" k8s.io/kubernetes)
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
else
	rm -f "$stamp"
	echo "node: downloading modules for Kubernetes $kube_version..."
	download "$wrapper" "Kubernetes $kube_version"
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
	# One go build for the three (their shared packages compiled once),
	# under the lock that keeps hack/controlplane.sh's build of the same
	# wrapper from compiling the same packages at the same time.
	. "$root/hack/kube-build-lock.sh"
	kube_build_lock
	start=$SECONDS
	echo "node: building ${binaries[*]} $kube_version (cold: minutes; the Go build cache makes later builds quick)..."
	(cd "$wrapper" && go build -trimpath -ldflags "$ldflags" -o "$out/" "${binaries[@]/#/k8s.io/kubernetes/cmd/}")
	echo "node: built ${binaries[*]} in $((SECONDS - start))s"
	kube_build_unlock
	echo "$want" >"$stamp"
fi

echo "node: ready in $out"
