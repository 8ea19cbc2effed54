#!/usr/bin/env bash
# Regenerates everything that is generated and committed (`make generate
# manifests` plus the targets listed in VERIFY_TARGETS), then fails, naming the
# files, if any file's content changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

snapshot() {
	git ls-files -z --cached --others --exclude-standard | sort -zu |
		while IFS= read -r -d '' f; do
			if [[ -f $f ]]; then echo "$(sha256sum <"$f" | cut -c1-64) $f"; else echo "deleted $f"; fi
		done
}

before=$(snapshot)
make --no-print-directory generate manifests ${VERIFY_TARGETS:-}
after=$(snapshot)

if [[ "$before" != "$after" ]]; then
	echo "verify: regenerating changed these files; run 'make generate manifests ${VERIFY_TARGETS:-}' and commit them:" >&2
	diff <(echo "$before") <(echo "$after") | sed -n 's/^> [^ ]* /  /p' | sort -u >&2
	exit 1
fi
echo "verify: all generated files are up to date"
