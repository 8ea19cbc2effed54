package controller_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// The size and seed of TestAdmittedSpecs: fixed for CI; for a longer run,
// e.g. `go test ./operator/internal/controller/ -run TestAdmittedSpecs -args -specs 5000 -seed 7`.
var (
	propertySpecs = flag.Int("specs", 400, "TestAdmittedSpecs: how many specs to draw")
	propertySeed  = flag.Int64("seed", 1, "TestAdmittedSpecs: the seed of the spec filler")
)

// pin03 is testPin for the 0.3 line (release 2.0.0's operands).
var pin03 = pin.Pin{OperatorVersion: "2.0.0", LlamaStackVersion: "0.3.0", Operands: map[string]string{
	"starter":            "docker.io/llamastack/distribution-starter:0.3.0",
	"postgres-demo":      "docker.io/llamastack/distribution-postgres-demo:0.3.0",
	"meta-reference-gpu": "docker.io/llamastack/distribution-meta-reference-gpu:0.3.0",
}}

// TestAdmittedSpecs is the operator's promise about specs, as a property:
// InferenceStack specs filled at random from the API's types
// (testutil.SpecFiller: providers, disabled APIs, resources, storage, ...)
// are sent to the real kube-apiserver with the CRD installed (a server-side
// dry-run create: its OpenAPI schema, defaults and CEL rules); each spec it
// admits, as it admits it (defaults applied), gives on each line either a
// run config that line's model accepts (with the server container's
// environment), or an error that the reconcile turns into the condition
// ConfigGenerated=False, reason InvalidConfig. None is accepted by the
// operator and refused by the model. The shares are logged.
// SPEC_PROPERTY_DUMP=DIR writes each accepted config (DIR/<tag>/<n>.yaml
// and its environment, <n>.env) for upstream's own start-up
// (hack/llamastack/upstream-startup.sh).
func TestAdmittedSpecs(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "property-"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })

	filler := testutil.SpecFiller(*propertySeed)
	stacks := make([]*v1alpha1.InferenceStack, *propertySpecs)
	for i := range stacks {
		s := &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: ns.Name}}
		filler.Fill(&s.Spec)
		stacks[i] = s
	}

	// The API server's verdicts, a few requests at a time.
	refusals := make([]error, len(stacks))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				err := env.Client.Create(ctx, stacks[i], client.DryRunAll)
				if err != nil && !apierrors.IsInvalid(err) {
					t.Errorf("spec %d: the API server answered %v", i, err)
				}
				refusals[i] = err
			}
		})
	}
	for i := range stacks {
		work <- i
	}
	close(work)
	wg.Wait()

	dump := os.Getenv("SPEC_PROPERTY_DUMP")
	crdReasons, genReasons := map[string]int{}, map[string]int{}
	accepted := map[string]int{}
	admitted := 0
	for i, s := range stacks {
		if refusals[i] != nil {
			crdReasons[crdReason(refusals[i])]++
			continue
		}
		admitted++
		for _, p := range []pin.Pin{testPin, pin03} {
			line, err := stackconfig.LineOf(p.LlamaStackVersion)
			require.NoError(t, err)
			res, typ, reason, err := controller.RunConfig(testutil.Hub(s), p)
			if err != nil {
				require.Equal(t, []string{v1alpha2.TypeConfigGenerated, v1alpha2.ReasonInvalidConfig}, []string{typ, reason},
					"spec %d on %s: the reconcile gives no InvalidConfig condition for: %v", i, line, err)
				genReasons[line.Tag()+": "+generatorReason(err)]++
				continue
			}
			env := runconfig.ContainerEnv(testutil.Hub(s).Spec, res.OperatorEnv())
			_, err = stackconfig.Check(line, res.YAML, stackconfig.Options{Env: stackconfig.MapEnv(env), Home: runconfig.HomeDir})
			require.NoError(t, err, "spec %d: the operator accepted it on %s and the model refuses its config\nspec: %s\nconfig:\n%s",
				i, line, specYAML(t, s), res.YAML)
			accepted[line.Tag()]++
			if dump != "" {
				dir := filepath.Join(dump, line.Tag())
				require.NoError(t, os.MkdirAll(dir, 0o755))
				envYAML, err := yaml.Marshal(env)
				require.NoError(t, err)
				base := filepath.Join(dir, fmt.Sprintf("%d-%04d", *propertySeed, i))
				require.NoError(t, os.WriteFile(base+".yaml", res.YAML, 0o644))
				require.NoError(t, os.WriteFile(base+".env", envYAML, 0o644))
				require.NoError(t, os.WriteFile(base+".spec.yaml", specYAML(t, s), 0o644))
			}
		}
	}
	t.Logf("%d specs (seed %d): %d admitted by the CRD (%d%%); configs the model accepts: %v; refused with InvalidConfig: %d on v0.2.23, %d on v0.3.0",
		len(stacks), *propertySeed, admitted, 100*admitted/len(stacks), accepted,
		admitted-accepted["v0.2.23"], admitted-accepted["v0.3.0"])
	t.Logf("the CRD's refusals:\n%s", counts(crdReasons))
	t.Logf("the generator's refusals (conditions):\n%s", counts(genReasons))
	// A filler that the CRD refuses, or a generator that refuses, almost
	// always would test nothing.
	require.GreaterOrEqual(t, admitted, len(stacks)/4, "the CRD admitted too few specs to say much")
	// (1 in 12: since issue 32 the generator also refuses settings, endpoints
	// and API keys the provider type does not take, which the filler draws
	// on purpose now and then)
	for _, tag := range []string{"v0.2.23", "v0.3.0"} {
		require.GreaterOrEqual(t, accepted[tag], len(stacks)/12, "too few specs give a config on %s", tag)
	}
}

// crdReason is the first cause of the API server's refusal, its values
// left out, so that refusals group.
func crdReason(err error) string {
	var status apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	}
	if status == nil || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return err.Error()
	}
	c := status.Status().Details.Causes[0]
	field := c.Field
	for _, d := range "0123456789" {
		field = strings.ReplaceAll(field, string(d), "")
	}
	msg := c.Message
	if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg, "Unsupported value") {
		msg = msg[:i]
	}
	return field + ": " + msg
}

// generatorReason is the kind of a generator error: its message up to the
// first quote or colon, for grouping.
func generatorReason(err error) string {
	msg := err.Error()
	if i := strings.IndexAny(msg, "\"`'\n"); i > 0 {
		msg = msg[:i]
	}
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}

// counts lists reasons by count, most frequent first.
func counts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %4d %s\n", m[k], k)
	}
	return b.String()
}

func specYAML(t *testing.T, s *v1alpha1.InferenceStack) []byte {
	data, err := yaml.Marshal(s.Spec)
	require.NoError(t, err)
	return data
}
