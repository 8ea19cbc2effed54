// Package stackconfig is a conformance model of Llama Stack's run
// configuration (StackRunConfig, llama_stack/core/datatypes.py) at the
// versions the operator's releases pin, one model per Llama Stack line:
//
//   - Line02, checked against llamastack/llama-stack v0.2.23: stores are
//     inline (metadata_store, inference_store, a provider's kvstore or
//     persistence_store with a type and a db_path), resources are top-level
//     lists, telemetry is an API with providers.
//   - Line03, checked against llamastack/llama-stack v0.3.0: a required
//     top-level storage section names backends (kv_sqlite, sql_postgres, ...)
//     and stores; providers refer to a backend by name with a namespace or a
//     table name; resources live under registered_resources; telemetry is a
//     top-level setting. A 0.2-shaped file fails validation at start.
//
// Every key and value is judged by upstream's own models: the JSON Schemas
// pydantic emits for StackRunConfig and for every provider's config class
// at the line's tag (distributions/<tag>/schemas.json, derived by
// hack/llamastack/derive_schemas.py; schema.go validates with
// santhosh-tekuri/jsonschema). The model is stricter than upstream in one
// way, the same at every level (strict): a key upstream's model would drop
// silently (extra="ignore") is refused, unless it carries no setting. The
// semantic rules upstream applies in code (dependencies, resources naming
// providers, stores) are checked beside the schemas. Everything else follows upstream: required fields are required,
// ${env.NAME}, ${env.NAME:=default} and ${env.NAME:+value} are expanded as
// upstream's replace_env_vars does (an unset ${env.NAME} is an error), and a
// provider whose id expands to nothing is disabled. Check also reports every
// filesystem path the configuration makes the server write to, so the pod
// spec can be checked against them.
package stackconfig
