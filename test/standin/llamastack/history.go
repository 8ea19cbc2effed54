package main

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// historyStore places the line's inference store, the history of chat
// completions, as the server's code does (the line's fact of the store,
// stackconfig.Line.ServerStore("inference"), naming upstream's file):
// where the config refers to it (0.2's inline inference_store; from 0.3
// storage.stores.inference, naming a backend of storage.backends), in the
// table the code names: hard-coded (chat_completions) up to 0.3.0, the
// reference's table_name from 0.7 (TableFromConfig; the fact's default
// when the config names none). So a 0.7.1 server whose config names
// another table than the one 0.3 wrote sees no history, as upstream's does
// (no migration exists). ok is false when the config places no inference
// store: the router keeps no history.
func historyStore(line stackconfig.Line, data []byte, env stackconfig.Env, home string) (stackconfig.Store, bool, error) {
	fact, ok := line.ServerStore("inference")
	if !ok || fact.Config == "" {
		return stackconfig.Store{}, false, nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return stackconfig.Store{}, false, err
	}
	ref, ok := at(doc, fact.Config).(map[string]any)
	if !ok {
		return stackconfig.Store{}, false, nil
	}
	conf := ref
	if backend, ok := ref["backend"].(string); ok {
		if conf, ok = at(doc, "storage.backends."+backend).(map[string]any); !ok {
			return stackconfig.Store{}, false, fmt.Errorf("%s.backend: no backend %q in storage.backends", fact.Config, backend)
		}
	}
	st := stackconfig.Store{Kind: "sql", Table: fact.Table}
	st.Type, _ = conf["type"].(string)
	if strings.HasSuffix(st.Type, "sqlite") {
		p, _ := conf["db_path"].(string)
		st.Path = expandPath(p, env, home)
	}
	if name, _ := ref["table_name"].(string); fact.TableFromConfig && name != "" {
		st.Table = name
	}
	return st, true, nil
}

// at is the value at a dotted path of a YAML tree, nil when absent.
func at(doc map[string]any, path string) any {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// placeholder is upstream's ${env.NAME}, ${env.NAME:=default} pattern
// (core/stack.py replace_env_vars); ${env.NAME:+value} does not place a
// store's file.
var placeholder = regexp.MustCompile(`\$\{env\.([A-Z0-9_]+)(?::=([^}]*))?}`)

// expandPath expands a db_path as the server does: its placeholders from
// env (an unset variable takes its default), then a leading ~ to home.
func expandPath(p string, env stackconfig.Env, home string) string {
	p = placeholder.ReplaceAllStringFunc(p, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		if v, ok := env(sub[1]); ok {
			return v
		}
		return sub[2]
	})
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = home + strings.TrimPrefix(p, "~")
	}
	return p
}
