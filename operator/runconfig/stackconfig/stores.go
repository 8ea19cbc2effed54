package stackconfig

import (
	"strings"
)

// Store is where the server keeps one of its own stores (Facts.ServerStores).
type Store struct {
	// Kind is kv or sql.
	Kind string
	// Type is the store's type as configured: sqlite, redis, postgres,
	// mongodb (0.2 inline stores) or kv_sqlite, sql_postgres, ... (0.3
	// backends).
	Type string
	// Path is the SQLite file of a SQLite store, the environment
	// expanded; "" for the others. A relative one is relative to the
	// working directory.
	Path string
	// Namespace of a key-value store and Table of a SQL one, where the
	// config or upstream's code names them.
	Namespace, Table string
}

// serverStores resolves the line's ServerStores facts against a config:
// at places a config key (metadata_store, storage.stores.metadata, ...),
// ok false when the config leaves it unset.
func serverStores(f *Facts, at func(key string) (Store, bool), imageName string, env Env, home string) map[string]Store {
	out := map[string]Store{}
	for _, fact := range f.ServerStores {
		s, ok := Store{}, false
		if fact.Config != "" {
			s, ok = at(fact.Config)
		}
		if !ok {
			if fact.Default == "" {
				continue // the start-up checks refuse the config
			}
			s = Store{Type: "sqlite", Path: strings.NewReplacer("${"+f.ConfigDir.Env+"}", configDir(f, env, home),
				"${image_name}", imageName).Replace(fact.Default)}
		}
		s.Kind = fact.Kind
		if fact.Namespace != "" {
			s.Namespace = fact.Namespace
		}
		if fact.Table != "" {
			s.Table = fact.Table
		}
		out[fact.Store] = s
	}
	return out
}

// inlineStore is a 0.2 inline store config as a Store.
func inlineStore(m map[string]any) Store {
	s := Store{}
	s.Type, _ = m["type"].(string)
	if s.Type == "sqlite" {
		s.Path, _ = m["db_path"].(string)
	}
	s.Namespace, _ = m["namespace"].(string)
	return s
}

// storeAt places a 0.2 server store: only metadata_store does.
func (c *V02) storeAt(key string) (Store, bool) {
	if key == "metadata_store" && c.MetadataStore != nil {
		return inlineStore(c.MetadataStore), true
	}
	return Store{}, false
}

// storeAt places a 0.3 server store: storage.stores.<name> refers to a
// backend of storage.backends.
func (c *V03) storeAt(key string) (Store, bool) {
	name, ok := strings.CutPrefix(key, "storage.stores.")
	if !ok || c.Storage == nil || c.Storage.Stores == nil {
		return Store{}, false
	}
	var backend, namespace, table *string
	st := c.Storage.Stores
	switch name {
	case "metadata", "prompts", "connectors":
		ref := map[string]*KVRef{"metadata": st.Metadata, "prompts": st.Prompts, "connectors": st.Connectors}[name]
		if ref != nil {
			backend, namespace = ref.Backend, ref.Namespace
		}
	case "inference", "conversations", "responses":
		ref := map[string]*SQLRef{"inference": st.Inference, "conversations": st.Conversations, "responses": st.Responses}[name]
		if ref != nil {
			backend, table = ref.Backend, ref.TableName
		}
	}
	if backend == nil {
		return Store{}, false
	}
	b := c.Storage.Backends[*backend]
	s := Store{}
	s.Type, _ = b["type"].(string)
	if strings.HasSuffix(s.Type, "_sqlite") {
		s.Path, _ = b["db_path"].(string)
	}
	if namespace != nil {
		s.Namespace = *namespace
	}
	if table != nil {
		s.Table = *table
	}
	return s, true
}

// registered lists the models a config registers at start: those naming
// a provider that is on (register_resources skips the others).
func registered(models []ModelInput) []ModelInput {
	var out []ModelInput
	for _, m := range models {
		if m.ProviderID != nil && *m.ProviderID != "" && *m.ProviderID != disabledID {
			out = append(out, m)
		}
	}
	return out
}
