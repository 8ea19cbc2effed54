package v1alpha2_test

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// TestConditionListsAreComplete: every Type* and Reason* constant of
// conditions.go is in ConditionTypes or Reasons, and every Phase* in Phases,
// so code that iterates the lists (and the docs) sees them all.
func TestConditionListsAreComplete(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "conditions.go", nil, 0)
	require.NoError(t, err)
	consts := map[string][]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for i, name := range spec.(*ast.ValueSpec).Names {
				lit, ok := spec.(*ast.ValueSpec).Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a literal", name.Name)
				value := constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
				for _, prefix := range []string{"Type", "Reason", "Phase"} {
					if strings.HasPrefix(name.Name, prefix) && name.IsExported() {
						consts[prefix] = append(consts[prefix], value)
					}
				}
			}
		}
	}
	var phases []string
	for _, p := range v1alpha2.Phases {
		phases = append(phases, string(p))
	}
	for prefix, list := range map[string][]string{"Type": v1alpha2.ConditionTypes, "Reason": v1alpha2.Reasons, "Phase": phases} {
		want := slices.Sorted(slices.Values(consts[prefix]))
		got := slices.Sorted(slices.Values(list))
		require.Equal(t, want, got, "the %s constants and their list differ", prefix)
		require.Len(t, slices.Compact(got), len(list), "duplicates in the %s list", prefix)
	}
	require.Subset(t, v1alpha2.ConditionTypes, []string{"ConfigGenerated", "Available", "Progressing", "Degraded"})
}
