package stackconfig

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Result is what Check learnt from a valid run config.
type Result struct {
	// Line the config was checked against.
	Line Line
	// WritableDirs are the directories the server writes to at start or
	// at run time (sqlite files' folders, file storage, the external
	// providers folder it creates), after expanding the environment,
	// sorted. A relative one is relative to the container's working
	// directory.
	WritableDirs []string
	// WrittenFrom maps each of WritableDirs to the run-config path that
	// places it ("" when upstream's code does: its config folder, "None").
	WrittenFrom map[string]string
	// Providers lists the enabled providers' ids per API.
	Providers map[string][]string
	// Enabled are the enabled providers, by API (sorted), then in the
	// config's order.
	Enabled []EnabledProvider
	// Server is the server section, expanded (nil when the file has none:
	// the server's defaults apply).
	Server *ServerConfig
	// Stores are the server's own stores by name (registry, prompts and,
	// on 0.3, conversations), where this config and upstream's defaults
	// place them (Facts.ServerStores).
	Stores map[string]Store
	// Models are the models the server registers at start (expanded;
	// those whose provider is off left out).
	Models []ModelInput
	// ExternalProvidersDir is external_providers_dir, expanded ("" when
	// unset; relative to the working directory when relative). `llama
	// stack run` creates it; the server started otherwise refuses to start
	// when it is set and missing (Facts rule external_providers_dir.exists).
	ExternalProvidersDir string
}

// Options tune Check.
type Options struct {
	// Env is the server container's environment; nil means empty.
	Env Env
	// Home is $HOME of the server container ("~" expands to it); "/"
	// when empty.
	Home string
}

// Check validates a run config against the model of a line, as the server
// of that line would at start: it expands the environment, decodes the
// file strictly and checks what upstream's validators check. Every
// problem found is reported, each with its path.
func Check(line Line, data []byte, opts Options) (Result, error) {
	if !line.Known() {
		return Result{}, &UnknownVersionError{Version: string(line)}
	}
	env := opts.Env
	if env == nil {
		env = MapEnv(nil)
	}
	home := opts.Home
	if home == "" {
		home = "/"
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return Result{}, fmt.Errorf("not YAML: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Result{}, errors.New("more than one YAML document")
	}
	if _, ok := doc.(map[string]any); !ok {
		return Result{}, errors.New("not a YAML mapping")
	}
	expanded, err := expand(doc, "", env, home, line.Facts().EnvExpansion)
	if err != nil {
		return Result{}, err
	}
	if err := unknownTopLevel(line, expanded.(map[string]any)); err != nil {
		return Result{}, fmt.Errorf("the Llama Stack %s layout (checked against %s): %w", line, line.Tag(), err)
	}
	// upstream's own models (schemas.json) judge every key and value; their
	// problems are reported after the semantic rules' (whose messages know
	// the other line's layout), or alone when the file does not decode
	var schemaProblems problems
	checkProviderConfigs(&schemaProblems, line, expanded.(map[string]any))
	var p problems
	w := &writes{}
	res := Result{Line: line}
	switch line.Layout() {
	case InlineStores:
		var c V02
		if err := readJSON(expanded, &c); err != nil {
			return Result{}, fmt.Errorf("the Llama Stack %s layout (checked against %s): %w", line, line.Tag(), cmp.Or(schemaProblems.err(), err))
		}
		c.check(&p, w, line.Schemas())
		checkStart(&p, w, line, c.start(), env, home)
		res.Enabled, res.Server = enabledList(c.Providers), c.Server
		res.Stores = serverStores(line.Facts(), c.storeAt, deref(c.ImageName), env, home)
		res.Models = registered(c.Models)
		res.ExternalProvidersDir = deref(c.ExternalProvidersDir)
	case StorageBackends:
		var c V03
		if err := readJSON(expanded, &c); err != nil {
			return Result{}, fmt.Errorf("the Llama Stack %s layout (checked against %s): %w", line, line.Tag(), cmp.Or(schemaProblems.err(), err))
		}
		c.defaults(line, expanded.(map[string]any), env, home)
		c.check(&p, w, line.Schemas(), line.Facts())
		checkStart(&p, w, line, c.start(), env, home)
		res.Enabled, res.Server = enabledList(c.Providers), c.Server
		res.Stores = serverStores(line.Facts(), c.storeAt, c.name(), env, home)
		res.ExternalProvidersDir = deref(c.ExternalProvidersDir)
		if c.RegisteredResources != nil {
			res.Models = registered(c.RegisteredResources.Models)
		}
	default:
		return Result{}, fmt.Errorf("the StackRunConfig schema of Llama Stack %s (distributions/%s/schemas.json) has no known layout", line, line.Tag())
	}
	p = append(p, schemaProblems...)
	if err := p.err(); err != nil {
		return Result{}, fmt.Errorf("the Llama Stack %s layout (checked against %s): %w", line, line.Tag(), err)
	}
	res.Providers, res.WritableDirs, res.WrittenFrom = enabled(res.Enabled), w.sorted(), w.dirs
	return res, nil
}

// otherLayout names the top-level keys of the other layout, for a message
// that says what is wrong with a file written in it.
var otherLayout = map[Layout]map[string]string{
	StorageBackends: {
		"metadata_store": "storage.stores.metadata", "inference_store": "storage.stores.inference",
		"models": "registered_resources.models", "shields": "registered_resources.shields",
		"vector_dbs": "registered_resources.vector_stores", "datasets": "registered_resources.datasets",
		"scoring_fns": "registered_resources.scoring_fns", "benchmarks": "registered_resources.benchmarks",
		"tool_groups": "registered_resources.tool_groups",
	},
	InlineStores: {
		"storage":              "metadata_store, inference_store and inline provider stores",
		"registered_resources": "top-level models, shields, vector_dbs, ... lists",
		"telemetry":            "a telemetry API provider", "vector_stores": "nothing (0.2 has no vector_stores defaults)",
	},
}

// unknownTopLevel reports every top-level key the line's StackRunConfig
// (schemas.json) lacks, unless it carries no setting (null, [], {}: upstream
// drops it, and nothing is lost), as the strictness rule does at every level.
func unknownTopLevel(line Line, doc map[string]any) error {
	known := line.RunConfigFields()
	var p problems
	for _, k := range sortedKeys(doc) {
		switch {
		case slices.Contains(known, k), empty(doc[k]):
		case otherLayout[line.Layout()][k] != "":
			p.add(k, "unknown field: this is the other line's layout; Llama Stack %s has %s instead", line, otherLayout[line.Layout()][k])
		default:
			p.add(k, "unknown field")
		}
	}
	return p.err()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// enabled is the enabled providers' ids per API, in the config's order.
func enabled(list []EnabledProvider) map[string][]string {
	out := map[string][]string{}
	for _, p := range list {
		out[p.API] = append(out[p.API], p.ID)
	}
	return out
}

// EnabledProvider is a provider the server runs.
type EnabledProvider struct {
	API, ID, Type string
}

func enabledList(providers map[string][]Provider) []EnabledProvider {
	var out []EnabledProvider
	for _, api := range slices.Sorted(maps.Keys(providers)) {
		for _, pr := range providers[api] {
			if id := pr.ID(); id != "" && id != disabledID {
				out = append(out, EnabledProvider{API: api, ID: id, Type: pr.Type()})
			}
		}
	}
	return out
}

// storeKind is what a provider config key holds.
type storeKind int

const (
	filePath  storeKind = iota // a file the server creates
	dirPath                    // a folder the server writes into
	kvConfig                   // 0.2 inline KVStoreConfig
	sqlConfig                  // 0.2 inline SqlStoreConfig
	kvRef                      // 0.3 KVStoreReference
	sqlRef                     // 0.3 SqlStoreReference (and its Inference, Responses kin)
)

// storeKey is a key of a provider's config that holds a store or a path.
type storeKey struct {
	key      string
	kind     storeKind
	required bool
}

// pathFields are the config fields upstream's provider config classes name
// for a file or a folder the provider writes (sqlite-vec's and milvus's
// db_path, localfs's storage_dir, 0.2 telemetry's sqlite_db_path), the
// same names at every tag.
var pathFields = map[string]storeKind{"db_path": filePath, "sqlite_db_path": filePath, "storage_dir": dirPath}

// storeKeys are the keys of a provider type's config that hold a store or
// a path the server writes, read from its config class's schema
// (schemas.json): a field typed with a KVStoreConfig or SqlStoreConfig
// union (0.2 inline stores), a KVStoreReference or a SqlStoreReference
// (0.3), or named in pathFields. A store field is required when the class
// requires it or defaults it to a store (the server would then write where
// the config does not say).
// They are read from the schema once per line and type (readStoreKeys):
// every run config made asks for those of each of its providers.
func storeKeys(s *Schemas, api, providerType string) []storeKey {
	if s == nil {
		return nil
	}
	key := s.Tag + "/" + api + "/" + providerType
	if keys, ok := storeKeysOf.Load(key); ok {
		return keys.([]storeKey)
	}
	keys, _ := storeKeysOf.LoadOrStore(key, readStoreKeys(s, api, providerType))
	return keys.([]storeKey)
}

// storeKeysOf holds storeKeys by line tag, API and provider type. Its
// slices are shared: callers only read them.
var storeKeysOf sync.Map // string -> []storeKey

func readStoreKeys(s *Schemas, api, providerType string) []storeKey {
	ps, ok := s.Provider(api, providerType)
	if !ok {
		return nil
	}
	var doc struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if json.Unmarshal(ps.Schema, &doc) != nil {
		return nil
	}
	var out []storeKey
	for _, k := range sortedKeys(doc.Properties) {
		prop := doc.Properties[k]
		required := slices.Contains(doc.Required, k)
		if kind, ok := pathFields[k]; ok && prop["type"] == "string" {
			out = append(out, storeKey{key: k, kind: kind, required: required})
			continue
		}
		refs := refNames(prop)
		if len(refs) == 0 {
			continue
		}
		var kind storeKind
		switch {
		case allSuffix(refs, "KVStoreConfig"):
			kind = kvConfig
		case allSuffix(refs, "SqlStoreConfig"):
			kind = sqlConfig
		case len(refs) == 1 && refs[0] == "KVStoreReference":
			kind = kvRef
		case len(refs) == 1 && strings.HasSuffix(refs[0], "StoreReference"):
			kind = sqlRef
		default:
			continue // a nested model: walkStores finds the stores in it by their shape
		}
		if d, set := prop["default"]; set && d != nil {
			required = true
		}
		out = append(out, storeKey{key: k, kind: kind, required: required})
	}
	return out
}

// refNames are the model names a property's schema refers to, directly or
// through anyOf / oneOf (null left out).
func refNames(prop map[string]any) []string {
	var out []string
	add := func(v any) {
		if m, ok := v.(map[string]any); ok {
			if r, ok := m["$ref"].(string); ok {
				out = append(out, r[strings.LastIndex(r, "/")+1:])
			}
		}
	}
	add(prop)
	for _, key := range []string{"anyOf", "oneOf"} {
		list, _ := prop[key].([]any)
		for _, e := range list {
			add(e)
		}
	}
	return out
}

func allSuffix(list []string, suffix string) bool {
	return !slices.ContainsFunc(list, func(s string) bool { return !strings.HasSuffix(s, suffix) })
}

// checkProviders checks each enabled provider: the stores and paths its
// type keeps (storeKeys), and any other store-shaped value of its config in
// the layout of the line.
func checkProviders(p *problems, w *writes, providers map[string][]Provider,
	store func(at, key string, v any, kind storeKind), s *Schemas, layout Layout) {
	for _, api := range sortedKeys(providers) {
		for i, pr := range providers[api] {
			at := fmt.Sprintf("providers.%s[%d]", api, i)
			if pr.ID() == "" || pr.ID() == disabledID {
				continue
			}
			if pr.ProviderType != nil && !strings.Contains(*pr.ProviderType, "::") && pr.Module == nil {
				p.add(at+".provider_type", "%q is not of the form inline::<name> or remote::<name>", *pr.ProviderType)
			}
			known := map[string]bool{}
			for _, k := range storeKeys(s, api, pr.Type()) {
				known[k.key] = true
				v, ok := pr.Config[k.key]
				if !ok || v == nil {
					if k.required {
						p.add(at+".config."+k.key, "required by %s", pr.Type())
					}
					continue
				}
				store(at+".config."+k.key, k.key, v, k.kind)
			}
			for _, k := range sortedKeys(pr.Config) {
				if !known[k] {
					walkStores(p, w, at+".config."+k, pr.Config[k], layout, store)
				}
			}
		}
	}
}

// walkStores finds store-shaped mappings in free-form provider config: a
// mapping with a backend key is a 0.3 reference, one with a store type and
// a db_path or host is a 0.2 inline store.
func walkStores(p *problems, w *writes, at string, v any, layout Layout, store func(at, key string, v any, kind storeKind)) {
	switch t := v.(type) {
	case map[string]any:
		_, hasBackend := t["backend"]
		typ, _ := t["type"].(string)
		_, hasPath := t["db_path"]
		_, hasHost := t["host"]
		inline := slices.Contains([]string{"sqlite", "postgres", "redis", "mongodb"}, typ) && (hasPath || hasHost)
		switch {
		case hasBackend && layout == StorageBackends:
			kind := kvRef
			if _, ok := t["table_name"]; ok {
				kind = sqlRef
			}
			store(at, "", t, kind)
		case hasBackend:
			p.add(at, "refers to a storage backend by name, the 0.3 layout: a 0.2 server needs an inline store (type and db_path, or postgres host and user)")
		case inline && layout == StorageBackends:
			store(at, "", t, kvRef) // reported as an inline store
		case inline:
			store(at, "", t, kvConfig)
		default:
			for _, k := range sortedKeys(t) {
				walkStores(p, w, at+"."+k, t[k], layout, store)
			}
		}
	case []any:
		for i, e := range t {
			walkStores(p, w, fmt.Sprintf("%s[%d]", at, i), e, layout, store)
		}
	}
}

// writes collects the directories the server writes to, each with the
// first run-config path that places it ("" for what upstream's code
// places).
type writes struct{ dirs map[string]string }

func (w *writes) add(dir string) { w.addFrom(dir, "") }

func (w *writes) addFrom(dir, at string) {
	if w.dirs == nil {
		w.dirs = map[string]string{}
	}
	dir = path.Clean(dir)
	if prev, ok := w.dirs[dir]; !ok || (prev == "" && at != "") {
		w.dirs[dir] = at
	}
}

// file records the folder of a file path value.
func (w *writes) file(at string, v any) {
	if s, ok := v.(string); ok && s != "" && s != ":memory:" {
		w.addFrom(path.Dir(s), at)
	}
}

// dir records a folder path value.
func (w *writes) dir(at string, v any) {
	if s, ok := v.(string); ok && s != "" {
		w.addFrom(s, at)
	}
}

// providersDir records the folder `llama stack run` creates at start:
// os.makedirs(str(external_providers_dir)) runs even when the field is
// unset (cli/stack/run.py at v0.2.23 and v0.3.0), making a folder named
// "None" in the working directory.
func (w *writes) providersDir(v *string) {
	if v == nil || *v == "" {
		w.add("None")
		return
	}
	w.addFrom(*v, "external_providers_dir")
}

func (w *writes) sorted() []string { return slices.Sorted(maps.Keys(w.dirs)) }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// cleanJSONError drops encoding/json's "json: " prefix and names Go types
// by their YAML field path where it can.
func cleanJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: a %s where %s is expected", te.Field, te.Value, te.Type)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errors.New(msg)
}
