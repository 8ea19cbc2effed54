package runconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
)

// FuzzGenerate feeds arbitrary InferenceStack documents to the pipeline:
// it never panics, never changes its input, and gives the same bytes, hash
// and environment on a second run. The seeds are the golden inputs, so a
// plain `go test` runs them once.
func FuzzGenerate(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*", "in", "stack.yaml"))
	require.NoError(f, err)
	for _, path := range inputs {
		data, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var stack v1alpha1.InferenceStack
		if err := yaml.Unmarshal(data, &stack); err != nil {
			return
		}
		for _, l := range lines {
			fuzzOne(t, stack, data, l.operand)
		}
	})
}

func fuzzOne(t *testing.T, stack v1alpha1.InferenceStack, data []byte, operand Operand) {
	{
		spec := *stack.Spec.DeepCopy()
		if spec.OverrideConfig != nil {
			first, err1 := FromOverride(stack.Name, spec, operand, data)
			second, err2 := FromOverride(stack.Name, spec, operand, data)
			require.Equal(t, err1, err2)
			require.Equal(t, first, second)
			return
		}
		first, err1 := Generate(stack.Name, spec, operand)
		second, err2 := Generate(stack.Name, spec, operand)
		require.True(t, equality.Semantic.DeepEqual(stack.Spec, spec), "Generate changed its input")
		if err1 != nil {
			require.EqualError(t, err2, err1.Error())
			return
		}
		require.NoError(t, err2)
		require.True(t, bytes.Equal(first.YAML, second.YAML), "not deterministic")
		require.Equal(t, first.Hash, second.Hash)
		require.Equal(t, first.Env, second.Env)
		checkInvariants(t, spec, first)
	}
}
