#!/usr/bin/env bash
# Builds the corpus upstream judges the operator's model by (a maintainer's
# step, as root: upstream-startup.sh needs a mount namespace), and records
# upstream's verdicts as test data:
#
#   hack/llamastack/corpus.sh GIT_DIR [--extra DIR] [TAG...]
#
# For each TAG (default: every folder under operator/runconfig/distributions):
#   * the run configs the operator generates from the golden specs and from
#     FUZZ_SPEC_SEEDS (default 400) random specs (operator/runconfig FuzzSpec,
#     FuzzGenerate with FUZZ_SPEC_DUMP);
#   * UPSTREAM_SEEDS (default 300) seeded variants of upstream's own
#     distribution configs at TAG (seeds.py): the corpus of a line the
#     operator does not generate for yet is these alone;
#   * their wrong-type and unknown-key copies (mutate.py);
#   * with --extra DIR, the configs under DIR/TAG too (e.g. those an earlier
#     operator generated);
# each started by upstream's own start-up code at TAG (upstream-startup.sh),
# written to operator/runconfig/stackconfig/testdata/corpus/TAG.json: the
# config, its container environment, and upstream's verdict (accepted or the
# error; for an accepted one the keys upstream's models silently drop).
set -euo pipefail
git_dir=$1; shift
extra=
if [ "${1:-}" = --extra ]; then extra=$2; shift 2; fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=($(ls "$repo/operator/runconfig/distributions" | grep '^v'))
work=${UPSTREAM_WORK:-/var/tmp/llamastack-upstream}
dump=$work/corpus-dump
rm -rf "$dump"
(cd "$repo" && FUZZ_SPEC_SEEDS=${FUZZ_SPEC_SEEDS:-400} FUZZ_SPEC_DUMP=$dump \
  go test -tags containers_image_openpgp -count=1 -run 'FuzzSpec|FuzzGenerate' ./operator/runconfig/ >/dev/null)
for tag in "${tags[@]}"; do
  src=$work/$tag
  rm -rf "$src"; mkdir -p "$src"
  git --git-dir="$git_dir" archive "$tag" | tar -x -C "$src"
  pkg=$src # the folder holding upstream's package (llama_stack, ogx from 0.8.0): src/ from 0.4 on
  [ -d "$src/src" ] && pkg=$src/src
  name=llama_stack
  [ -d "$pkg/ogx" ] && name=ogx
  conf=run.yaml
  [ -n "$(ls "$pkg/$name"/distributions/*/config.yaml 2>/dev/null)" ] && conf=config.yaml
  python3 "$repo/hack/llamastack/seeds.py" --out "$dump/seeds-$tag" --seeds "${UPSTREAM_SEEDS:-300}" \
    "$pkg/$name"/distributions/*/$conf
  shopt -s nullglob
  set -- "$dump/$tag"/*.yaml "$dump/seeds-$tag"/*.yaml
  python3 "$repo/hack/llamastack/mutate.py" --schemas "$repo/operator/runconfig/distributions/$tag/schemas.json" \
    --out "$dump/mut-$tag" --max 60 "$dump/$tag"/stack-*.yaml "$dump/seeds-$tag"/*.yaml
  set -- "$@" "$dump/mut-$tag"/*.yaml
  shopt -u nullglob
  if [ -n "$extra" ] && [ -d "$extra/$tag" ]; then
    mkdir -p "$dump/extra-$tag"
    for f in "$extra/$tag"/*.yaml; do
      b=$(basename "$f" .yaml)
      cp "$f" "$dump/extra-$tag/extra-$b.yaml"
      [ -f "${f%.yaml}.env" ] && cp "${f%.yaml}.env" "$dump/extra-$tag/extra-$b.env"
    done
    set -- "$@" "$dump/extra-$tag"/*.yaml
  fi
  out=$repo/operator/runconfig/stackconfig/testdata/corpus/$tag.json
  mkdir -p "$(dirname "$out")"
  "$repo/hack/llamastack/upstream-startup.sh" --workdir /tmp --upstream "$pkg" "$@" |
    python3 "$repo/hack/llamastack/corpus_json.py" --tag "$tag" > "$out.tmp"
  mv "$out.tmp" "$out"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["configs"]; a=[x for x in c if x["accepted"]]
print("%s: %d configs, %d accepted (%d with silently dropped keys, %d keys), %d refused" % (d["tag"], len(c), len(a),
  sum(1 for x in a if x["dropped"]), sum(len(x["dropped"]) for x in a), len(c)-len(a)))' "$out"
done
