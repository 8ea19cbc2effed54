package stackconfig

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// placeholderRE is upstream's pattern (llama_stack/core/stack.py,
// replace_env_vars, identical at v0.2.23 and v0.3.0).
var placeholderRE = regexp.MustCompile(`\$\{env\.([A-Z0-9_]+)(?::([=+])([^}]*))?}`)

// disabledID is the provider id upstream treats as "switched off" besides
// an empty one.
const disabledID = "__disabled__"

// Env looks up an environment variable of the server container; ok is
// false when it is unset (upstream treats an empty value as unset too).
type Env func(name string) (value string, ok bool)

// MapEnv is an Env over a map.
func MapEnv(m map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok && v != ""
	}
}

// EnvError is upstream's EnvVarError: ${env.NAME} without a default names
// a variable that is unset or empty.
type EnvError struct {
	// Name of the variable.
	Name string
	// Path of the field, e.g. providers.inference[0].config.model.
	Path string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("%s: environment variable %s is not set or empty: the server exits at start "+
		"(use ${env.%s:=default}, or set the variable)", e.Path, e.Name, e.Name)
}

// Placeholders lists the variable names of every placeholder in s.
func Placeholders(s string) []string {
	var names []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// expand replaces the placeholders of a decoded YAML tree as upstream does
// (replace_env_vars, core/stack.py): mappings and lists recursively; in a
// list, an element with a provider_id that expands to "__disabled__" is
// dropped, and, from 0.4 on (rules), one with an id field that expands to
// nothing; from 0.4 on a server.auth whose provider_config.type expands to
// nothing has provider_config null; a string with a placeholder is
// expanded, "~" expanded to home, and the result converted to null, a bool,
// an int or a float when it reads as one.
func expand(v any, at string, env Env, home string, rules EnvExpansionFact) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		if pc, ok := t["provider_config"].(map[string]any); ok && rules.AuthOffWhenTypeEmpty && at == "server.auth" {
			if typ, set := pc["type"]; set {
				if r, err := expand(typ, at+".provider_config.type", env, home, rules); err == nil && (r == nil || r == "") {
					for _, k := range sortedKeys(t) {
						if k == "provider_config" {
							continue
						}
						x, err := expand(t[k], join(at, k), env, home, rules)
						if err != nil {
							return nil, err
						}
						out[k] = x
					}
					out["provider_config"] = nil
					return out, nil
				}
			}
		}
		for _, k := range sortedKeys(t) { // the first error found is always the same one
			x, err := expand(t[k], join(at, k), env, home, rules)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
	elements:
		for i, e := range t {
			p := fmt.Sprintf("%s[%d]", at, i)
			if m, ok := e.(map[string]any); ok {
				if id, ok := m["provider_id"].(string); ok {
					if r, err := expand(id, p+".provider_id", env, home, rules); err == nil && r == disabledID {
						continue
					}
				}
				for _, f := range rules.SkipEmptyIDFields {
					if id, ok := m[f]; ok {
						if r, err := expand(id, p+"."+f, env, home, rules); err == nil && (r == nil || r == "") {
							continue elements
						}
					}
				}
			}
			x, err := expand(e, p, env, home, rules)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case string:
		return expandString(t, at, env, home)
	default:
		return v, nil
	}
}

func expandString(s, at string, env Env, home string) (any, error) {
	var failed error
	out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		g := placeholderRE.FindStringSubmatch(m)
		name, op, arg := g[1], g[2], g[3]
		value, set := env(name)
		var r string
		switch op {
		case "=":
			switch {
			case set:
				r = value
			case arg == "":
				return ""
			default:
				r = arg
			}
		case "+":
			if !set || arg == "" {
				return ""
			}
			r = arg
		default:
			if !set {
				if failed == nil {
					failed = &EnvError{Name: name, Path: at}
				}
				return ""
			}
			r = value
		}
		return expandHome(r, home)
	})
	if failed != nil {
		return nil, failed
	}
	if out == s {
		return s, nil
	}
	return convert(out), nil
}

// expandHome is Python's os.path.expanduser for the forms upstream writes.
func expandHome(s, home string) string {
	if s == "~" {
		return home
	}
	if strings.HasPrefix(s, "~/") {
		return path.Join(home, s[2:])
	}
	return s
}

// convert is upstream's _convert_string_to_proper_type.
func convert(s string) any {
	if s == "" {
		return nil
	}
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}
