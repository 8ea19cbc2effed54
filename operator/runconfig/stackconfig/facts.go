package stackconfig

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
)

// Facts are what upstream's source at a line's tag says about start-up:
// read from distributions/<tag>/facts.json, which
// hack/llamastack/derive_facts.py derives from an upstream checkout. Each
// fact names the upstream file it comes from.
type Facts struct {
	// Tag is the upstream tag the facts were derived at.
	Tag string `json:"tag"`
	// RoutedAPIs are the APIs the stack routes itself: the router API
	// (inference) is served whatever the providers, its routing table
	// (models) holds the resources registered at start.
	RoutedAPIs []RoutedAPI `json:"routed_apis"`
	// InternalAPIs are served by the stack itself (inspect, providers, ...).
	InternalAPIs []string `json:"internal_apis"`
	// ConfigDir is where the server keeps what a run config does not place.
	ConfigDir struct {
		Default string `json:"default"`
		Env     string `json:"env"`
		Source  string `json:"source"`
		// Legacy is the folder an older line used, which the server's
		// start moves to Default when Env is unset (0.8.0: ~/.llama to
		// ~/.ogx); nil where there is none.
		Legacy *LegacyConfigDir `json:"legacy"`
	} `json:"config_dir"`
	// StateEnv are the environment variables that move a path the server
	// writes (its state), from upstream's run.yaml defaults and
	// config_dirs.py.
	StateEnv []StateEnv `json:"state_env"`
	// Rules are start-up checks that live in code, with upstream's message.
	Rules []Rule `json:"rules"`
	// ImplicitWrites are paths the server writes that the config does not name.
	ImplicitWrites []ImplicitWrite `json:"implicit_writes"`
	// ServerStores are the server's own stores (registry, prompts,
	// conversations): what a restarted server reads back.
	ServerStores []ServerStoreFact `json:"server_stores"`
	// HistoryStores are the stores of what clients asked and were
	// answered: inference (chat completions) and responses. 0.2 and 0.3
	// hard-code their tables; 0.7 honours the config's table_name.
	HistoryStores []ServerStoreFact `json:"history_stores"`
	// Providers are the provider types of each API.
	Providers map[string]map[string]ProviderFact `json:"providers"`
	// ServerAPI is what the operator reads of a running server (health,
	// version, providers) and how the server answers it.
	ServerAPI ServerAPIFacts `json:"server_api"`
	// Launch is how the server starts (launch.go).
	Launch Launch `json:"launch"`
	// RegistryKey is how the server keys its registry's entries in the
	// metadata store.
	RegistryKey RegistryKeyFact `json:"registry_key"`
	// ModelIdentifier is how register_model names a registered model.
	ModelIdentifier ModelIdentifierFact `json:"model_identifier"`
	// Package is upstream's Python package at the tag: llama_stack, or
	// ogx from 0.8.0 (the project was renamed OGX).
	Package SourcedName `json:"package"`
	// CLI is the command that starts the server (cli/stack/run.py).
	CLI CLIFact `json:"cli"`
	// ClientVersionHeader is the request header the server compares with
	// its own version (core/server/server.py).
	ClientVersionHeader SourcedName `json:"client_version_header"`
	// Images are the distribution images upstream publishes.
	Images ImagesFact `json:"images"`
	// APIs are the values of upstream's Api enum: every API the line knows
	// (providers', routed and internal ones).
	APIs ValuesFact `json:"apis"`
	// ResourceTypes are the values of upstream's ResourceType: the kinds
	// of the registry's entries.
	ResourceTypes ValuesFact `json:"resource_types"`
	// PostgresDefaults are the PostgreSQL backends' defaults.
	PostgresDefaults PostgresDefaultsFact `json:"postgres_defaults"`
	// EnvExpansion is what replace_env_vars does besides substituting.
	EnvExpansion EnvExpansionFact `json:"env_expansion"`
	// StorageDefaults are the storage backends of a config that names
	// none (0.7 on; empty where storage is required).
	StorageDefaults StorageDefaultsFact `json:"storage_defaults"`
}

// StorageDefaultsFact is StorageConfig's default backends (0.7 on,
// core/storage/datatypes.py _default_backends): each db_path is under
// ${base}, which is $BaseEnv (~ expanded) or BaseDefault (in terms of the
// config folder's variable) when that is unset or empty.
type StorageDefaultsFact struct {
	Backends    map[string]map[string]any `json:"backends"`
	BaseEnv     string                    `json:"base_env"`
	BaseDefault string                    `json:"base_default"`
	Source      string                    `json:"source"`
	Evidence    string                    `json:"evidence"`
}

// EnvExpansionFact is what upstream's replace_env_vars (core/stack.py)
// does besides substituting placeholders, from 0.4 on.
type EnvExpansionFact struct {
	// AuthOffWhenTypeEmpty: a server.auth whose provider_config.type
	// expands to nothing gets provider_config null (auth off), the rest of
	// provider_config unexpanded.
	AuthOffWhenTypeEmpty bool `json:"auth_off_when_type_empty"`
	// SkipEmptyIDFields: a list element (a mapping) one of whose fields of
	// these names expands to nothing is dropped (RESOURCE_ID_FIELDS).
	SkipEmptyIDFields []string `json:"skip_empty_id_fields"`
	Source            string   `json:"source"`
}

// LegacyConfigDir is an older line's config folder the server moves at
// start (core/utils/config_dirs.py migrate_legacy_config_dir).
type LegacyConfigDir struct {
	// Path is the old folder, in terms of ~.
	Path string `json:"path"`
	// MovedUnlessEnvSet: the move happens only when the config folder's
	// variable is unset (and the old folder exists, the new one not).
	MovedUnlessEnvSet bool   `json:"moved_unless_env_set"`
	Evidence          string `json:"evidence"`
	CalledFrom        string `json:"called_from"`
}

// SourcedName is a name upstream's code fixes, with the file it is in.
type SourcedName struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Evidence string `json:"evidence"`
}

// CLIFact is the command line that starts the server: Command is the argv
// before the config path (`llama stack run`, `ogx stack run` at 0.8.0),
// Program its console script (pyproject.toml [project.scripts]).
type CLIFact struct {
	Command       []string `json:"command"`
	Program       string   `json:"program"`
	Source        string   `json:"source"`
	Evidence      string   `json:"evidence"`
	ProgramSource string   `json:"program_source"`
}

// ImagesFact is where upstream publishes its distribution images: an
// image is RepositoryPrefix+<distribution>:<version>. Distributions are
// those upstream's build-distributions workflow builds (empty where the
// tag has no such workflow: the prefix is then read from the image
// scripts/install.sh runs).
type ImagesFact struct {
	RepositoryPrefix string   `json:"repository_prefix"`
	Distributions    []string `json:"distributions"`
	Source           string   `json:"source"`
	Evidence         string   `json:"evidence"`
}

// ValuesFact is the values of an upstream enum, sorted.
type ValuesFact struct {
	Values []string `json:"values"`
	Source string   `json:"source"`
}

// PostgresDefaultsFact are the defaults of the kv_postgres and
// sql_postgres backends' config classes.
type PostgresDefaultsFact struct {
	KV  PostgresBackendDefaults `json:"kv"`
	SQL PostgresBackendDefaults `json:"sql"`
}

// PostgresBackendDefaults are one PostgreSQL backend's defaults: its
// database and (kv) its table.
type PostgresBackendDefaults struct {
	Class     string `json:"class"`
	DB        string `json:"db"`
	TableName string `json:"table_name"`
	Source    string `json:"source"`
}

// ModelIdentifierFact is how the models routing table's register_model
// (core/routing_tables/models.py) names a model: provider_id/
// provider_model_id, or, where AliasWhenRenamed (v0.2.23), the model_id
// itself when it differs from provider_model_id.
//
// Suffix is what follows provider_id/: provider_model_id (0.2 to 0.7) or
// model_id (0.8.0, where KeepsPrefixed: a model_id that already starts
// with provider_id/ is the identifier as it is).
type ModelIdentifierFact struct {
	AliasWhenRenamed bool   `json:"alias_when_renamed"`
	Suffix           string `json:"suffix"`
	KeepsPrefixed    bool   `json:"keeps_prefixed"`
	Source           string `json:"source"`
}

// RegistryKeyFact is KEY_VERSION of the server's registry
// (core/store/registry.py): entries are keyed
// distributions:registry:<Version>::<type>:<identifier>.
type RegistryKeyFact struct {
	Version string `json:"version"`
	Format  string `json:"format"`
	Source  string `json:"source"`
}

// ServerStoreFact says where the server keeps one of its own stores.
type ServerStoreFact struct {
	// Store names it: registry, prompts, conversations, inference (the
	// chat-completion history), responses (the responses provider's
	// stored responses).
	Store string `json:"store"`
	// Kind is kv or sql.
	Kind string `json:"kind"`
	// Config is the config key that places it ("" when none does);
	// metadata_store (0.2) or storage.stores.<name> (0.3).
	Config string `json:"config"`
	// Default is the path (in the terms of ImplicitWrite.Path) of its
	// SQLite file when Config is unset or empty.
	Default string `json:"default"`
	// Namespace and Table are what upstream's code fixes for it; where
	// TableFromConfig (0.7 on), Table is the default of the reference's
	// table_name (TableSource) and the config's table_name is honoured.
	Namespace       string `json:"namespace"`
	Table           string `json:"table"`
	TableFromConfig bool   `json:"table_from_config"`
	TableSource     string `json:"table_source"`
	// DistributionsName is what upstream's shipped configs name the table
	// (config file -> table), where TableFromConfig.
	DistributionsName map[string]string `json:"distributions_name"`
	Source            string            `json:"source"`
}

// StateEnv is an environment variable upstream reads a state path from.
type StateEnv struct {
	// Env is the variable's name.
	Env string `json:"env"`
	// Defaults are the paths upstream falls back to without it.
	Defaults []string `json:"defaults"`
	// Source is where upstream reads it.
	Source string `json:"source"`
}

// RoutedAPI pairs a router API with its routing table API.
type RoutedAPI struct {
	Router       string `json:"router"`
	RoutingTable string `json:"routing_table"`
}

// Rule is a start-up check upstream makes in code.
type Rule struct {
	ID      string `json:"id"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

// ImplicitWrite is a path the server writes without the config naming it.
type ImplicitWrite struct {
	What string `json:"what"`
	Path string `json:"path"`
	When string `json:"when"`
	// OnlyWhenSet: the path is written only when the config key it names
	// is set (external_providers_dir from 0.4 on).
	OnlyWhenSet bool   `json:"only_when_set"`
	Source      string `json:"source"`
}

// ProviderFact is upstream's ProviderSpec of one provider type.
type ProviderFact struct {
	APIDependencies         []string          `json:"api_dependencies"`
	OptionalAPIDependencies []string          `json:"optional_api_dependencies"`
	ConfigClass             string            `json:"config_class"`
	RequiredConfig          map[string]string `json:"required_config"`
	DeprecationError        string            `json:"deprecation_error"`
	DeprecationWarning      string            `json:"deprecation_warning"`
	Source                  string            `json:"source"`
	// PermittedConfig are config fields whose validator admits only the
	// values of upstream's own list (e.g. meta-reference's model).
	PermittedConfig map[string]PermittedValues `json:"permitted_config"`
	// ListedModels are the models the provider lists at start (its own
	// implementation runs there): the routing table registers them.
	ListedModels       []ListedModel `json:"listed_models"`
	ListedModelsSource string        `json:"listed_models_source"`
}

// PermittedValues is what a config field's validator admits.
type PermittedValues struct {
	Values  []string `json:"values"`
	Message string   `json:"message"`
	Source  string   `json:"source"`
}

// ListedModel is a model a provider lists at start.
type ListedModel struct {
	ProviderResourceID string `json:"provider_resource_id"`
	ModelType          string `json:"model_type"`
	EmbeddingDimension int    `json:"embedding_dimension"`
}

// factsOf holds, for every line, the loader of its facts, read the first
// time that line is asked for.
var factsOf = perLine(func(l Line) *Facts {
	data, err := distributions.FS.ReadFile(l.Tag() + "/facts.json")
	if err != nil {
		panic(fmt.Sprintf("the facts of Llama Stack %s are not embedded: %v", l.Tag(), err))
	}
	var f Facts
	if err := json.Unmarshal(data, &f); err != nil {
		panic(fmt.Sprintf("distributions/%s/facts.json: %v", l.Tag(), err))
	}
	if f.Tag != l.Tag() {
		panic(fmt.Sprintf("distributions/%s/facts.json was derived at %s", l.Tag(), f.Tag))
	}
	return &f
})

// Facts returns the facts of a line.
func (l Line) Facts() *Facts {
	load, ok := factsOf[l]
	if !ok {
		return nil
	}
	return load()
}

// Rule returns upstream's rule of that id (Facts.Rules).
func (f *Facts) Rule(id string) (Rule, bool) { return f.rule(id) }

// rule returns upstream's message of a rule; a rule the facts lack is a
// programming error caught by the tests.
func (f *Facts) rule(id string) (Rule, bool) {
	i := slices.IndexFunc(f.Rules, func(r Rule) bool { return r.ID == id })
	if i < 0 {
		return Rule{}, false
	}
	return f.Rules[i], true
}

// Builtin reports whether the stack serves an API itself, whatever its
// providers: a router (inference, safety, vector_io, ...), its routing
// table (models, shields, tool_groups, ...) or an internal API (inspect,
// providers, prompts, ...).
func (f *Facts) Builtin(api string) bool {
	return slices.Contains(f.InternalAPIs, api) ||
		slices.ContainsFunc(f.RoutedAPIs, func(r RoutedAPI) bool { return r.Router == api || r.RoutingTable == api })
}

// RoutingTable is the routing table API of a router API ("" for others).
func (f *Facts) RoutingTable(router string) string {
	for _, r := range f.RoutedAPIs {
		if r.Router == router {
			return r.RoutingTable
		}
	}
	return ""
}

// Dependents returns the enabled providers (api -> provider types) that need
// an API through api_dependencies.
func (f *Facts) Dependents(api string, enabled map[string][]string) []string {
	var out []string
	for _, a := range sortedKeys(enabled) {
		for _, t := range enabled[a] {
			if slices.Contains(f.Providers[a][t].APIDependencies, api) {
				out = append(out, a+"/"+t)
			}
		}
	}
	return out
}

// startView is what the start-up checks read of a config of either line.
type startView struct {
	// imageName is image_name (distro_name from 0.7 on): the folder of
	// the paths upstream places under its config folder.
	imageName     string
	apis          []string
	providers     map[string][]Provider
	resources     []resourceRef
	externalDir   *string
	metadataStore bool // 0.2: metadata_store set
	stores        *Stores
	// defaultEmbedding is 0.3's vector_stores.default_embedding_model,
	// defaultReranker 0.7's default_reranker_model.
	defaultEmbedding, defaultReranker *QualifiedModel
	// models are the models registered at start (0.3).
	models []ModelInput
	// defaultShield is 0.7's safety.default_shield_id.
	defaultShield *string
}

// resourceRef is a registered resource with the provider it names.
type resourceRef struct {
	at, routingTable, providerID string
	// id is the identifier register_resources registers it under, where
	// a check needs it (a shield's shield_id).
	id string
}

// served returns the APIs that have an implementation at start: the
// internal ones, the routers (every one unless the config lists apis),
// their routing tables, and every other API with an enabled provider
// (resolver.py resolve_impls, specs_for_autorouted_apis).
func (f *Facts) served(v startView) map[string]bool {
	out := map[string]bool{}
	for _, a := range f.InternalAPIs {
		out[a] = true
	}
	routers := map[string]bool{}
	for _, r := range f.RoutedAPIs {
		routers[r.Router] = true
		if len(v.apis) == 0 || slices.Contains(v.apis, r.Router) {
			out[r.Router], out[r.RoutingTable] = true, true
		}
	}
	for api, list := range v.providers {
		if routers[api] {
			continue
		}
		if slices.ContainsFunc(list, func(p Provider) bool { return p.ID() != "" && p.ID() != disabledID }) {
			out[api] = true
		}
	}
	return out
}

// checkStart checks what upstream's start-up (Stack.initialize: the
// resolver, the internal services, register_resources) refuses, from the
// line's facts, with upstream's messages.
func checkStart(p *problems, w *writes, line Line, v startView, env Env, home string) {
	f := line.Facts()
	routingTables := map[string]string{}
	for _, r := range f.RoutedAPIs {
		routingTables[r.RoutingTable] = r.Router
	}
	served := f.served(v)
	for _, api := range sortedKeys(v.providers) {
		if _, ok := routingTables[api]; ok {
			p.add("providers."+api, "Provider for `%s` is automatically provided and cannot be overridden", api)
			continue
		}
		types, known := f.Providers[api]
		if !known {
			p.add("providers."+api, "%q is not an API of Llama Stack %s (%s)", api, line, strings.Join(sortedKeys(f.Providers), ", "))
			continue
		}
		for i, pr := range v.providers[api] {
			at := fmt.Sprintf("providers.%s[%d]", api, i)
			if pr.ID() == "" || pr.ID() == disabledID || pr.ProviderType == nil || pr.Module != nil {
				continue
			}
			fact, ok := types[pr.Type()]
			if !ok {
				p.add(at+".provider_type", "Provider `%s` is not available for API `Api.%s` (%s)", pr.Type(), api,
					"llama_stack/providers/registry/"+api+".py at "+line.Tag())
				continue
			}
			if fact.DeprecationError != "" {
				p.add(at+".provider_type", "%s", fact.DeprecationError)
			}
			for _, dep := range fact.APIDependencies {
				if !served[dep] {
					p.add(at, "Failed to resolve '%s' provider '%s' of type '%s': required dependency '%s' is not available (%s needs %s)",
						api, pr.ID(), pr.Type(), dep, pr.Type(), strings.Join(fact.APIDependencies, ", "))
				}
			}
			for _, field := range sortedKeys(fact.PermittedConfig) {
				allowed := fact.PermittedConfig[field]
				if val, ok := pr.Config[field].(string); ok && !slices.Contains(allowed.Values, val) {
					p.add(at+".config."+field, "%s `%s`: %s admits only the models upstream knows (%s, e.g. %s)",
						allowed.Message, val, shortClass(fact.ConfigClass), allowed.Source, strings.Join(allowed.Values[:min(3, len(allowed.Values))], ", "))
				}
			}
			for _, field := range sortedKeys(fact.RequiredConfig) {
				val, ok := pr.Config[field]
				switch {
				case !ok || val == nil:
					p.add(at+".config."+field, "Field required (%s, %s)", shortClass(fact.ConfigClass), fact.Source)
				case fact.RequiredConfig[field] == "str":
					if _, isString := val.(string); !isString {
						p.add(at+".config."+field, "Input should be a valid string (%s)", shortClass(fact.ConfigClass))
					}
				}
			}
		}
	}
	_, all := f.rule("resource.provider_all")
	for _, r := range v.resources {
		if !served[r.routingTable] || r.providerID == "" || r.providerID == disabledID {
			continue // register_resources skips both
		}
		if all && r.providerID == "all" {
			continue // registered on the first provider that is on (models), or skipped
		}
		api := routingTables[r.routingTable]
		if !slices.ContainsFunc(v.providers[api], func(pr Provider) bool { return pr.ID() == r.providerID }) {
			p.add(r.at+".provider_id", "Provider `%s` not found: no enabled %s provider has that id (enabled: %s)",
				r.providerID, api, strings.Join(enabledIDs(v.providers[api]), ", "))
		}
	}
	// the stores and vector_stores rules exist only in the facts of the
	// lines whose start-up applies them (stack.py at v0.3.0)
	{
		s := v.stores
		if s == nil {
			s = &Stores{}
		}
		need := func(id string, missing bool) {
			if r, ok := f.rule(id); ok && missing {
				store, _, _ := strings.Cut(strings.TrimPrefix(id, "stores."), ".")
				p.add("storage.stores."+store, "%s (%s)", r.Message, r.Source)
			}
		}
		need("stores.metadata", s.Metadata == nil)
		need("stores.prompts", s.Prompts == nil)
		need("stores.connectors", s.Connectors == nil)
		need("stores.conversations", s.Conversations == nil)
		need("stores.conversations.enabled", s.Conversations == nil)
		need("stores.inference", s.Inference == nil && served["inference"])
		if m := v.defaultEmbedding; m != nil && m.ProviderID != nil && m.ModelID != nil {
			id := *m.ProviderID + "/" + *m.ModelID
			if r, ok := f.rule("vector_stores.models"); ok && !served["models"] {
				p.add("vector_stores.default_embedding_model", "%s '%s' (%s)", r.Message, id, r.Source)
			} else if r, ok := f.rule("vector_stores.model"); ok && !slices.Contains(enabledIDs(v.providers["inference"]), *m.ProviderID) {
				p.add("vector_stores.default_embedding_model", "Embedding model '%s' %s: no inference provider that is on has id %s (%s)", id, r.Message, *m.ProviderID, r.Source)
			} else if ok && !f.modelAtStart(v, *m.ProviderID, *m.ModelID, "embedding") {
				p.add("vector_stores.default_embedding_model", "Embedding model '%s' %s: neither registered under registered_resources.models "+
					"(model_type embedding) nor listed at start by the inference provider %s (%s)", id, r.Message, *m.ProviderID, r.Source)
			}
		}
		// 0.7 on: the default reranker model (validate_vector_stores_config)
		if m := v.defaultReranker; m != nil && m.ProviderID != nil && m.ModelID != nil {
			id := *m.ProviderID + "/" + *m.ModelID
			if r, ok := f.rule("vector_stores.models"); ok && !served["models"] {
				p.add("vector_stores.default_reranker_model", "%s '%s' (%s)", r.Message, id, r.Source)
			} else if r, ok := f.rule("vector_stores.reranker"); ok && !f.modelAtStart(v, *m.ProviderID, *m.ModelID, "rerank") {
				p.add("vector_stores.default_reranker_model", "Reranker model '%s' %s: neither registered under registered_resources.models "+
					"(model_type rerank) nor listed at start by an inference provider %s that is on (%s)", id, r.Message, *m.ProviderID, r.Source)
			}
		}
	}
	// 0.7 on: the default shield (validate_safety_config in core/stack.py)
	if id := v.defaultShield; id != nil {
		if r, ok := f.rule("safety.shields_api"); ok && !served["shields"] {
			p.add("safety.default_shield_id", "%s (%s)", r.Message, r.Source)
		} else if r, ok := f.rule("safety.safety_api"); ok && !served["safety"] {
			p.add("safety.default_shield_id", "%s (%s)", r.Message, r.Source)
		} else if r, ok := f.rule("safety.default_shield"); ok {
			shields := f.shieldsAtStart(v)
			if len(shields) > 0 && !slices.Contains(shields, *id) {
				p.add("safety.default_shield_id", "Configured default_shield_id '%s' %s Available shields: %v (%s): "+
					"register it under registered_resources.shields or drop the default", *id, r.Message, shields, r.Source)
			}
		}
	}
	for _, iw := range f.ImplicitWrites {
		switch {
		case strings.Contains(iw.Path, "${external_providers_dir}") && iw.OnlyWhenSet:
			if v.externalDir != nil && *v.externalDir != "" {
				w.providersDir(v.externalDir)
			}
		case strings.Contains(iw.Path, "${external_providers_dir}"):
			w.providersDir(v.externalDir)
		case strings.Contains(iw.When, "metadata_store unset") && v.metadataStore:
		default:
			dir := strings.NewReplacer("${"+f.ConfigDir.Env+"}", configDir(f, env, home), "${image_name}", v.imageName).Replace(iw.Path)
			w.add(path.Dir(dir))
		}
	}
}

// shieldsAtStart are the identifiers of the shields the config registers
// at start (register_resources: the shields routing table served, the
// provider named and on), sorted as upstream's message lists them.
func (f *Facts) shieldsAtStart(v startView) []string {
	served := f.served(v)
	var out []string
	for _, r := range v.resources {
		if r.routingTable != "shields" || !served["shields"] || r.providerID == "" || r.providerID == disabledID || r.id == "" {
			continue
		}
		if slices.ContainsFunc(v.providers["safety"], func(pr Provider) bool { return pr.ID() == r.providerID }) {
			out = append(out, r.id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// modelAtStart: the models routing table holds the model <providerID>/
// <modelID> of that type (embedding, rerank) once the server started, the
// provider on: registered by the config (routing_tables/models.py
// register_model: identifier provider_id/(provider_model_id or model_id);
// provider_id/model_id at 0.8.0, ModelIdentifierFact), or listed by that
// provider's own implementation (ListedModels). A remote provider's models
// come from its remote at run time, which the config cannot promise.
func (f *Facts) modelAtStart(v startView, providerID, modelID, modelType string) bool {
	if !slices.Contains(enabledIDs(v.providers["inference"]), providerID) {
		return false
	}
	for _, m := range v.models {
		if m.ProviderID == nil || *m.ProviderID != providerID || m.ModelType == nil || *m.ModelType != modelType {
			continue
		}
		resource := m.ProviderModelID
		if resource == nil || f.ModelIdentifier.Suffix == "model_id" {
			resource = m.ModelID // 0.8.0 names a model provider_id/model_id
		}
		if resource != nil && (*resource == modelID ||
			f.ModelIdentifier.KeepsPrefixed && m.ModelID != nil && *m.ModelID == providerID+"/"+modelID) {
			return true
		}
	}
	for _, pr := range v.providers["inference"] {
		if pr.ID() != providerID || pr.ProviderType == nil {
			continue
		}
		for _, lm := range f.Providers["inference"][pr.Type()].ListedModels {
			if lm.ModelType == modelType && lm.ProviderResourceID == modelID {
				return true
			}
		}
	}
	return false
}

// configDir is $LLAMA_STACK_CONFIG_DIR, or ~/.llama (core/utils/config_dirs.py).
func configDir(f *Facts, env Env, home string) string {
	if d, ok := env(f.ConfigDir.Env); ok && d != "" {
		return d
	}
	return expandHome(f.ConfigDir.Default, home)
}

func shortClass(c string) string { return c[strings.LastIndex(c, ".")+1:] }

func enabledIDs(list []Provider) []string {
	out := []string{}
	for _, pr := range list {
		if id := pr.ID(); id != "" && id != disabledID {
			out = append(out, id)
		}
	}
	return out
}

func ref(at, table string, providerID *string) resourceRef {
	r := resourceRef{at: at, routingTable: table}
	if providerID != nil {
		r.providerID = *providerID
	}
	return r
}

func mapRefs[T ~map[string]any](at, table string, list []T) []resourceRef {
	out := make([]resourceRef, 0, len(list))
	for i, m := range list {
		id, _ := m["provider_id"].(string)
		shield, _ := m["shield_id"].(string)
		out = append(out, resourceRef{at: fmt.Sprintf("%s[%d]", at, i), routingTable: table, providerID: id, id: shield})
	}
	return out
}
