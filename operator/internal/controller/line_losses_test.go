package controller_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// oldServerConfig is a 0.7 run config for the stand-in standing for the
// old server of a move (plain HTTP, no auth).
const oldServerConfig = `version: 2
image_name: old
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {base_url: 'http://ollama:11434/v1'}}
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: '%[1]s/kv.db'}
    sql_default: {type: sql_sqlite, db_path: '%[1]s/sql.db'}
  stores:
    metadata: {namespace: registry, backend: kv_default}
    inference: {table_name: inference_store, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
    prompts: {namespace: prompts, backend: kv_default}
server:
  port: %[2]d
`

// startOldServer runs the 0.7.1 stand-in on port with registered, each
// "<registry type>/<identifier>", registered as a client would through
// the server's API; it returns the server's address.
func startOldServer(t *testing.T, port int, registered ...string) string {
	t.Helper()
	dir := t.TempDir()

	if err := os.WriteFile(filepath.Join(dir, "run.yaml"), fmt.Appendf(nil, oldServerConfig, dir, port), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(standin(t), "stack", "run", filepath.Join(dir, "run.yaml"), "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "LLAMA_STACK_STANDIN_VERSION=0.7.1", "HOME="+dir, "LLAMA_STACK_CONFIG_DIR="+filepath.Join(dir, ".llama"))
	proc, err := testenv.StartProcess(cmd, filepath.Join(dir, "llama.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(5 * time.Second) })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for _, r := range registered {
		typ, id, _ := strings.Cut(r, "/")
		eventually(t, timeout, func() error {
			if proc.Exited() {
				t.Fatalf("the stand-in exited: %s", proc.Log())
			}
			resp, err := http.Post("http://"+addr+"/standin/v1/registry/"+typ, "application/json",
				bytes.NewReader(fmt.Appendf(nil, `{"identifier": %q}`, id)))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("registering %s on the stand-in: HTTP %d", r, resp.StatusCode)
			}
			return nil
		})
	}
	return addr
}

// movedToOGX creates, in a new namespace, a stack deployed by the 0.7
// major whose run config registers dataset evals, and relabels it for the
// 0.8 major, whose server reads reach the old server at the address addr
// holds when they dial (prober): it returns the 0.8 operator, the
// namespace and the server Deployment's generation before the move.
func movedToOGX(t *testing.T, addr *atomic.Pointer[string]) (*operator, string, int64) {
	t.Helper()
	startOperator(t, onlyMajor(t, "3"), withPin(pin07))
	p := &serverstatus.Prober{Interval: time.Hour, Timeout: 5 * time.Second,
		Resolve: func(string) string { return *addr.Load() }}
	to := startOperator(t, onlyMajor(t, "4"), withPin(pin08), withProber(p))
	ns := namespace(t)
	create(t, overrideOf(t, ns, "run-07", stackconfig.Line07, func(s string) string {
		return strings.Replace(s, "  datasets: []", "  datasets:\n  - dataset_id: evals\n    purpose: eval/messages-answer\n    source: {type: uri, uri: 'huggingface://datasets/llamastack/simpleqa'}", 1)
	}))
	create(t, overrideOf(t, ns, "run-08", stackconfig.Line08, nil))
	_, gen := onOverride(t, ns, "3", "run-07")
	relabel(t, ns, "4", "run-08")
	return to, ns, gen
}

// refusal is the stack's Degraded condition's message, failing the test
// unless it is a refused line move.
func refusal(t *testing.T, ns string) string {
	t.Helper()
	c := meta.FindStatusCondition(describedGeneration(t, ns, "mv").Status.Conditions, v1alpha2.TypeDegraded)
	if c == nil || c.Reason != v1alpha2.ReasonLineMoveLosesResources {
		t.Fatalf("Degraded = %+v, want reason %s", c, v1alpha2.ReasonLineMoveLosesResources)
	}
	return c.Message
}

// TestMoveToOGXNamesEachResourceOfTheOldServer: a stack moved from 0.7 to
// OGX 0.8 (no datasets, scoring functions, benchmarks) whose old server
// holds a dataset and a benchmark registered through its API besides the
// run config's dataset is refused naming each of them, listed on the old
// server, and no <type>/*; accepting some leaves the move refused and the
// server Deployment untouched; accepting exactly those moves it.
func TestMoveToOGXNamesEachResourceOfTheOldServer(t *testing.T) {
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	var addr atomic.Pointer[string]
	addr.Store(new(startOldServer(t, ports[0], "dataset/uploaded", "benchmark/mmlu")))
	to, ns, gen := movedToOGX(t, &addr)
	msg := refusal(t, ns)
	t.Logf("refused: %s", msg)
	if want := `acceptLosses: ["benchmark/mmlu", "dataset/evals", "dataset/uploaded"]`; !strings.Contains(msg, want) || strings.Contains(msg, "/*") {
		t.Fatalf("the refusal says %q, want it to name each resource (%s) and no <type>/*", msg, want)
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after the refused move, was %d", got, gen)
	}
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.8","acceptLosses":["dataset/evals","dataset/uploaded"]}}`)
	if msg := refusal(t, ns); !strings.Contains(msg, `acceptLosses: ["benchmark/mmlu"]`) {
		t.Fatalf("with the datasets accepted, the refusal says %q, want it to name benchmark/mmlu alone", msg)
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after a partly accepted move, was %d", got, gen)
	}
	lineMove(t, to, ns, "mv", `{"lineMove":{"line":"0.8","acceptLosses":["benchmark/mmlu","dataset/evals","dataset/uploaded"]}}`)
	moved := converged(t, ns, "mv")
	if got := serverGeneration(t, ns, "mv"); got == gen {
		t.Errorf("server Deployment generation still %d after the move was accepted", got)
	}
	if got := moved.Status.StateLine; got != "0.7" {
		t.Errorf("status.stateLine = %q after the move to 0.8, want 0.7", got)
	}
}

// TestMoveToOGXWhenTheOldServerDoesNotAnswer: when the old server cannot
// be asked (nothing listens), the refusal names each table's resources
// <type>/* with the classified cause, and the operator asks again: once
// the server answers, with no change of the stack, the refusal names
// each resource. (The answering server is started on a second port and
// made reachable only once its resource is registered: were it started
// where the operator dials, the operator could list it before the
// registration, which is a right answer and the end of asking.)
func TestMoveToOGXWhenTheOldServerDoesNotAnswer(t *testing.T) {
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	var addr atomic.Pointer[string]
	addr.Store(new(fmt.Sprintf("127.0.0.1:%d", ports[0])))
	_, ns, gen := movedToOGX(t, &addr)
	msg := refusal(t, ns)
	t.Logf("refused: %s", msg)
	for _, want := range []string{
		`acceptLosses: ["benchmark/*", "dataset/*", "dataset/evals", "scoring_function/*"]`,
		"could not list (GET /v1alpha/eval/benchmarks: connection refused)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal says %q, want %q in it", msg, want)
		}
	}
	if got := serverGeneration(t, ns, "mv"); got != gen {
		t.Errorf("server Deployment generation %d after the refused move, was %d", got, gen)
	}
	addr.Store(new(startOldServer(t, ports[1], "dataset/late")))
	eventually(t, timeout, func() error {
		if msg := refusal(t, ns); !strings.Contains(msg, `acceptLosses: ["dataset/evals", "dataset/late"]`) {
			return fmt.Errorf("the refusal says %q, want it to name dataset/evals and dataset/late", msg)
		}
		return nil
	})
}
