// Package stackconfig is a conformance model of Llama Stack's run
// configuration (StackRunConfig, llama_stack/core/datatypes.py, up to 0.3;
// StackConfig read from config.yaml from 0.7, src/llama_stack/ and, renamed
// OGX at 0.8.0, src/ogx/) at the versions the operator's releases pin.
//
// Everything it knows of a line is data: line.go is the registry (a line's
// upstream tag and versions, the only place in the operator naming a
// line); distributions/<tag>/schemas.json holds the JSON Schemas pydantic
// emits for StackRunConfig and for every provider's config class at the tag
// (hack/llamastack/derive_schemas.py), distributions/<tag>/facts.json the
// facts of upstream's start-up (hack/llamastack/derive_facts.py). A line's
// Layout (InlineStores at 0.2: inline stores, top-level resource lists;
// StorageBackends from 0.3: storage.backends and storage.stores,
// registered_resources) is read from its StackRunConfig schema. A line the
// registry lacks is an error everywhere, never another line's behaviour.
// What other packages read of a line (its start command, variables, header,
// image repository, APIs, resource types, default tables) are Line's
// accessors in linefacts.go, each reading facts.json.
//
// Every key and value is judged by upstream's own models (schema.go
// validates with santhosh-tekuri/jsonschema). The model is stricter than
// upstream in one way, the same at every level (strict): a key upstream's
// model would drop silently (extra="ignore") is refused, unless it carries
// no setting. Beside the schemas, the semantic rules upstream applies in
// code, each named after the function it mirrors: the start-up checks of
// facts.go (resolver.py's dependency closure, register_resources' routing
// tables, the stores Stack.initialize needs), common.go's validators
// (parse_and_maybe_upgrade_config, validate_api_server_url,
// validate_claims_mapping, AccessRule.validate_rule_format), v03.go's
// (validate_server_stores, validate_table_name, the backend resolution of
// kvstore_impl and sqlstore_impl) and where the server writes (v02.go,
// v03.go, stores.go). ${env.NAME}, ${env.NAME:=default} and
// ${env.NAME:+value} are expanded as upstream's replace_env_vars does (an
// unset ${env.NAME} is an error), and a provider whose id expands to nothing
// is disabled; from 0.7 on also what facts.json env_expansion says (auth off
// when its type expands to nothing, resources whose id does dropped), and a
// config without storage gets StackConfig's defaults (storage_defaults). Check also reports every filesystem path the configuration
// makes the server write to, so the pod spec can be checked against them.
package stackconfig
