#!/usr/bin/env bash
# Runs hack/llamastack/upstream_startup.py (upstream Llama Stack's own start-up
# code over run configs) in a sandbox shaped like the server's pod: a read-only
# root filesystem, writable /var/lib/llama-stack (the state volume) and /tmp
# (an emptyDir, also $HOME), and the working directory on the read-only root,
# as /app is in upstream's images. Needs root (a private mount namespace).
#
#   hack/llamastack/upstream-startup.sh [--workdir DIR] --upstream DIR [--env N=V ...] FILE...
#
# --workdir is the server's working directory (default /, read-only like /app
# in upstream's images). The operator's pods run in /var/lib/llama-stack, the
# state volume (runconfig.WorkDir): pass --workdir /var/lib/llama-stack to
# check where a 0.2/0.3 server without external_providers_dir makes its
# "None" folder as the pod has it.
# DIR is an upstream llamastack/llama-stack checkout at the line's tag; it and
# the files must not be under /tmp (the sandbox hides it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
workdir=/
if [ "${1:-}" = --workdir ]; then workdir=$2; shift 2; fi
export SANDBOX_WORKDIR=$workdir
exec unshare -m sh -c '
  mount --make-rprivate / &&
  mount -t tmpfs tmpfs /tmp &&
  mkdir -p /var/lib/llama-stack && mount -t tmpfs tmpfs /var/lib/llama-stack &&
  mount -o remount,ro,bind / &&
  cd "$SANDBOX_WORKDIR" && exec python3 -W ignore "$0" --home /tmp "$@"' "$here/upstream_startup.py" "$@"
