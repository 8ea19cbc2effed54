package rbacdrift

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/controller-tools/pkg/loader"
	"sigs.k8s.io/controller-tools/pkg/markers"
	"sigs.k8s.io/controller-tools/pkg/rbac"
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

// ReadMarkers reads the +kubebuilder:rbac markers of the Go packages at and
// below dir the way controller-gen reads them for role.yaml: the packages'
// non-test files through controller-tools' loader, the markers through its
// marker collector with its RBAC generator's definition
// (rbac.RuleDefinition), so a marker counts exactly when controller-gen
// makes a rule of it (not, for instance, inside a type's doc comment). Each
// marker keeps its file and line and the `// rbac:` comment right above it.
func ReadMarkers(dir string) ([]SourceMarker, error) {
	out, err := readMarkers(dir)
	if err != nil {
		return nil, fmt.Errorf("reading RBAC markers: %w", err)
	}
	return out, nil
}

func readMarkers(dir string) ([]SourceMarker, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder of Go packages: give the folder controller-gen reads (operator/internal)", dir)
	}
	fset := token.NewFileSet()
	pkgs, err := loader.LoadRootsWithConfig(&packages.Config{Fset: fset}, abs+"/...")
	if err != nil {
		return nil, err
	}
	reg := &markers.Registry{}
	if err := reg.Register(rbac.RuleDefinition); err != nil {
		return nil, err
	}
	col := &markers.Collector{Registry: reg}
	var out []SourceMarker
	for _, pkg := range pkgs {
		byNode, err := col.MarkersInPackage(pkg)
		if err != nil {
			return nil, err
		}
		if len(pkg.Errors) > 0 {
			return nil, fmt.Errorf("package %s: %w", pkg.PkgPath, pkg.Errors[0])
		}
		for _, file := range pkg.Syntax {
			name, err := filepath.Rel(abs, fset.Position(file.Package).Filename)
			if err != nil {
				return nil, err
			}
			out = append(out, locate(filepath.Join(dir, name), fset, file, byNode[file][rbac.RuleDefinition.Name])...)
		}
	}
	slices.SortStableFunc(out, func(a, b SourceMarker) int { return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line)) })
	return out, nil
}

// locate finds the comment line of each package-level RBAC marker the
// collector gave for file (values of rbac.Rule), and the reason comment
// right above it.
func locate(name string, fset *token.FileSet, file *ast.File, values []any) []SourceMarker {
	var out []SourceMarker
	for _, group := range file.Comments {
		for i, c := range group.List {
			text, ok := strings.CutPrefix(c.Text, "//")
			text = strings.TrimSpace(text)
			if !ok || !strings.HasPrefix(text, markerPrefix) {
				continue
			}
			v, err := rbac.RuleDefinition.Parse(text)
			if err != nil {
				continue // the collector has reported it
			}
			// Markers the collector did not give (in a type's doc comment)
			// make no rule.
			j := slices.IndexFunc(values, func(x any) bool { return reflect.DeepEqual(x, v) })
			if j < 0 {
				continue
			}
			values = slices.Delete(values, j, j+1)
			rule := v.(rbac.Rule)
			m := SourceMarker{File: name, Line: fset.Position(c.Slash).Line, Rule: rule.ToRule(), Namespace: rule.Namespace}
			if i > 0 {
				prev := strings.TrimSpace(strings.TrimPrefix(group.List[i-1].Text, "//"))
				if reason, ok := strings.CutPrefix(prev, ReasonPrefix); ok {
					m.Reason = strings.TrimSpace(reason)
				}
			}
			out = append(out, m)
		}
	}
	return out
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
