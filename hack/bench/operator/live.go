package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// standinConfig is a run config of Llama Stack 0.3 (the bench's pin) for
// the one stand-in that answers for every stack: plain HTTP, two inference
// providers.
const standinConfig = `version: 2
image_name: bench
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {url: 'http://ollama:11434'}}
  - {provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://vllm:8000/v1'}}
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: '%[1]s/kv.db'}
    sql_default: {type: sql_sqlite, db_path: '%[1]s/sql.db'}
  stores:
    metadata: {namespace: registry, backend: kv_default}
    inference: {table_name: inference_store, backend: sql_default}
    conversations: {table_name: openai_conversations, backend: sql_default}
server:
  port: %[2]d
external_providers_dir: '%[1]s/providers.d'
`

// startStandin builds and starts the stand-in server of Llama Stack
// version in dir, and returns its address.
func startStandin(dir, version string) (string, func(), error) {
	bin := filepath.Join(dir, "llama")
	if err := testenv.BuildStatic("./test/standin/llamastack", bin); err != nil {
		return "", nil, err
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return "", nil, err
	}
	state := filepath.Join(dir, "standin")
	if err := os.MkdirAll(state, 0o755); err != nil {
		return "", nil, err
	}
	cfg := filepath.Join(state, "run.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, standinConfig, state, ports[0]), 0o600); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "stack", "run", cfg, "--port", strconv.Itoa(ports[0]))
	cmd.Env = append(os.Environ(), "LLAMA_STACK_STANDIN_VERSION="+version, "HOME="+state)
	p, err := testenv.StartProcess(cmd, filepath.Join(dir, "standin.log"))
	if err != nil {
		return "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	return addr, func() { p.Stop(5_000_000_000) }, nil
}

// makeAvailable writes what the Deployment controller would once the
// server of stack name (and its cache, when it has one) has its pods ready,
// and says whether the server has any (a stack scaled to zero never
// becomes Available).
func makeAvailable(ctx context.Context, c client.Client, name string) (bool, error) {
	if _, err := available(ctx, c, name+"-cache"); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return available(ctx, c, name)
}

func available(ctx context.Context, c client.Client, name string) (bool, error) {
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
		return false, err
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: want, UpdatedReplicas: want,
		ReadyReplicas: want, AvailableReplicas: want}
	return want > 0, c.Status().Update(ctx, dep)
}

// waitLive waits until the n stacks whose servers were made available are
// Available and show ProvidersHealthy (True, or Unknown for a server the
// stand-in cannot answer), following them with a watch, and returns how
// many are True.
func waitLive(ctx context.Context, c client.WithWatch, n int) (int, error) {
	l := &live{of: map[string]liveState{}}
	if err := follow(ctx, c, l.see, func() bool { return l.shown >= n }); err != nil {
		return 0, fmt.Errorf("%w (%d of %d stacks Available and showing their server's status)", err, l.shown, n)
	}
	return l.healthy, nil
}

// liveState is what one stack shows of its server.
type liveState struct{ shown, healthy bool }

// live counts the stacks that are Available and show their server's
// status, as it sees their events.
type live struct {
	of             map[string]liveState
	shown, healthy int
}

func (l *live) see(s *v1alpha1.InferenceStack) {
	var now liveState
	if meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha2.TypeAvailable) {
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeProvidersHealthy); c != nil {
			now = liveState{shown: true, healthy: c.Status == metav1.ConditionTrue}
		}
	}
	was := l.of[s.Name]
	l.of[s.Name] = now
	l.shown += b2i(now.shown) - b2i(was.shown)
	l.healthy += b2i(now.healthy) - b2i(was.healthy)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
