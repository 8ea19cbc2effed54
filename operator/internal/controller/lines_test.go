package controller_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/config"
	"github.com/inferencestack/inferencestack/operator/components/server"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// TestLineRefusesWhatItCannotExpress: a spec the pinned line cannot
// express (a distribution upstream publishes no image of at 0.7.1, even
// when the pin names one; an API 0.8.0 no longer has) is refused before
// anything is deployed: the stack is Degraded with the run-config error,
// which names the spec field and the line, an Event says so, and the
// operator wrote neither the run config nor the server.
func TestLineRefusesWhatItCannotExpress(t *testing.T) {
	tests := []struct {
		name    string
		version string
		opts    []testutil.Option
		want    string
	}{
		{name: "unpublished", version: "0.7.1", opts: []testutil.Option{testutil.WithDistribution("postgres-demo"), testutil.WithCache()},
			want: `spec.distribution.name: Unsupported value: "postgres-demo": Llama Stack 0.7.1 publishes no image of it; supported: "starter"`},
		{name: "removed-api", version: "0.8.0", opts: []testutil.Option{testutil.WithDisabled(v1alpha1.APIEval)},
			want: `spec.disabled[0]: Unsupported value: "eval": OGX 0.8.0 has no eval API`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			only := labels.SelectorFromSet(labels.Set{"test.inferencestack.io/lines": ns})
			// A pin that (wrongly) names every distribution: the line, not
			// the pin, refuses.
			p := pin.Pin{OperatorVersion: testPin.OperatorVersion, LlamaStackVersion: tc.version, Operands: map[string]string{}}
			for d := range testPin.Operands {
				p.Operands[d] = "registry.invalid/distribution-" + d + ":" + tc.version
			}
			op := startOperator(t, onlyStacks(only), withPin(p))
			stack := testutil.Stack(tc.name, append([]testutil.Option{testutil.WithNamespace(ns)}, tc.opts...)...)
			stack.Labels = map[string]string{"test.inferencestack.io/lines": ns}
			create(t, stack)
			var degraded string
			eventually(t, timeout, func() error {
				s, err := get(t, &v1alpha1.InferenceStack{}, ns, tc.name)
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeDegraded)
				if c == nil || c.ObservedGeneration != s.Generation || c.Status != "True" {
					return fmt.Errorf("not Degraded at generation %d: %+v", s.Generation, s.Status.Conditions)
				}
				degraded = c.Reason + ": " + c.Message
				return nil
			})
			if !strings.Contains(degraded, v1alpha2.ReasonInvalidConfig+": ") || !strings.Contains(degraded, tc.want) {
				t.Errorf("Degraded %q, want reason %s and %q", degraded, v1alpha2.ReasonInvalidConfig, tc.want)
			}
			eventually(t, timeout, func() error {
				if !slices.Contains(op.events.of(ns, tc.name), v1alpha2.ReasonInvalidConfig) {
					return fmt.Errorf("events %q, want %s", op.events.of(ns, tc.name), v1alpha2.ReasonInvalidConfig)
				}
				return nil
			})
			// The status above is the signal that the reconcile ran: by
			// then nothing of the server exists.
			for _, w := range op.writes.Writes() {
				if strings.Contains(w, ns+"/") && (strings.Contains(w, "ConfigMap") || strings.Contains(w, "Deployment")) {
					t.Errorf("wrote %s for a refused stack", w)
				}
			}
			if _, err := get(t, &appsv1.Deployment{}, ns, server.Name(stack)); !apierrors.IsNotFound(err) {
				t.Errorf("server Deployment: %v, want not found", err)
			}
			if _, err := get(t, &corev1.ConfigMap{}, ns, config.ConfigMapName(tc.name)); !apierrors.IsNotFound(err) {
				t.Errorf("run-config ConfigMap: %v, want not found", err)
			}
		})
	}
}
