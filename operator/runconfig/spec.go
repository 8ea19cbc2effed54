package runconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/distributions"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// Stage 1 of the walk (doc.go): the spec. What the operand pin and the
// spec ask for, before any layout: the Llama Stack line, the distribution.

// Operand is what the operator knows of the server it deploys.
type Operand struct {
	// LlamaStackVersion is the pinned Llama Stack version (e.g. 0.3.0); it
	// selects the run-config layout.
	LlamaStackVersion string
	// StateLine is the line whose names the stack's existing state uses;
	// empty for a new stack. A server of another line than the one that
	// wrote the state finds it only under the old names: the SQL tables of
	// the inference and responses stores (0.3.0 hard-codes
	// chat_completions and openai_responses, 0.7.1's starter names
	// inference_store and responses), the PostgreSQL databases (llamastack
	// and llamastack_kvstore up to 0.7.1, ogx and ogx_kvstore at 0.8.0) and
	// the config folder (~/.llama, ~/.ogx). When set, Generate renders the
	// names that line wrote, so the operand's line reads the old state;
	// when empty, the operand line's own names. Either way every name is
	// written into the config explicitly, so that a later line's new
	// defaults never point the stack at empty state. The controller keeps
	// it (helper move): the line the stack first ran, until a migration
	// renames the state.
	StateLine stackconfig.Line
}

// LineOf is the line of the pinned operand.
func (o Operand) LineOf() (stackconfig.Line, error) {
	return stackconfig.LineOf(o.LlamaStackVersion)
}

// stateLine is the line whose names the rendered config gives the state:
// StateLine, or the operand's line for a new stack. A StateLine the
// operator does not know is an error: its names are not known either.
func (o Operand) stateLine() (stackconfig.Line, error) {
	if o.StateLine == "" {
		return o.LineOf()
	}
	if !o.StateLine.Known() {
		return "", fmt.Errorf("the stack's state was written by Llama Stack line %q, which this operator does not know (it knows %s): "+
			"its state names cannot be rendered", o.StateLine, strings.Join(lineNames(), ", "))
	}
	return o.StateLine, nil
}

func lineNames() []string {
	var out []string
	for _, l := range stackconfig.Lines() {
		out = append(out, string(l))
	}
	return out
}

// Distributions lists the distributions upstream publishes an image of at
// every line the operator knows (their base configs are embedded), sorted.
// The CRD's remote-vllm is an alias onto starter (RemoteVLLMAlias).
func Distributions() []string {
	return []string{
		string(v1alpha2.DistributionMetaReferenceGPU),
		string(v1alpha2.DistributionPostgresDemo),
		string(v1alpha2.DistributionStarter),
	}
}

// LineDistributions lists the distributions of Distributions upstream
// publishes an image of at the line's tag (Facts.Images, from upstream's
// build-distributions workflow: only starter at 0.7.1 and 0.8.0) whose
// base config is embedded, sorted. Where the tag has no such workflow
// (0.2.23, 0.3.0), every distribution with an embedded base.
func LineDistributions(line stackconfig.Line) []string {
	if !line.Known() {
		return nil
	}
	var out []string
	for _, d := range Distributions() {
		if published := line.PublishedDistributions(); len(published) > 0 && !slices.Contains(published, d) {
			continue
		}
		if _, err := distributions.FS.ReadFile(line.Tag() + "/" + d + ".yaml"); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// product is how the operand of a line calls itself, with the version of
// the line's tag: "Llama Stack 0.7.1", "OGX 0.8.0".
func product(line stackconfig.Line) string {
	return line.Product() + " " + strings.TrimPrefix(line.Tag(), "v")
}

// ImageDistribution is the distribution whose image serves the named one:
// remote-vllm runs the starter image (upstream has no remote-vllm
// distribution after 0.2.14; vLLM is a provider of starter).
func ImageDistribution(name v1alpha2.DistributionName) string {
	if name == v1alpha2.DistributionRemoteVLLM {
		return string(v1alpha2.DistributionStarter)
	}
	return string(name)
}

func distributionNames() []string {
	var out []string
	for _, d := range v1alpha2.DistributionNames {
		out = append(out, string(d))
	}
	return out
}

func countProviders(p *v1alpha2.ProvidersSpec) int {
	n := 0
	for _, l := range apiProviders(p) {
		n += len(l.list)
	}
	return n
}
