package stackconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
)

// Schemas are the JSON Schemas of a line's config models as pydantic emits
// them at the line's tag (distributions/<tag>/schemas.json, derived by
// hack/llamastack/derive_schemas.py): the run config model and every
// provider type's config class.
type Schemas struct {
	// Tag is the upstream tag they were derived at.
	Tag string `json:"tag"`
	// RunConfig is the run config model (StackRunConfig at 0.2 and 0.3).
	RunConfig ModelSchema `json:"run_config"`
	// Providers are the provider types' config classes, by API and type.
	Providers map[string]map[string]ProviderSchema `json:"providers"`

	// runConfigFields are RunConfig's top-level fields, sorted, and
	// registeredResourceFields the fields of its RegisteredResources model
	// (nil when it has none), each read once: every run config made asks
	// for them.
	runConfigFields          []string
	registeredResourceFields []string
}

// ModelSchema is one pydantic model's JSON Schema.
type ModelSchema struct {
	// Class is the model's class name, Source the upstream file defining it.
	Class  string `json:"class"`
	Source string `json:"source"`
	// Extra is pydantic's extra-fields behaviour (ignore, forbid, allow) of
	// every model the schema holds, by the model's schema title.
	Extra map[string]string `json:"extra"`
	// BeforeValidators are, by model title, the fields whose validators
	// see the input before pydantic does (mode before, wrap or plain): the
	// schema does not describe what they take, so any value passes here.
	BeforeValidators map[string][]string `json:"before_validators"`
	// BeforeModelValidators are the models with such a validator of the
	// whole model: it may consume keys, so none is refused as unknown.
	BeforeModelValidators []string `json:"before_model_validators"`
	// Schema is model_json_schema() at the tag.
	Schema json.RawMessage `json:"schema"`
}

// ProviderSchema is a provider type's config class.
type ProviderSchema struct {
	ModelSchema
	// ConfigClass is the class's dotted path in upstream's registry.
	ConfigClass string `json:"config_class"`
	// EndpointField is the field that takes the provider's URL ("" when the
	// class has none, or no single one: EndpointCandidates then).
	EndpointField      string   `json:"endpoint_field"`
	EndpointCandidates []string `json:"endpoint_candidates"`
	// SecretField is the field that takes the provider's secret (API key,
	// token or password), "" when the class has no single one.
	SecretField      string   `json:"secret_field"`
	SecretCandidates []string `json:"secret_candidates"`
}

// Fields lists the fields of the config class, sorted.
func (s ProviderSchema) Fields() []string {
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(s.Schema, &doc)
	return sortedKeys(doc.Properties)
}

// schemasOf holds, for every line, the loader of its schemas: a line's
// schemas.json (up to 400 kB) is read the first time that line is asked
// for, so an operator reads only its pinned line's.
var schemasOf = perLine(func(l Line) *Schemas {
	data, err := distributions.FS.ReadFile(l.Tag() + "/schemas.json")
	if err != nil {
		panic(fmt.Sprintf("the schemas of Llama Stack %s are not embedded: %v", l.Tag(), err))
	}
	var s Schemas
	if err := json.Unmarshal(data, &s); err != nil {
		panic(fmt.Sprintf("distributions/%s/schemas.json: %v", l.Tag(), err))
	}
	if s.Tag != l.Tag() {
		panic(fmt.Sprintf("distributions/%s/schemas.json was derived at %s", l.Tag(), s.Tag))
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(s.RunConfig.Schema, &doc); err == nil {
		s.runConfigFields = sortedKeys(doc.Properties)
		if d, ok := doc.Defs["RegisteredResources"]; ok {
			s.registeredResourceFields = sortedKeys(d.Properties)
		}
	}
	return &s
})

// perLine makes, for every line the registry holds, a loader of load's
// value for that line that runs load once, the first time it is called.
func perLine[T any](load func(Line) T) map[Line]func() T {
	out := map[Line]func() T{}
	for l := range registry {
		out[l] = sync.OnceValue(func() T { return load(l) })
	}
	return out
}

// Schemas returns the schemas of a line (nil for an unknown line).
func (l Line) Schemas() *Schemas {
	load, ok := schemasOf[l]
	if !ok {
		return nil
	}
	return load()
}

// Provider returns the config class schema of a provider type.
func (s *Schemas) Provider(api, providerType string) (ProviderSchema, bool) {
	if s == nil {
		return ProviderSchema{}, false
	}
	p, ok := s.Providers[api][providerType]
	return p, ok
}

// The strictness rule, the same at every level (a provider's settings, a
// whole run config, an override config, every model nested in them): a key
// the model does not have is refused, unless upstream keeps it
// (extra=allow) or it carries no setting (null, an empty list or mapping).
// Where upstream's model says extra=ignore (pydantic's default, most of
// them), upstream would drop the key without a word and the user's setting
// would have no effect; refusing it tells them before anything is
// deployed. forbid models are refused by their own schema already.
func strict(m ModelSchema) (any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(m.Schema))
	if err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			props, hasProps := t["properties"].(map[string]any)
			if title, ok := t["title"].(string); ok && hasProps {
				_, set := t["additionalProperties"]
				if m.Extra[title] == "ignore" && !set && !slices.Contains(m.BeforeModelValidators, title) {
					t["additionalProperties"] = false
				}
				for _, f := range m.BeforeValidators[title] {
					if _, ok := props[f]; ok {
						props[f] = map[string]any{}
					}
				}
			}
			for _, k := range sortedKeys(t) {
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(doc)
	return doc, nil
}

type compiled struct {
	schema *jsonschema.Schema
	raw    any
	class  string
	err    error
}

var compiledSchemas sync.Map // string -> *compiled

func compile(key string, m ModelSchema) *compiled {
	if c, ok := compiledSchemas.Load(key); ok {
		return c.(*compiled)
	}
	c := &compiled{class: m.Class}
	c.raw, c.err = strict(m)
	if c.err == nil {
		comp := jsonschema.NewCompiler()
		comp.AssertFormat()
		url := "mem://" + key + ".json"
		if c.err = comp.AddResource(url, c.raw); c.err == nil {
			c.schema, c.err = comp.Compile(url)
		}
	}
	actual, _ := compiledSchemas.LoadOrStore(key, c)
	return actual.(*compiled)
}

// FieldError is one problem a model's schema finds in a value.
type FieldError struct {
	// Path is where in the value, as keys and list indexes.
	Path []string
	// Message says what is wrong and what the model takes.
	Message string
	// Upstream names the model field, e.g. VLLMInferenceAdapterConfig.url.
	Upstream string
}

// At renders the error under a prefix path, e.g. providers.inference[0].config.
func (e FieldError) At(prefix string) string {
	at := prefix
	for _, s := range e.Path {
		if _, err := strconv.Atoi(s); err == nil {
			at += "[" + s + "]"
		} else {
			at = join(at, s)
		}
	}
	msg := e.Message
	if e.Upstream != "" {
		msg += " (upstream: " + e.Upstream + ")"
	}
	return at + ": " + msg
}

// ValidateProviderConfig validates a provider's config (after the
// environment is substituted, as upstream's replace_env_vars does before
// its config class validates it) against the provider type's derived
// schema under the strictness rule (strict). ok is false when the line has
// no schema of that type.
func (s *Schemas) ValidateProviderConfig(api, providerType string, config map[string]any) (errs []FieldError, ok bool) {
	ps, ok := s.Provider(api, providerType)
	if !ok {
		return nil, false
	}
	if config == nil {
		config = map[string]any{}
	}
	return validate(compile(s.Tag+"/"+api+"/"+providerType, ps.ModelSchema), config), true
}

// ValidateRunConfig validates a whole run config (env substituted) against
// the line's run config model under the strictness rule.
func (s *Schemas) ValidateRunConfig(doc map[string]any) []FieldError {
	return validate(compile(s.Tag+"/run_config", s.RunConfig), doc)
}

func validate(c *compiled, value any) []FieldError {
	if c.err != nil {
		// the embedded schemas are tested; this is a build defect
		return []FieldError{{Message: fmt.Sprintf("the derived schema of %s does not compile: %v", c.class, c.err)}}
	}
	inst, err := jsonValue(value)
	if err != nil {
		return []FieldError{{Message: err.Error()}}
	}
	err = c.schema.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var out []FieldError
	collect(ve, inst, c, &out)
	slices.SortStableFunc(out, func(a, b FieldError) int {
		return strings.Compare(strings.Join(a.Path, "."), strings.Join(b.Path, "."))
	})
	return slices.CompactFunc(out, func(a, b FieldError) bool { return slices.Equal(a.Path, b.Path) && a.Message == b.Message })
}

// jsonValue turns a decoded YAML value into what the validator reads.
func jsonValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not JSON-shaped: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

// collect turns a validation error tree into field errors: a failed anyOf
// whose branches all fail on the type (str | None given an int) is one
// error naming the types the field takes.
func collect(ve *jsonschema.ValidationError, inst any, c *compiled, out *[]FieldError) {
	at := ve.InstanceLocation
	add := func(path []string, msg string) {
		*out = append(*out, FieldError{Path: path, Message: msg, Upstream: upstreamField(c, path)})
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		var want []string
		allType := true
		for _, cause := range ve.Causes {
			t, ok := cause.ErrorKind.(*kind.Type)
			if !ok || !slices.Equal(cause.InstanceLocation, at) {
				allType = false
				break
			}
			want = append(want, t.Want...)
		}
		if allType && len(want) > 0 {
			if !laxAccepts(valueAt(inst, at), want) {
				add(at, "must be "+typeWords(want)+", not "+jsonTypeOf(valueAt(inst, at)))
			}
			return
		}
		// the branch that got furthest names what is wrong
		best := ve.Causes[0]
		for _, cause := range ve.Causes[1:] {
			if depth(cause) > depth(best) {
				best = cause
			}
		}
		collect(best, inst, c, out)
		return
	case *kind.Type:
		if !laxAccepts(valueAt(inst, at), k.Want) {
			add(at, "must be "+typeWords(k.Want)+", not "+jsonTypeOf(valueAt(inst, at)))
		}
		return
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			if empty(valueAt(inst, append(slices.Clone(at), p))) {
				continue // carries no setting: nothing is lost (upstream's own 0.3 configs hold vector_dbs: [])
			}
			path := append(slices.Clone(at), p)
			*out = append(*out, FieldError{Path: path, Message: fmt.Sprintf(
				"unknown field: upstream's %s has no field %s and would ignore it (the setting would have no effect); it takes %s",
				modelAt(c, at), p, strings.Join(fieldsAt(c, at), ", "))})
		}
		return
	case *kind.Required:
		for _, m := range k.Missing {
			path := append(slices.Clone(at), m)
			add(path, "required")
		}
		return
	case *kind.Format:
		if k.Want == "uri" {
			add(at, fmt.Sprintf("must be a URI, not %q", fmt.Sprint(k.Got)))
		} else {
			add(at, fmt.Sprintf("must be a %s", k.Want))
		}
		return
	case *kind.Enum:
		add(at, "must be one of "+strings.Trim(fmt.Sprint(k.Want), "[]"))
		return
	case *kind.Const:
		add(at, fmt.Sprintf("must be %v", k.Want))
		return
	}
	if len(ve.Causes) == 0 {
		add(at, ve.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
		return
	}
	for _, cause := range ve.Causes {
		collect(cause, inst, c, out)
	}
}

func depth(ve *jsonschema.ValidationError) int {
	d := len(ve.InstanceLocation)
	for _, c := range ve.Causes {
		d = max(d, depth(c))
	}
	return d
}

// laxAccepts mirrors pydantic's lax mode, in which upstream's models
// validate: a string that reads as the number or boolean the field wants is
// converted, not refused; an integer is a valid float.
func laxAccepts(v any, want []string) bool {
	s, isString := v.(string)
	for _, w := range want {
		switch w {
		case "integer":
			if isString {
				if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
					return true
				}
			}
		case "number":
			if isString {
				if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
					return true
				}
			}
		case "boolean":
			if isString && slices.Contains([]string{"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}, strings.ToLower(s)) {
				return true
			}
		}
	}
	return false
}

func typeWords(want []string) string {
	words := map[string]string{"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
		"null": "null", "object": "a mapping", "array": "a list"}
	var out []string
	for _, w := range want {
		if s, ok := words[w]; ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " or ")
}

func jsonTypeOf(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		if strings.ContainsAny(t.String(), ".eE") {
			return "a number"
		}
		return "an integer"
	case float64:
		return "a number"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

func valueAt(v any, path []string) any {
	for _, s := range path {
		switch t := v.(type) {
		case map[string]any:
			v = t[s]
		case []any:
			i, _ := strconv.Atoi(s)
			if i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// schemaAt walks a (strict) schema along an instance path to the schema
// of the model holding the last key: $refs into $defs are followed; in an
// anyOf the branch that describes the key is taken.
func schemaAt(c *compiled, path []string) map[string]any {
	root, _ := c.raw.(map[string]any)
	defs, _ := root["$defs"].(map[string]any)
	var resolve func(s map[string]any, key string) map[string]any
	resolve = func(s map[string]any, key string) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			if d, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any); ok {
				s = d
			}
		}
		if props, ok := s["properties"].(map[string]any); ok && (key == "" || props[key] != nil) {
			return s
		}
		for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
			branches, _ := s[kw].([]any)
			for _, b := range branches {
				if bm, ok := b.(map[string]any); ok {
					if r := resolve(bm, key); r != nil {
						return r
					}
				}
			}
		}
		return nil
	}
	cur := root
	for _, seg := range path {
		if cur == nil {
			return nil
		}
		if m := resolve(cur, seg); m != nil {
			props := m["properties"].(map[string]any)
			cur, _ = props[seg].(map[string]any)
			continue
		}
		// a list item or a mapping value
		next, _ := cur["items"].(map[string]any)
		if next == nil {
			next, _ = cur["additionalProperties"].(map[string]any)
		}
		if next == nil {
			for _, kw := range []string{"anyOf", "oneOf"} {
				branches, _ := cur[kw].([]any)
				for _, b := range branches {
					bm, _ := b.(map[string]any)
					if it, ok := bm["items"].(map[string]any); ok {
						next = it
					} else if ap, ok := bm["additionalProperties"].(map[string]any); ok {
						next = ap
					}
				}
			}
		}
		cur = next
	}
	if cur == nil {
		return nil
	}
	return resolve(cur, "")
}

// modelAt names the model at an instance path.
func modelAt(c *compiled, path []string) string {
	if m := schemaAt(c, path); m != nil {
		if t, ok := m["title"].(string); ok {
			return t
		}
	}
	return c.class
}

// fieldsAt lists the fields of the model at an instance path.
func fieldsAt(c *compiled, path []string) []string {
	m := schemaAt(c, path)
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return []string{"no fields"}
	}
	return sortedKeys(props)
}

// upstreamField names the model field at an instance path: Model.field.
func upstreamField(c *compiled, path []string) string {
	if len(path) == 0 {
		return c.class
	}
	return modelAt(c, path[:len(path)-1]) + "." + path[len(path)-1]
}

// ProviderConfigError is a provider's config that its config class's
// derived schema refuses.
type ProviderConfigError struct {
	// API, ID and Type name the provider; Index is its place in the API's
	// list of the config (providers switched off by id left out).
	API, ID, Type string
	Index         int
	FieldError
}

func (e *ProviderConfigError) Error() string {
	return e.At(fmt.Sprintf("providers.%s[%d].config", e.API, e.Index))
}

// ProviderConfigErrors lists the ProviderConfigErrors in err (Check joins
// every problem it finds).
func ProviderConfigErrors(err error) []*ProviderConfigError {
	var out []*ProviderConfigError
	for _, leaf := range Leaves(err) {
		var pe *ProviderConfigError
		if errors.As(leaf, &pe) {
			out = append(out, pe)
		}
	}
	return out
}

// Leaves are the single problems of an error Check returns: it joins every
// problem it finds and wraps them with the line.
func Leaves(err error) []error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
			return
		}
		out = append(out, err)
	}
	walk(err)
	return out
}

// checkProviderConfigs validates the run config, then every enabled
// provider's config, against the line's derived schemas, as upstream does
// at start: the environment is substituted first (the document given here
// is expand's, which mirrors replace_env_vars in core/stack.py: a
// ${env.X:=default} placeholder is validated as the value it becomes in
// the container), then StackRunConfig(**config) (core/stack.py) and, for
// each provider, config_class(**config) (core/resolver.py
// instantiate_provider). External providers (module) and types the line
// does not have are left to the other checks.
func checkProviderConfigs(p *problems, line Line, doc map[string]any) {
	s := line.Schemas()
	for _, fe := range s.ValidateRunConfig(doc) {
		*p = append(*p, errors.New(fe.At("")))
	}
	providers, _ := doc["providers"].(map[string]any)
	for _, api := range sortedKeys(providers) {
		list, _ := providers[api].([]any)
		for i, e := range list {
			m, _ := e.(map[string]any)
			id, _ := m["provider_id"].(string)
			typ, _ := m["provider_type"].(string)
			if id == "" || id == disabledID || m["module"] != nil {
				continue
			}
			var cfg map[string]any
			switch c := m["config"].(type) {
			case map[string]any:
				cfg = c
			case nil:
			default:
				p.add(fmt.Sprintf("providers.%s[%d].config", api, i), "must be a mapping")
				continue
			}
			errs, ok := s.ValidateProviderConfig(api, typ, cfg)
			if !ok {
				continue
			}
			for _, fe := range errs {
				*p = append(*p, &ProviderConfigError{API: api, ID: id, Type: typ, Index: i, FieldError: fe})
			}
		}
	}
}

// empty reports whether a value carries no setting.
func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}
