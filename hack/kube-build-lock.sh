# Sourced by hack/controlplane.sh and hack/node.sh: both build binaries of
# the wrapper module hack/controlplane/kube, which share most of their
# packages. Run side by side (make test, .ci/run), two go builds would
# compile each shared package twice at once, since the Go build cache does
# not coordinate concurrent builds; on a cold 2-core machine that doubled
# minutes of compiling. kube_build_lock waits until no other build of the
# wrapper runs in this build cache, so the second one finds those packages
# compiled. The lock is released by kube_build_unlock, or when the script
# ends.

kube_build_lock() {
	local cache
	cache=$(go env GOCACHE)
	mkdir -p "$cache"
	exec {kube_build_fd}>"$cache/inferencestack-kube-build.lock"
	if ! flock -n "$kube_build_fd"; then
		echo "${0##*/}: waiting for the other build of hack/controlplane/kube in $cache to end (its packages are shared)..."
		flock "$kube_build_fd"
	fi
}

kube_build_unlock() {
	flock -u "$kube_build_fd"
	exec {kube_build_fd}>&-
}
