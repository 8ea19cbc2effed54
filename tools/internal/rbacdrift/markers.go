package rbacdrift

import (
	"bufio"
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

const markerPrefix = "+kubebuilder:rbac:"

// ReasonPrefix starts the comment line, right above an RBAC marker, that
// explains why the operator needs the marker's rules when no component and
// no applied kind does (see Explain).
const ReasonPrefix = "rbac:"

// SourceMarker is one +kubebuilder:rbac marker of the operator's source.
type SourceMarker struct {
	// File and Line locate it.
	File string `json:"file"`
	Line int    `json:"line"`
	// Rule is what it generates.
	Rule rbacv1.PolicyRule `json:"rule"`
	// Namespace is set for markers that generate a namespaced Role.
	Namespace string `json:"namespace,omitempty"`
	// Reason is the text of a `// rbac: ...` comment line right above it.
	Reason string `json:"reason,omitempty"`
}

// ReadMarkers reads the +kubebuilder:rbac markers of the non-test Go files
// under dir, the files controller-gen reads for role.yaml.
func ReadMarkers(dir string) ([]SourceMarker, error) {
	var out []SourceMarker
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		ms, err := readFileMarkers(path)
		out = append(out, ms...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading RBAC markers: %w", err)
	}
	return out, nil
}

func readFileMarkers(path string) ([]SourceMarker, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []SourceMarker
	prev := ""
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		text, isComment := strings.CutPrefix(line, "//")
		text = strings.TrimSpace(text)
		if body, ok := strings.CutPrefix(text, markerPrefix); isComment && ok {
			m, err := parseMarker(body)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			m.File, m.Line = path, n
			if reason, ok := strings.CutPrefix(prev, ReasonPrefix); ok {
				m.Reason = strings.TrimSpace(reason)
			}
			out = append(out, m)
		}
		prev = ""
		if isComment {
			prev = text
		}
	}
	return out, s.Err()
}

// parseMarker parses the arguments of a +kubebuilder:rbac marker:
// groups=a;b,resources=x;y,resourceNames=n,verbs=v;w,urls=/u,namespace=ns.
func parseMarker(body string) (SourceMarker, error) {
	var m SourceMarker
	for field := range strings.SplitSeq(body, ",") {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return m, fmt.Errorf("RBAC marker argument %q is not key=value", field)
		}
		var values []string
		for v := range strings.SplitSeq(value, ";") {
			values = append(values, strings.Trim(v, `"`))
		}
		switch key {
		case "groups":
			m.Rule.APIGroups = values
		case "resources":
			m.Rule.Resources = values
		case "resourceNames":
			m.Rule.ResourceNames = values
		case "verbs":
			m.Rule.Verbs = values
		case "urls":
			m.Rule.NonResourceURLs = values
		case "namespace":
			m.Namespace = strings.Trim(value, `"`)
		default:
			return m, fmt.Errorf("RBAC marker argument %q is unknown", key)
		}
	}
	return m, nil
}

// Marker returns the +kubebuilder:rbac marker that grants rule.
func Marker(rule rbacv1.PolicyRule) string {
	var b strings.Builder
	b.WriteString("// " + markerPrefix)
	if len(rule.NonResourceURLs) > 0 {
		b.WriteString("urls=" + strings.Join(rule.NonResourceURLs, ";"))
	} else {
		groups := strings.Join(rule.APIGroups, ";")
		if groups == "" {
			groups = `""`
		}
		b.WriteString("groups=" + groups + ",resources=" + strings.Join(rule.Resources, ";"))
		if len(rule.ResourceNames) > 0 {
			b.WriteString(",resourceNames=" + strings.Join(rule.ResourceNames, ";"))
		}
	}
	b.WriteString(",verbs=" + strings.Join(rule.Verbs, ";"))
	return b.String()
}

// Compact merges rules broken down to one group, resource, verb and name
// into as few rules as markers need: verbs of one group, resource and names
// first, then resources of one group, names and verbs.
func Compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type target struct{ group, resource, names, url string }
	verbs := map[target][]string{}
	var order []target
	for _, r := range rules {
		for _, a := range validation.BreakdownRule(r) {
			t := target{names: strings.Join(a.ResourceNames, ";")}
			if len(a.NonResourceURLs) > 0 {
				t.url = a.NonResourceURLs[0]
			} else {
				t.group, t.resource = a.APIGroups[0], a.Resources[0]
			}
			if _, ok := verbs[t]; !ok {
				order = append(order, t)
			}
			if !slices.Contains(verbs[t], a.Verbs[0]) {
				verbs[t] = append(verbs[t], a.Verbs[0])
			}
		}
	}
	type merged struct{ group, names, verbs string }
	var out []rbacv1.PolicyRule
	index := map[merged]int{}
	for _, t := range order {
		vs := slices.Sorted(slices.Values(verbs[t]))
		if t.url != "" {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{t.url}, Verbs: vs})
			continue
		}
		k := merged{t.group, t.names, strings.Join(vs, ";")}
		if i, ok := index[k]; ok {
			out[i].Resources = append(out[i].Resources, t.resource)
			continue
		}
		index[k] = len(out)
		r := rbacv1.PolicyRule{APIGroups: []string{t.group}, Resources: []string{t.resource}, Verbs: vs}
		if t.names != "" {
			r.ResourceNames = strings.Split(t.names, ";")
		}
		out = append(out, r)
	}
	for i := range out {
		slices.Sort(out[i].Resources)
	}
	slices.SortStableFunc(out, func(a, b rbacv1.PolicyRule) int {
		return cmp.Compare(Marker(a), Marker(b))
	})
	return out
}

// String renders a rule on one line, like kubectl describe: group, resources,
// names or URLs, verbs.
func String(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return fmt.Sprintf("nonResourceURLs=%s verbs=%s", strings.Join(r.NonResourceURLs, ","), strings.Join(r.Verbs, ","))
	}
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		groups[i] = cmp.Or(g, `""`)
	}
	s := fmt.Sprintf("apiGroups=%s resources=%s", strings.Join(groups, ","), strings.Join(r.Resources, ","))
	if len(r.ResourceNames) > 0 {
		s += " resourceNames=" + strings.Join(r.ResourceNames, ",")
	}
	return s + " verbs=" + strings.Join(r.Verbs, ",")
}
