// Package runconfig turns an InferenceStack spec into a Llama Stack run
// configuration: the YAML the server reads, its SHA-256, and the environment
// variables (literal values and Secret references) the server container needs.
//
// The pipeline is pure: no Kubernetes client, no clock, no I/O beyond the
// distribution base configs embedded in the binary. The same spec always
// gives the same bytes (what it keeps between calls, the parsed base configs
// and the model's verdicts, changes no result).
//
// Generate walks five stages, one file each (runconfig.go holds the walk):
//
//  1. spec (spec.go): the Llama Stack line of the operand pin
//     (stackconfig.LineOf: the line registry) and the distribution the
//     spec names;
//  2. line layout (layout.go): the line's layout, read from its
//     StackRunConfig schema (stackconfig.Line.Layout), decides how the
//     base config (upstream's run.yaml at the line's tag, or an empty one
//     for a custom image) is read and written, what an empty config holds
//     and where the stores go; nothing else branches on the line;
//  3. render (render.go, with one render_*.go file per part): overlay the
//     user's providers by id; remove disabled APIs with their providers and
//     every resource that points at them; register the user's models,
//     shields and tool groups; point the stores at the chosen backends
//     (sqlite, redis, postgres, or the operator-managed PostgreSQL of
//     spec.cache); write the server section (port, TLS files, Kubernetes
//     authentication); marshal deterministically in the layout;
//  4. validate (validate.go): the line's conformance model
//     (stackconfig.Check: upstream's derived JSON Schemas plus the semantic
//     rules upstream applies in code) with the container's environment,
//     then the pod's writable mounts; a refusal names the spec field that
//     wrote the offending value (specOrigins); the model's verdicts on the
//     last configs it accepted are kept by a digest of all it reads
//     (accepted), so stacks of one template are checked once;
//  5. result (result.go): the bytes, their hash, the environment and what
//     the check learnt (writable folders, server section).
//
// FromOverride runs stages 1, 4 and 5 on a run config the user wrote.
//
// Secrets never appear in the YAML: they are ${env.NAME} placeholders whose
// variables the returned Env fills from Secret keys.
package runconfig
