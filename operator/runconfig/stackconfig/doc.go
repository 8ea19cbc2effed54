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
// The model is stricter than upstream's pydantic models in one way: a key
// the model does not know is refused, where pydantic would drop it
// silently. Everything else follows upstream: required fields are required,
// ${env.NAME}, ${env.NAME:=default} and ${env.NAME:+value} are expanded as
// upstream's replace_env_vars does (an unset ${env.NAME} is an error), and a
// provider whose id expands to nothing is disabled. Check also reports every
// filesystem path the configuration makes the server write to, so the pod
// spec can be checked against them.
package stackconfig
