package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// fileFormat heads every store file the stand-in writes: it keeps a store
// where the real server keeps its SQLite file, as JSON (the stand-in has
// no SQLite), and refuses a file it did not write.
const fileFormat = "llama-stack stand-in store (JSON, not SQLite; test/standin/llamastack)"

// file is one store file: tables of keys (a key-value store's keys, a SQL
// table's rows by id) to JSON strings.
type file struct {
	Format string                       `json:"format"`
	Tables map[string]map[string]string `json:"tables"`
}

// state holds the server's own stores (stackconfig.Result.Stores): those in
// a SQLite file are kept in a stand-in file at that path, read back at
// start; the others (PostgreSQL, Redis: no client here) in memory only.
type state struct {
	line   stackconfig.Line
	mu     sync.Mutex
	files  map[string]*file // by path; "" for the stores held in memory
	stores map[string]stackconfig.Store
	// loaded says, per store, how many entries its file held at start.
	loaded map[string]int
}

// openState opens every store as the real server does at start: a SQLite
// store's folder is made and its file created (CREATE TABLE IF NOT
// EXISTS), so a store that cannot be written stops the server before it
// serves. An existing file is read back.
func openState(line stackconfig.Line, stores map[string]stackconfig.Store) (*state, error) {
	s := &state{line: line, files: map[string]*file{"": {Tables: map[string]map[string]string{}}},
		stores: stores, loaded: map[string]int{}}
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		p := stores[name].Path
		if _, ok := s.files[p]; !ok {
			f, err := readFile(p)
			if err != nil {
				return nil, fmt.Errorf("the %s store: %w", name, err)
			}
			s.files[p] = f
			if err := writeFile(p, f); err != nil {
				return nil, fmt.Errorf("the %s store: %w", name, err)
			}
		}
		s.loaded[name] = len(s.files[p].Tables[s.table(name)])
	}
	return s, nil
}

// readFile reads a store file; a missing one is empty.
func readFile(p string) (*file, error) {
	f := &file{Format: fileFormat, Tables: map[string]map[string]string{}}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, f); err != nil || f.Format != fileFormat {
		return nil, fmt.Errorf("%s is not a store file of the stand-in", p)
	}
	if f.Tables == nil {
		f.Tables = map[string]map[string]string{}
	}
	return f, nil
}

// writeFile replaces the store file at p (made in its folder, renamed over
// it); nothing for a store held in memory.
func writeFile(p string, f *file) error {
	if p == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// table is where a store's entries live in its file: upstream's SQLite
// key-value store has one table, kvstore, whatever the namespace
// (providers/utils/kvstore/sqlite/sqlite.py); a SQL store its own.
func (s *state) table(store string) string {
	if st := s.stores[store]; st.Kind == "sql" {
		return st.Table
	}
	return "kvstore"
}

// put writes a value of a store and saves its file.
func (s *state) put(store, key string, value any) error {
	data, err := json.Marshal(value)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stores[store]
	if !ok {
		return fmt.Errorf("the config has no %s store", store)
	}
	f, table := s.files[st.Path], s.table(store)
	if f.Tables[table] == nil {
		f.Tables[table] = map[string]string{}
	}
	f.Tables[table][key] = string(data)
	return writeFile(st.Path, f)
}

// list decodes the values of a store whose keys start with prefix, in key
// order, into new T.
func list[T any](s *state, store, prefix string) ([]T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stores[store]
	if !ok {
		return nil, fmt.Errorf("the config has no %s store", store)
	}
	rows := s.files[st.Path].Tables[s.table(store)]
	out := []T{}
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(rows[k]), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// model is upstream's Model as the registry keeps it.
type model struct {
	Identifier         string         `json:"identifier"`
	ProviderResourceID string         `json:"provider_resource_id"`
	ProviderID         string         `json:"provider_id"`
	Type               string         `json:"type"`
	Metadata           map[string]any `json:"metadata"`
	ModelType          string         `json:"model_type"`
	Source             string         `json:"source"`
}

// registerModel is the models routing table's register_model
// (core/routing_tables/models.py): the provider must be an enabled
// inference provider (the only one when none is named); an alias
// (model_id other than provider_model_id) is the identifier on 0.2, else
// <provider_id>/<provider_model_id>.
func (s *state) registerModel(providers []string, in stackconfig.ModelInput, source string) (model, error) {
	if in.ModelID == nil || *in.ModelID == "" {
		return model{}, errors.New("model_id: Field required")
	}
	id := *in.ModelID
	var provider string
	switch {
	case in.ProviderID != nil && *in.ProviderID != "":
		provider = *in.ProviderID
		if !slices.Contains(providers, provider) {
			return model{}, fmt.Errorf("Provider `%s` not found", provider) //nolint:staticcheck // upstream's message, verbatim (ST1005)
		}
	case len(providers) == 1:
		provider = providers[0]
	default:
		return model{}, fmt.Errorf("Please specify a provider_id for model %s since multiple providers are available: %v", id, providers) //nolint:staticcheck // upstream's message, verbatim (ST1005)
	}
	m := model{ProviderResourceID: id, ProviderID: provider, Type: "model", Metadata: in.Metadata, ModelType: "llm", Source: source}
	if in.ProviderModelID != nil && *in.ProviderModelID != "" {
		m.ProviderResourceID = *in.ProviderModelID
	}
	if in.ModelType != nil {
		m.ModelType = *in.ModelType
	}
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	if _, ok := m.Metadata["embedding_dimension"]; !ok && m.ModelType == "embedding" {
		return model{}, errors.New("Embedding model must have an embedding dimension in its metadata") //nolint:staticcheck // upstream's message, verbatim (ST1005)
	}
	m.Identifier = provider + "/" + m.ProviderResourceID
	if s.line.Facts().ModelIdentifier.AliasWhenRenamed && id != m.ProviderResourceID {
		m.Identifier = id
	}
	return m, s.put("registry", s.registryKey("model", m.Identifier), m)
}

func (s *state) registryKey(typ, id string) string {
	return "distributions:registry:" + s.line.Facts().RegistryKey.Version + "::" + typ + ":" + id
}

func (s *state) models() ([]model, error) {
	return list[model](s, "registry", s.registryKey("model", ""))
}

// prompt is upstream's Prompt (core/prompts/prompts.py).
type prompt struct {
	PromptID  string   `json:"prompt_id"`
	Prompt    string   `json:"prompt"`
	Version   int      `json:"version"`
	Variables []string `json:"variables"`
	IsDefault bool     `json:"is_default"`
}

// createPrompt is create_prompt: version 1 under prompts:v1:<id>:1, and
// the default version under prompts:v1:<id>:default.
func (s *state) createPrompt(text string, variables []string) (prompt, error) {
	if variables == nil {
		variables = []string{}
	}
	p := prompt{PromptID: "pmpt_" + randomHex(), Prompt: text, Version: 1, Variables: variables, IsDefault: true}
	if err := s.put("prompts", "prompts:v1:"+p.PromptID+":1", p); err != nil {
		return prompt{}, err
	}
	return p, s.put("prompts", "prompts:v1:"+p.PromptID+":default", "1")
}

func (s *state) prompts() ([]prompt, error) {
	all, err := list[json.RawMessage](s, "prompts", "prompts:v1:")
	if err != nil {
		return nil, err
	}
	out := []prompt{}
	for _, raw := range all {
		var p prompt
		if json.Unmarshal(raw, &p) == nil && p.PromptID != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// conversation is upstream's Conversation (0.3 core/conversations).
type conversation struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func (s *state) createConversation(metadata map[string]string) (conversation, error) {
	c := conversation{ID: "conv_" + randomHex(), Object: "conversation", CreatedAt: time.Now().Unix(), Metadata: metadata}
	return c, s.put("conversations", c.ID, c)
}

func (s *state) conversation(id string) (conversation, bool, error) {
	all, err := list[conversation](s, "conversations", id)
	if err != nil || len(all) == 0 || all[0].ID != id {
		return conversation{}, false, err
	}
	return all[0], true, nil
}

// chatCompletion is upstream's OpenAIChatCompletion as the inference
// store keeps a row of it (providers/utils/inference/inference_store.py:
// the completion and its input messages), in the table the line's config
// and code give it (stackconfig.Store.Table: 0.3.0 hard-codes
// chat_completions, 0.7.1 honours storage.stores.inference.table_name).
type chatCompletion struct {
	ID            string           `json:"id"`
	Object        string           `json:"object"`
	Created       int64            `json:"created"`
	Model         string           `json:"model"`
	Choices       []map[string]any `json:"choices"`
	InputMessages []map[string]any `json:"input_messages"`
}

// storeChatCompletion answers a chat completion of a registered model
// with the stand-in's canned reply (it runs no model) and keeps it in the
// inference store, as the inference router does.
func (s *state) storeChatCompletion(modelID string, messages []map[string]any) (chatCompletion, error) {
	models, err := s.models()
	if err != nil {
		return chatCompletion{}, err
	}
	if !slices.ContainsFunc(models, func(m model) bool { return m.Identifier == modelID }) {
		return chatCompletion{}, fmt.Errorf("Model '%s' not found. Use 'client.models.list()' to list available Models.", modelID) //nolint:staticcheck // upstream's message, verbatim (ST1005)
	}
	c := chatCompletion{ID: "chatcmpl-" + randomHex(), Object: "chat.completion", Created: time.Now().Unix(), Model: modelID,
		Choices: []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "stand-in reply (no model runs here)"}}},
		InputMessages: messages}
	return c, s.put("inference", c.ID, c)
}

func (s *state) chatCompletions() ([]chatCompletion, error) {
	return list[chatCompletion](s, "inference", "")
}

// storeStatus is what GET /standin/v1/stores says of one store.
type storeStatus struct {
	Store     string `json:"store"`
	Type      string `json:"type"`
	Path      string `json:"path,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Table     string `json:"table,omitempty"`
	// Persisted is false for a store the stand-in holds in memory.
	Persisted bool `json:"persisted"`
	// LoadedAtStart is how many entries its file held at start.
	LoadedAtStart int `json:"loaded_at_start"`
}

func (s *state) status() []storeStatus {
	var out []storeStatus
	for _, name := range slices.Sorted(maps.Keys(s.stores)) {
		st := s.stores[name]
		out = append(out, storeStatus{Store: name, Type: st.Type, Path: st.Path, Namespace: st.Namespace, Table: st.Table,
			Persisted: st.Path != "", LoadedAtStart: s.loaded[name]})
	}
	return out
}

// randomHex is upstream's id suffix: 24 random bytes, hex.
func randomHex() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
