// Package distributions holds, per upstream llamastack/llama-stack tag, the
// base config of each distribution the operator builds on (copied from
// llama_stack/distributions/<name>/run.yaml at the tag; from 0.7,
// src/llama_stack/distributions/<name>/config.yaml, and src/ogx/... at
// 0.8.0, for each distribution upstream publishes an image of) and facts.json, the
// facts about that tag's start-up the conformance model reads, and
// schemas.json, the JSON Schemas of its config models as pydantic emits them (derived from
// upstream's source by hack/llamastack/regenerate.sh; each fact names the
// upstream file it comes from). None of it is edited by hand.
package distributions

import "embed"

// FS is <tag>/<distribution>.yaml, <tag>/facts.json and <tag>/schemas.json.
//
//go:embed */*.yaml */facts.json */schemas.json
var FS embed.FS
