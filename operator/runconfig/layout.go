package runconfig

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 2 of the walk (doc.go): the line layout. A line's layout
// (stackconfig.Line.Layout, read from the line's StackRunConfig schema)
// decides how the pipeline's runConfig is read from and written to a file,
// what an empty config holds, and where spec.storage puts the stores. Each
// layout is one value of this interface; nothing else in the pipeline
// branches on the line. load reads a distribution's base config (or an
// empty one) in it.
type layout interface {
	// decode reads a base config file of the layout.
	decode(dec *yaml.Decoder) (runConfig, error)
	// file is the config as YAML text in the layout's file shape.
	file(c runConfig) ([]byte, error)
	// empty is the base of a custom image: no providers, the server's
	// stores on sqlite under DataDir.
	empty() runConfig
	// storage points the stores at the backends spec.storage selects.
	storage(cfg *runConfig, kv *v1alpha2.KVStoreSpec, sql *v1alpha2.SQLStoreSpec, postgres bool, env *envSet) error
	// vectorStore gives a remote vector_io provider the key-value store its
	// config needs for its registry, unless the user's settings set one.
	vectorStore(p *provider)
}

// layoutOf is the layout of a line; a line the registry lacks, or whose
// schema has no known layout, is an error.
func layoutOf(line stackconfig.Line) (layout, error) {
	switch line.Layout() {
	case stackconfig.InlineStores:
		return inlineStores{}, nil
	case stackconfig.StorageBackends:
		return storageBackends{line: line}, nil
	}
	if !line.Known() {
		return nil, &stackconfig.UnknownVersionError{Version: string(line)}
	}
	return nil, fmt.Errorf("the StackRunConfig schema of Llama Stack %s (distributions/%s/schemas.json) has neither storage nor metadata_store: "+
		"the operator knows no run-config layout for it", line, line.Tag())
}

// inlineStores is stackconfig.InlineStores (0.2).
type inlineStores struct{}

func (inlineStores) decode(dec *yaml.Decoder) (runConfig, error) {
	var f inlineFile
	err := dec.Decode(&f)
	return f.config(), err
}

func (inlineStores) file(c runConfig) ([]byte, error) {
	var buf bytes.Buffer
	err := encodeYAML(&buf, c.inlineFile())
	return buf.Bytes(), err
}

func (inlineStores) empty() runConfig {
	cfg := runConfig{Version: 2, ImageName: v1alpha2.CustomDistributionName, Providers: map[string][]provider{}}
	cfg.MetadataStore = sqliteStore("registry.db")
	cfg.InferenceStore = sqliteStore("inference_store.db")
	return cfg
}

// vectorStore: chromadb, qdrant and milvus require a kvstore, pgvector and
// weaviate take one (their config classes at v0.2.23: an inline store), as
// upstream's starter writes.
func (inlineStores) vectorStore(p *provider) {
	if p.Config == nil {
		p.Config = map[string]any{}
	}
	if _, ok := p.Config["kvstore"]; !ok {
		p.Config["kvstore"] = sqliteStore(strings.ToLower(envName(p.ProviderID)) + "_registry.db")
	}
}

// storageBackends is stackconfig.StorageBackends (0.3 on). Its file
// follows the line's StackRunConfig schema: the distribution's name is
// distro_name where the schema has it (0.7 on; image_name there is a
// deprecated alias), a field the schema lacks is not written (0.3's
// top-level telemetry; datasets, scoring_fns and benchmarks at 0.8), and
// the top-level keys of the base the pipeline does not edit (0.7's safety,
// connectors) pass through as upstream wrote them.
type storageBackends struct{ line stackconfig.Line }

// nameKeys are the keys of a distribution's name: image_name (0.2, 0.3),
// distro_name (0.7 on).
const (
	imageNameKey  = "image_name"
	distroNameKey = "distro_name"
)

func (l storageBackends) decode(dec *yaml.Decoder) (runConfig, error) {
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return runConfig{}, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return runConfig{}, fmt.Errorf("a run config is a mapping")
	}
	known := fileKeys(backendsFile{})
	fields := l.line.RunConfigFields()
	root := doc.Content[0]
	kept := &yaml.Node{Kind: yaml.MappingNode}
	var extra []extraKey
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value == distroNameKey:
			kept.Content = append(kept.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: imageNameKey}, v)
		case slices.Contains(known, k.Value):
			kept.Content = append(kept.Content, k, v)
		case slices.Contains(fields, k.Value):
			extra = append(extra, extraKey{key: k.Value, value: v})
		default:
			return runConfig{}, fmt.Errorf("field %s not found in the StackRunConfig of %s", k.Value, l.line.Tag())
		}
	}
	// decode what the pipeline edits strictly, as the other layout does
	data, err := yaml.Marshal(kept)
	if err != nil {
		return runConfig{}, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var f backendsFile
	if err := strict.Decode(&f); err != nil {
		return runConfig{}, err
	}
	cfg := f.config()
	cfg.Extra = extra
	return cfg, nil
}

// file is the config as a YAML mapping in the line's schema: the fields
// of backendsFile the schema has, the name under the line's key, then the
// base's extra keys. Each top-level key is
// written on its own, as a mapping of that one key, and the texts are
// joined, which is the text of the whole block mapping (an entry at the
// top level depends on nothing around it; the goldens hold it byte for
// byte). Only registered_resources, whose keys the line's model may lack,
// goes through a yaml.Node. (The whole file through a node wrote it twice
// and parsed it once: 14% of the operator's CPU while it created stacks.)
func (l storageBackends) file(c runConfig) ([]byte, error) {
	f := reflect.ValueOf(c.backendsFile())
	fields := l.line.RunConfigFields()
	var buf bytes.Buffer
	for i := range f.NumField() {
		key, opts, _ := strings.Cut(f.Type().Field(i).Tag.Get("yaml"), ",")
		if opts == "omitempty" && emptyValue(f.Field(i)) {
			continue
		}
		if key == imageNameKey && slices.Contains(fields, distroNameKey) {
			key = distroNameKey
		}
		if !slices.Contains(fields, key) {
			continue
		}
		value := f.Field(i).Interface()
		if key == "registered_resources" {
			n, err := l.registeredResources(value)
			if err != nil {
				return nil, err
			}
			value = n
		}
		if err := encodeYAML(&buf, map[string]any{key: value}); err != nil {
			return nil, err
		}
	}
	for _, e := range c.Extra {
		if err := encodeYAML(&buf, map[string]any{e.key: e.value}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// registeredResources is the registered_resources section r holds, as a
// node, less the keys the line's RegisteredResources model lacks (every
// key when the schema does not say).
func (l storageBackends) registeredResources(r any) (any, error) {
	resources := l.line.RegisteredResourceFields()
	if resources == nil {
		return r, nil
	}
	var n yaml.Node
	if err := n.Encode(r); err != nil {
		return nil, err
	}
	kept := n.Content[:0:0]
	for j := 0; j+1 < len(n.Content); j += 2 {
		if slices.Contains(resources, n.Content[j].Value) {
			kept = append(kept, n.Content[j], n.Content[j+1])
		}
	}
	n.Content = kept
	return &n, nil
}

// encodeYAML writes v as one YAML document, indented by 2 as upstream's
// files are.
func encodeYAML(buf *bytes.Buffer, v any) error {
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// emptyValue is what yaml's omitempty leaves out: an empty string, map or
// list, a nil pointer, a zero value.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	default:
		return v.IsZero()
	}
}

// extraKey is a top-level key of a base config the pipeline does not edit.
type extraKey struct {
	key   string
	value *yaml.Node
}

// fileKeys are the YAML keys of a file struct's fields.
func fileKeys(file any) []string {
	t := reflect.TypeOf(file)
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		out = append(out, name)
	}
	return out
}

func (storageBackends) empty() runConfig {
	cfg := runConfig{Version: 2, ImageName: v1alpha2.CustomDistributionName, Providers: map[string][]provider{}}
	cfg.Storage = &storage{
		Backends: map[string]map[string]any{
			kvDefault:  {"type": "kv_sqlite", "db_path": sqlitePath("kvstore.db")},
			sqlDefault: {"type": "sql_sqlite", "db_path": sqlitePath("sql_store.db")},
		},
		Stores: map[string]map[string]any{
			"metadata":      {"namespace": "registry", "backend": kvDefault},
			"inference":     {"table_name": "inference_store", "backend": sqlDefault},
			"conversations": {"table_name": "openai_conversations", "backend": sqlDefault},
		},
	}
	return cfg
}

// vectorStore: the config classes at v0.3.0 take persistence, a reference
// to a backend, as upstream's starter writes.
func (storageBackends) vectorStore(p *provider) {
	if p.Config == nil {
		p.Config = map[string]any{}
	}
	if _, ok := p.Config["persistence"]; !ok {
		p.Config["persistence"] = map[string]any{"namespace": "vector_io::" + p.ProviderID, "backend": kvDefault}
	}
}

// inlineFile is the file of the InlineStores layout (upstream v0.2.23's
// StackRunConfig); field order is the order of upstream's run.yaml.
type inlineFile struct {
	Version              int                   `yaml:"version"`
	ImageName            string                `yaml:"image_name"`
	APIs                 []string              `yaml:"apis"`
	Providers            map[string][]provider `yaml:"providers"`
	MetadataStore        map[string]any        `yaml:"metadata_store,omitempty"`
	InferenceStore       map[string]any        `yaml:"inference_store,omitempty"`
	Models               []model               `yaml:"models"`
	Shields              []shield              `yaml:"shields"`
	VectorDBs            []map[string]any      `yaml:"vector_dbs"`
	Datasets             []map[string]any      `yaml:"datasets"`
	ScoringFns           []map[string]any      `yaml:"scoring_fns"`
	Benchmarks           []map[string]any      `yaml:"benchmarks"`
	ToolGroups           []toolGroup           `yaml:"tool_groups"`
	Server               server                `yaml:"server"`
	ExternalProvidersDir string                `yaml:"external_providers_dir,omitempty"`
}

// backendsFile is the file of the StorageBackends layout (upstream
// v0.3.0's StackRunConfig).
type backendsFile struct {
	Version              int                   `yaml:"version"`
	ImageName            string                `yaml:"image_name"`
	APIs                 []string              `yaml:"apis"`
	Providers            map[string][]provider `yaml:"providers"`
	Storage              *storage              `yaml:"storage"`
	RegisteredResources  registeredResources   `yaml:"registered_resources"`
	Server               server                `yaml:"server"`
	Telemetry            *telemetry            `yaml:"telemetry,omitempty"`
	VectorStores         map[string]any        `yaml:"vector_stores,omitempty"`
	ExternalProvidersDir string                `yaml:"external_providers_dir,omitempty"`
}

// registeredResources is the 0.3 registered_resources section. Upstream's
// v0.3.0 files still carry an empty vector_dbs list, which the server
// ignores; it is read and never written.
type registeredResources struct {
	Models       []model          `yaml:"models"`
	Shields      []shield         `yaml:"shields"`
	VectorDBs    []map[string]any `yaml:"vector_dbs,omitempty"`
	VectorStores []map[string]any `yaml:"vector_stores"`
	Datasets     []map[string]any `yaml:"datasets"`
	ScoringFns   []map[string]any `yaml:"scoring_fns"`
	Benchmarks   []map[string]any `yaml:"benchmarks"`
	ToolGroups   []toolGroup      `yaml:"tool_groups"`
}

func (f inlineFile) config() runConfig {
	return runConfig{
		Version: f.Version, ImageName: f.ImageName, APIs: f.APIs, Providers: f.Providers,
		MetadataStore: f.MetadataStore, InferenceStore: f.InferenceStore,
		Models: f.Models, Shields: f.Shields, VectorDBs: f.VectorDBs, Datasets: f.Datasets,
		ScoringFns: f.ScoringFns, Benchmarks: f.Benchmarks, ToolGroups: f.ToolGroups,
		Server: f.Server, ProvidersDir: f.ExternalProvidersDir,
	}
}

func (f backendsFile) config() runConfig {
	r := f.RegisteredResources
	return runConfig{
		Version: f.Version, ImageName: f.ImageName, APIs: f.APIs, Providers: f.Providers,
		Storage: f.Storage, Telemetry: f.Telemetry, VectorStores: f.VectorStores,
		Models: r.Models, Shields: r.Shields, VectorDBs: r.VectorStores, Datasets: r.Datasets,
		ScoringFns: r.ScoringFns, Benchmarks: r.Benchmarks, ToolGroups: r.ToolGroups,
		Server: f.Server, ProvidersDir: f.ExternalProvidersDir,
	}
}

func (c runConfig) inlineFile() inlineFile {
	return inlineFile{
		Version: c.Version, ImageName: c.ImageName, APIs: c.APIs, Providers: c.Providers,
		MetadataStore: c.MetadataStore, InferenceStore: c.InferenceStore,
		Models: c.Models, Shields: c.Shields, VectorDBs: c.VectorDBs, Datasets: c.Datasets,
		ScoringFns: c.ScoringFns, Benchmarks: c.Benchmarks, ToolGroups: c.ToolGroups,
		Server: c.Server, ExternalProvidersDir: c.ProvidersDir,
	}
}

func (c runConfig) backendsFile() backendsFile {
	return backendsFile{
		Version: c.Version, ImageName: c.ImageName, APIs: c.APIs, Providers: c.Providers,
		Storage: c.Storage, Telemetry: c.Telemetry, VectorStores: c.VectorStores,
		RegisteredResources: registeredResources{
			Models: c.Models, Shields: c.Shields, VectorStores: c.VectorDBs, Datasets: c.Datasets,
			ScoringFns: c.ScoringFns, Benchmarks: c.Benchmarks, ToolGroups: c.ToolGroups,
		},
		Server: c.Server, ExternalProvidersDir: c.ProvidersDir,
	}
}

// Base returns the embedded upstream run config of a distribution at a
// line's tag, as upstream wrote it.
func Base(line stackconfig.Line, distribution string) ([]byte, error) {
	if !slices.Contains(Distributions(), distribution) {
		return nil, field.NotSupported(field.NewPath("spec", "distribution", "name"), distribution, Distributions())
	}
	return distributions.FS.ReadFile(line.Tag() + "/" + distribution + ".yaml")
}

// load returns a copy of the base config of the distribution at the
// line's tag, or starts an empty one for a custom image: the base itself
// is never shared or mutated.
func load(line stackconfig.Line, spec v1alpha2.InferenceStackSpec) (runConfig, error) {
	d := spec.Distribution
	path := field.NewPath("spec", "distribution")
	switch {
	case d.Name != "" && d.Image != "":
		return runConfig{}, field.Invalid(path, d.Name, "set exactly one of name or image")
	case d.Image != "":
		if countProviders(spec.Providers) == 0 {
			return runConfig{}, field.Required(field.NewPath("spec", "providers"),
				"a custom distribution.image has no embedded base config: list at least one provider")
		}
		lay, err := layoutOf(line)
		if err != nil {
			return runConfig{}, err
		}
		return lay.empty(), nil
	case d.Name == "":
		return runConfig{}, field.Required(path, "set name (one of "+strings.Join(distributionNames(), ", ")+") or image")
	}
	if !slices.Contains(v1alpha2.DistributionNames, d.Name) {
		return runConfig{}, field.NotSupported(path.Child("name"), d.Name, distributionNames())
	}
	if published := LineDistributions(line); !slices.Contains(published, ImageDistribution(d.Name)) {
		return runConfig{}, &field.Error{Type: field.ErrorTypeNotSupported, Field: path.Child("name").String(), BadValue: string(d.Name),
			Detail: fmt.Sprintf("%s publishes no image of it; supported: %s", product(line), quoted(published))}
	}
	cfg, err := loadBase(line, ImageDistribution(d.Name))
	if err != nil {
		return runConfig{}, err
	}
	return cfg, completeBase(&cfg, line)
}

// bases holds the parsed base config of each line and distribution
// (baseKey: runConfig) parseBase made, never handed out: parsing it for
// every run config made was a tenth of the operator's CPU while it created
// stacks. Only known lines and distributions parse, so it stays small.
var bases sync.Map

type baseKey struct {
	line stackconfig.Line
	base string
}

// loadBase returns the embedded base config of a distribution, relocated,
// in the line's layout: a copy of its own, which the caller may edit.
func loadBase(line stackconfig.Line, base string) (runConfig, error) {
	key := baseKey{line, base}
	if cfg, ok := bases.Load(key); ok {
		return cfg.(runConfig).clone(), nil
	}
	cfg, err := parseBase(line, base)
	if err != nil {
		return runConfig{}, err
	}
	bases.Store(key, cfg)
	return cfg.clone(), nil
}

// parseBase parses the embedded base config of a distribution, relocated,
// in the line's layout.
func parseBase(line stackconfig.Line, base string) (runConfig, error) {
	lay, err := layoutOf(line)
	if err != nil {
		return runConfig{}, err
	}
	data, err := Base(line, base)
	if err != nil {
		return runConfig{}, err
	}
	data = relocate(data, line, base)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	cfg, err := lay.decode(dec)
	if err != nil {
		// The embedded bases are tested; this is a build defect.
		return runConfig{}, fmt.Errorf("embedded base config of distribution %q at %s: %w", base, line.Tag(), err)
	}
	if cfg.Providers == nil {
		cfg.Providers = map[string][]provider{}
	}
	return cfg, nil
}

// relocate applies the one edit the operator makes to upstream's base
// configs as text: upstream keeps state under <config folder>/distributions/<name>
// (~/.llama, ~/.ogx at 0.8.0: the image's home, on its read-only root
// filesystem or, here, the emptyDir of $HOME); the operator moves it to
// DataDir, the server's state volume, the same path at every line, so a
// stack's SQLite files stay where they are when it moves to another line.
// The variables that move it (SQLITE_STORE_DIR, FILES_STORAGE_DIR,
// MILVUS_DB_PATH) keep working.
func relocate(data []byte, line stackconfig.Line, distribution string) []byte {
	return bytes.ReplaceAll(data, []byte(line.ConfigDirDefault()+"/distributions/"+distribution), []byte(DataDir))
}

// quoted lists values as field.NotSupported does: "a", "b".
func quoted(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func sqlitePath(file string) string {
	return "${env." + EnvSQLiteStoreDir + ":=" + DataDir + "}/" + file
}
