#!/usr/bin/env bash
# Builds OLM v1 — catalogd and operator-controller — for the end-to-end tests,
# from the Go module proxy, out of the wrapper module in hack/olm (its go.mod and
# go.sum pin every version, operator-controller's own replace block included).
# No prebuilt binary or container image is downloaded.
#
# Output: $OLM_BIN (default bin/olm) holding catalogd, operator-controller and
# crd/ (the ClusterCatalog and ClusterExtension CRDs, copied from the module
# source at the pinned version). The build is skipped when a stamp there says
# they were built from the same wrapper module.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OLM_BIN:-$root/bin/olm}
wrapper=$root/hack/olm
module=github.com/operator-framework/operator-controller

version=$(sed -nE "s#^(require)?[[:space:]]*$module[[:space:]]+(v[^[:space:]]+).*#\2#p" "$wrapper/go.mod" | head -1)
if [[ -z $version ]]; then
	echo "olm: cannot read the pinned $module version from $wrapper/go.mod" >&2
	exit 1
fi
want="catalogd+operator-controller $version, go.sum $(cat "$wrapper/go.sum" "$wrapper/go.mod" | sha256sum | cut -c1-16), $(go env GOVERSION)"
stamp=$out/.stamp

if [[ -f $stamp && "$(cat "$stamp")" == "$want" && -x $out/catalogd && -x $out/operator-controller &&
	-f $out/crd/clustercatalogs.yaml && -f $out/crd/clusterextensions.yaml ]]; then
	echo "olm: up to date in $out ($want)"
	exit 0
fi

mkdir -p "$out/crd"
rm -f "$stamp"
# No DWARF from the compiler (the binaries are stripped of it anyway): a
# tenth less CPU cold. Every script building a wrapper uses the same flags, so
# that the kube wrapper's packages are shared between hack/controlplane.sh
# and hack/node.sh in the build cache.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -gcflags=all=-dwarf=false"
start=$SECONDS

echo "olm: downloading modules for OLM v1 $version..."
if ! (cd "$wrapper" && go mod download) >"$out/.download.log" 2>&1; then
	cat "$out/.download.log" >&2
	echo "olm: cannot fetch the modules of $wrapper from the Go module proxy ($(go env GOPROXY))." >&2
	echo "olm: check the network or GOPROXY, then run 'make olm' again." >&2
	exit 1
fi

src=$(cd "$wrapper" && go list -m -f '{{.Dir}}' "$module")
cp "$src/config/base/catalogd/crd/standard/olm.operatorframework.io_clustercatalogs.yaml" "$out/crd/clustercatalogs.yaml"
cp "$src/config/base/operator-controller/crd/standard/olm.operatorframework.io_clusterextensions.yaml" "$out/crd/clusterextensions.yaml"
chmod u+w "$out"/crd/*.yaml

echo "olm: building catalogd and operator-controller $version (a cold build takes about 5 minutes on 2 cores)..."
(cd "$wrapper" && go build -trimpath -tags containers_image_openpgp -ldflags "-s -w" -o "$out/" \
	"$module/cmd/catalogd" "$module/cmd/operator-controller")

echo "$want" >"$stamp"
echo "olm: ready in $out (${version}, $((SECONDS - start))s)"
