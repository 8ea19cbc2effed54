package runconfig

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 3, the state's names (render_state.go): a stack moves between
// lines with its state (the volume, the PostgreSQL database), and a line's
// new defaults must never point it at empty state. The names the server
// finds its state under are written into the config explicitly, as the
// line that wrote the state (Operand.StateLine, else the operand's own
// line) named them: the SQL tables of the server's stores where the
// operand's line reads table_name from the config, and the database (and
// key-value table) of a PostgreSQL backend. The config folder is
// ServerEnv's (ConfigDir).

// stateTable is the SQL table the line state kept a server store in
// (Facts.ServerStores): the table its code fixes, or, where the line reads
// table_name from the config (0.7 on), the name the operator wrote there,
// which is the one of upstream's config of the distribution (base), or the
// line's default. "" when the line has no such store.
func stateTable(state stackconfig.Line, store, base string) string {
	s, ok := state.ServerStore(store)
	if !ok || s.Kind != "sql" {
		return ""
	}
	if s.TableFromConfig {
		for file, name := range s.DistributionsName {
			if path.Base(path.Dir(file)) == base {
				return name
			}
		}
	}
	return s.Table
}

// nameState writes the state's names into the config of the operand's
// line. A store whose table the operand's line fixes in code and the
// state's line named otherwise cannot be pointed at the old state: an
// error (the server would start on an empty table).
func nameState(cfg *runConfig, line, state stackconfig.Line) error {
	f := line.Facts()
	for _, s := range slices.Concat(f.ServerStores, f.HistoryStores) {
		if s.Kind != "sql" || s.Table == "" {
			continue
		}
		want := stateTable(state, s.Store, cfg.ImageName)
		if want == "" {
			continue // the state's line had no such store: nothing to find
		}
		if !s.TableFromConfig {
			if want != s.Table {
				return fmt.Errorf("the stack's state was written by %s, which keeps its %s store in table %s; %s reads only table %s (%s), "+
					"so it would start on an empty table: keep the operator release of that line", product(state), s.Store, want, product(line), s.Table, s.Source)
			}
			continue
		}
		setTable(cfg, s.Config, want)
	}
	if cfg.Storage != nil {
		for _, b := range cfg.Storage.Backends {
			switch b["type"] {
			case "kv_postgres":
				setDefault(b, "db", state.DefaultPostgresDatabase(stackconfig.KVBackend))
				setDefault(b, "table_name", state.DefaultPostgresKVTable())
			case "sql_postgres":
				setDefault(b, "db", state.DefaultPostgresDatabase(stackconfig.SQLBackend))
			}
		}
	}
	return nil
}

// setDefault sets key of m to value unless it is set or value is empty.
func setDefault(m map[string]any, key, value string) {
	if _, ok := m[key]; !ok && value != "" {
		m[key] = value
	}
}

// setTable sets table_name on the store reference at config, a path of
// Facts.ServerStores.Config: storage.stores.<store>, or
// providers.<api>[].config.<key>... (every provider of the API that has
// the reference). A reference the config lacks is left alone: the store
// is not used.
func setTable(cfg *runConfig, config, table string) {
	parts := strings.Split(config, ".")
	switch {
	case len(parts) == 3 && parts[0] == "storage" && parts[1] == "stores":
		if cfg.Storage != nil && cfg.Storage.Stores[parts[2]] != nil {
			cfg.Storage.Stores[parts[2]]["table_name"] = table
		}
	case len(parts) > 3 && parts[0] == "providers" && strings.HasSuffix(parts[1], "[]") && parts[2] == "config":
		for _, p := range cfg.Providers[strings.TrimSuffix(parts[1], "[]")] {
			ref := p.Config
			for _, k := range parts[3:] {
				next, _ := ref[k].(map[string]any)
				ref = next
			}
			if ref != nil {
				ref["table_name"] = table
			}
		}
	}
}
