#!/usr/bin/env bash
# Regenerates the facts about Llama Stack the operator's model reads, from
# upstream's own source at each pinned tag (a maintainer's step: CI has no
# upstream checkout; review the diff like code).
#
#   hack/llamastack/regenerate.sh GIT_DIR [TAG...]
#
# GIT_DIR: a clone (bare is fine) of llamastack/llama-stack with the tags.
# For each TAG (default: every folder under operator/runconfig/distributions):
#   operator/runconfig/distributions/TAG/<name>.yaml     upstream's base config of
#       each distribution the folder holds (a new folder: each distribution
#       upstream publishes an image of, facts.json "images"), with a header
#   operator/runconfig/distributions/TAG/facts.json       derive_facts.py
#   operator/runconfig/distributions/TAG/schemas.json     derive_schemas.py: the
#       JSON Schemas of the run config model and of every provider's config
#       class, as pydantic emits them, with their extra behaviour
#   operator/runconfig/stackconfig/testdata/upstream/TAG/  every
#       <pkg>/distributions/*/run.yaml (config.yaml from 0.4 on) at TAG, and verdicts.json: what
#       upstream's own start-up (upstream-startup.sh, as root) says of each.
# Upstream's Python code is read from a checkout outside the repository and
# never copied into it; only its run.yaml files (data) and the facts are.
set -euo pipefail
git_dir=$1; shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=($(ls "$repo/operator/runconfig/distributions" | grep '^v'))
work=${UPSTREAM_WORK:-/var/tmp/llamastack-upstream}
# The environment upstream's own distributions are started with: what their
# run.yaml files require without a default (INFERENCE_MODEL must be a model
# meta-reference knows).
upstream_env=(--env INFERENCE_MODEL=meta-llama/Llama-3.2-3B-Instruct --env SAFETY_MODEL=meta-llama/Llama-Guard-3-1B)
for tag in "${tags[@]}"; do
  src=$work/$tag
  rm -rf "$src"; mkdir -p "$src"
  git --git-dir="$git_dir" archive "$tag" | tar -x -C "$src"
  pkg=$src # the folder holding upstream's package (llama_stack, ogx from 0.8.0): src/ from 0.4 on
  [ -d "$src/src" ] && pkg=$src/src
  name=llama_stack product="Llama Stack"
  [ -d "$pkg/ogx" ] && name=ogx product=OGX
  conf=run.yaml # a distribution's base config: config.yaml from 0.4 on
  [ -n "$(ls "$pkg/$name"/distributions/*/config.yaml 2>/dev/null)" ] && conf=config.yaml
  python3 -W ignore "$repo/hack/llamastack/derive_facts.py" --upstream "$src" --tag "$tag" \
    > "$repo/operator/runconfig/distributions/$tag/facts.json.tmp"
  mv "$repo/operator/runconfig/distributions/$tag/facts.json.tmp" "$repo/operator/runconfig/distributions/$tag/facts.json"
  python3 -W ignore "$repo/hack/llamastack/derive_schemas.py" --upstream "$src" --tag "$tag" \
    > "$repo/operator/runconfig/distributions/$tag/schemas.json.tmp"
  mv "$repo/operator/runconfig/distributions/$tag/schemas.json.tmp" "$repo/operator/runconfig/distributions/$tag/schemas.json"
  base=$repo/operator/runconfig/distributions/$tag
  dists=$(cd "$base" && ls *.yaml 2>/dev/null | sed 's/\.yaml$//')
  [ -n "$dists" ] || dists=$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["images"]["distributions"]))' "$base/facts.json")
  for d in $dists; do
    rel=${pkg#"$src"/}; rel=${rel#"$src"}; rel=${rel:+$rel/}$name/distributions/$d/$conf
    { echo "# Upstream $product $tag, $rel, unchanged below this header."
      echo "# The operator's base config of this distribution on this line (runconfig.load applies"
      echo "# the edits runconfig/doc.go lists); the conformance model (stackconfig) must accept it."
      cat "$src/$rel"; } > "$base/$d.yaml"
  done
  out=$repo/operator/runconfig/stackconfig/testdata/upstream/$tag
  rm -rf "$out"; mkdir -p "$out"
  for f in "$pkg/$name"/distributions/*/$conf; do
    d=$(basename "$(dirname "$f")")
    cp "$f" "$out/$d.yaml"
  done
  "$repo/hack/llamastack/upstream-startup.sh" --workdir /tmp --upstream "$pkg" "${upstream_env[@]}" "$out"/*.yaml |
    python3 -c '
import json, os, sys
tag, env = sys.argv[1], sys.argv[3:]
verdicts = {}
for line in sys.stdin:
    d = json.loads(line)
    v = {"accepted": d["ok"]}
    if not d["ok"]:
        v["error"] = d["error"].split("\n")[0]
    else:
        v["writes"] = d["writes"]
    verdicts[os.path.basename(d["file"])] = v
json.dump({"upstream": "llamastack/llama-stack", "tag": tag,
           "source": sys.argv[2],
           "checked_by": "hack/llamastack/upstream-startup.sh (upstream start-up code at the tag, pod-shaped sandbox)",
           "env": [e for e in env if e != "--env"], "home": "/tmp", "workdir": "/tmp",
           "verdicts": verdicts}, sys.stdout, indent=1, sort_keys=True)
print()' "$tag" "$name/distributions/<name>/$conf" "${upstream_env[@]}" > "$out/verdicts.json"
  echo "$tag: $(grep -c '"accepted": true' "$out/verdicts.json") accepted, $(grep -c '"accepted": false' "$out/verdicts.json") refused"
done
