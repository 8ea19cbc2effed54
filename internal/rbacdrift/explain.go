package rbacdrift

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
)

// Unexplained is a rule of the operator's ClusterRole that no component
// needs and nothing explains.
type Unexplained struct {
	// File is the RBAC manifest that holds it.
	File string `json:"file"`
	// Rule is the rule, one group and resource (or URL) with its verbs.
	Rule rbacv1.PolicyRule `json:"rule"`
	// Markers are the source markers that generate it ("file:line").
	Markers []string `json:"markers,omitempty"`
}

// Explained is a rule of the operator's ClusterRole and why it is there.
type Explained struct {
	Rule rbacv1.PolicyRule `json:"rule"`
	Why  string            `json:"why"`
}

// AppliedResources reads the kinds the operator applies from the apply
// package's source (its Kind[*<pkg>.<Type>, ...] variables) and returns
// their group/resource, from client-go's scheme.
func AppliedResources(kindsFile string) (map[schema.GroupResource]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, kindsFile, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("applied kinds: %w", err)
	}
	imports := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = path
	}
	types := map[string]schema.GroupVersionKind{} // "<pkg path>.<Type>" -> GVK
	for gvk, t := range clientgoscheme.Scheme.AllKnownTypes() {
		types[t.PkgPath()+"."+t.Name()] = gvk
	}
	out := map[schema.GroupResource]string{}
	var errs []string
	ast.Inspect(f, func(n ast.Node) bool {
		idx, ok := n.(*ast.IndexListExpr)
		if !ok || len(idx.Indices) == 0 {
			return true
		}
		if id, ok := idx.X.(*ast.Ident); !ok || id.Name != "Kind" {
			return true
		}
		star, ok := idx.Indices[0].(*ast.StarExpr)
		if !ok {
			return true
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		gvk, ok := types[imports[pkg.Name]+"."+sel.Sel.Name]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: %s.%s is not in client-go's scheme", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name))
			return true
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		out[plural.GroupResource()] = gvk.Kind
		return true
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("applied kinds: %s", strings.Join(errs, "; "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("applied kinds: no Kind[...] variables in %s", kindsFile)
	}
	return out, nil
}

// Explain sorts the rules of the operator's ClusterRoles into explained and
// unexplained. A rule (one group, resource, verb and name) is explained when
//   - a component object needs it (needed holds what Coverage asked for), or
//   - its resource (or the resource of its subresource) is in the operator's
//     own API group, or is a kind the operator applies (applied), or
//   - a marker that generates it carries a reason: a `// rbac: <why>` comment
//     on the line right above the marker.
//
// Explanations are per resource, not per verb: an applied kind explains
// every verb on it.
func Explain(rules []rbacv1.PolicyRule, needed []rbacv1.PolicyRule, applied map[schema.GroupResource]string, markers []SourceMarker, file string) ([]Explained, []Unexplained) {
	var explained []Explained
	var unexplained []rbacv1.PolicyRule
	for _, r := range rules {
		for _, atom := range validation.BreakdownRule(r) {
			if why := explain(atom, needed, applied, markers); why != "" {
				explained = append(explained, Explained{Rule: atom, Why: why})
			} else {
				unexplained = append(unexplained, atom)
			}
		}
	}
	var out []Unexplained
	for _, r := range Compact(unexplained) {
		u := Unexplained{File: file, Rule: r}
		for _, m := range markers {
			if ok, _ := validation.Covers([]rbacv1.PolicyRule{m.Rule}, []rbacv1.PolicyRule{r}); ok || overlaps(m.Rule, r) {
				u.Markers = append(u.Markers, fmt.Sprintf("%s:%d", m.File, m.Line))
			}
		}
		out = append(out, u)
	}
	return explained, out
}

func explain(atom rbacv1.PolicyRule, needed []rbacv1.PolicyRule, applied map[schema.GroupResource]string, markers []SourceMarker) string {
	for _, n := range needed {
		for _, a := range validation.BreakdownRule(n) {
			if ok, _ := validation.Covers([]rbacv1.PolicyRule{atom}, []rbacv1.PolicyRule{a}); ok {
				return "needed to create a component's RBAC object"
			}
		}
	}
	if len(atom.Resources) == 1 {
		resource, _, _ := strings.Cut(atom.Resources[0], "/")
		gr := schema.GroupResource{Group: atom.APIGroups[0], Resource: resource}
		if gr.Group == v1alpha1.GroupVersion.Group {
			return "the operator's own API"
		}
		if kind, ok := applied[gr]; ok {
			return "the operator applies " + kind
		}
	}
	for _, m := range markers {
		if m.Reason == "" || m.Namespace != "" {
			continue
		}
		if ok, _ := validation.Covers([]rbacv1.PolicyRule{m.Rule}, []rbacv1.PolicyRule{atom}); ok {
			return fmt.Sprintf("%s:%d: %s", m.File, m.Line, m.Reason)
		}
	}
	return ""
}

// overlaps reports whether a marker's rule and a compacted rule share a
// group and resource (or URL): the marker is where the rule comes from.
func overlaps(marker, r rbacv1.PolicyRule) bool {
	if len(r.NonResourceURLs) > 0 {
		return slices.ContainsFunc(r.NonResourceURLs, func(u string) bool { return slices.Contains(marker.NonResourceURLs, u) })
	}
	return slices.ContainsFunc(r.APIGroups, func(g string) bool { return slices.Contains(marker.APIGroups, g) }) &&
		slices.ContainsFunc(r.Resources, func(x string) bool { return slices.Contains(marker.Resources, x) })
}
