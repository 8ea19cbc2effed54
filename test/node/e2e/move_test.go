//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
)

// lineMove: a starter stack with a state volume, Ready under the first
// major (installs[0], 0.2), is given a model through its server's API and
// then moved to the next major (0.3) by its label. A client polls the
// stack's Service (GET /v1/health and GET /v1/models, every 100 ms) from
// before the move until the new line's server answers. 0.3 reads no
// registry entry 0.2 wrote (keys v9 -> v10), so the move is refused
// (Degraded, LineMoveLosesResources) and the old server answers every poll
// meanwhile; once spec.lineMove accepts the loss, the new line rolls out:
// its downtime is the span of failed polls, logged
// (docs/moving-between-lines.md records the figure). The model registered
// through the API is gone, as accepted; status.stateLine keeps 0.2.
func lineMove(t *testing.T, installs []*install) {
	require.GreaterOrEqual(t, len(installs), 2, "a move needs two majors")
	from, to := installs[0], installs[1]
	s, api := stackWithState(t, "move", from)
	var model struct{ Identifier string }
	api.do("POST", "/v1/models", map[string]any{"model_id": "move-test", "provider_id": "ollama"}, &model)

	p := &poller{base: api.base}
	stop := p.start()
	update(t, s, func(s *v1alpha1.InferenceStack) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[v1alpha2.LabelOperatorMajor] = to.major
	})
	// The new line reads no registry entry the old one wrote (registry keys
	// v9 -> v10 from 0.2 to 0.3): the move waits for consent, and the old
	// server keeps serving meanwhile.
	refused := waitStack(t, s, readyTimeout, "refused (LineMoveLosesResources)", func(s *v1alpha1.InferenceStack) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeDegraded)
		return c != nil && c.Reason == v1alpha2.ReasonLineMoveLosesResources
	})
	c := meta.FindStatusCondition(refused.Status.Conditions, v1alpha2.TypeDegraded)
	t.Logf("refused: %s", c.Message)
	var v struct{ Version string }
	require.NoError(t, getJSON(api.base+"/v1/version", &v))
	require.Equal(t, from.pin.LlamaStackVersion, v.Version, "the old server serves while the move is refused")
	polls, failed, _ := p.summary()
	require.Zero(t, failed, "%d of %d polls failed while the move was refused", failed, polls)

	moved := time.Now()
	update(t, s, func(s *v1alpha1.InferenceStack) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[v1alpha2.SpecAnnotation] = fmt.Sprintf(`{"lineMove":{"line":%q,"acceptLosses":["registry/v9"]}}`, to.pin.LlamaStackVersion[:3])
	})
	got := onNewLine(t, s, api, p, stop, from, to, moved)
	require.Equal(t, from.pin.LlamaStackVersion[:3], got.Status.StateLine, "status.stateLine after the move")

	var models struct{ Data []struct{ Identifier string } }
	api.do("GET", "/v1/models", nil, &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.Identifier)
	}
	require.NotContains(t, ids, model.Identifier, "the model registered through the API on %s, a loss the move accepted", from.pin.LlamaStackVersion)
	require.NotEmpty(t, ids, "the run config's models, registered again at start")
	deleteStack(t, s)
}

// onNewLine waits until the moved stack s is Ready on to's line and its
// Service reaches that line's server, stops the poller and logs the move's
// figures (moved: when the change that moved it was made).
func onNewLine(t *testing.T, s *v1alpha1.InferenceStack, api stackAPI, p *poller, stop func(), from, to *install, moved time.Time) *v1alpha1.InferenceStack {
	t.Helper()
	got := waitStack(t, s, readyTimeout, "Ready on "+to.pin.LlamaStackVersion, func(s *v1alpha1.InferenceStack) bool {
		rd := s.Status.ResolvedDistribution
		return isReady(s) && rd != nil && rd.OperandVersion == to.pin.LlamaStackVersion
	})
	require.Eventually(t, func() bool {
		var v struct{ Version string }
		return getJSON(api.base+"/v1/version", &v) == nil && v.Version == to.pin.LlamaStackVersion
	}, readyTimeout, 100*time.Millisecond, "the Service never reached the %s server", to.pin.LlamaStackVersion)
	stop()
	polls, failed, down := p.summary()
	t.Logf("move %s (%s) -> %s (%s): Ready on the new line %s after the change that moved it; %d polls, %d failed, downtime %s (first to last failed poll)",
		from.major, from.pin.LlamaStackVersion, to.major, to.pin.LlamaStackVersion, time.Since(moved).Round(100*time.Millisecond), polls, failed, down)
	return got
}

// poller polls a server's health and a read endpoint and records when a
// poll failed.
type poller struct {
	base     string
	mu       sync.Mutex
	polls    int
	failures []time.Time
}

// start polls every 100 ms until the returned stop is called.
func (p *poller) start() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var health, models map[string]any
			err := getJSON(p.base+"/v1/health", &health)
			if err == nil {
				err = getJSON(p.base+"/v1/models", &models)
			}
			p.mu.Lock()
			p.polls++
			if err != nil {
				p.failures = append(p.failures, time.Now())
			}
			p.mu.Unlock()
		}
	})
	return func() { close(done); wg.Wait() }
}

// summary is how many polls ran, how many failed, and the span from the
// first failed poll to the last (plus one interval).
func (p *poller) summary() (int, int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failures) == 0 {
		return p.polls, 0, 0
	}
	return p.polls, len(p.failures), p.failures[len(p.failures)-1].Sub(p.failures[0]) + 100*time.Millisecond
}

// getJSON GETs url with a short timeout and decodes a 200 answer.
func getJSON(url string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := node.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
