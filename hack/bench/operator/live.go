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
	"github.com/inferencestack/inferencestack/test/local"
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
// server of stack name (and its cache, when it has one) has its pods ready.
func makeAvailable(ctx context.Context, c client.Client, name string) error {
	if err := available(ctx, c, name+"-cache"); client.IgnoreNotFound(err) != nil {
		return err
	}
	return available(ctx, c, name)
}

func available(ctx context.Context, c client.Client, name string) error {
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
		return err
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: want, UpdatedReplicas: want,
		ReadyReplicas: want, AvailableReplicas: want}
	return c.Status().Update(ctx, dep)
}

// waitLive waits until every stack whose server is Available shows
// ProvidersHealthy (True, or Unknown for a server the stand-in cannot
// answer), and returns how many are True.
func waitLive(ctx context.Context, c client.Client, n int) (int, error) {
	var healthy int
	err := local.Wait(ctx, 500_000_000, func() error {
		var list v1alpha1.InferenceStackList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		shown, available := 0, 0
		healthy = 0
		for _, s := range list.Items {
			if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha2.TypeAvailable) {
				continue
			}
			available++
			if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha2.TypeProvidersHealthy); c != nil {
				shown++
				if c.Status == metav1.ConditionTrue {
					healthy++
				}
			}
		}
		if shown < available || available == 0 {
			return fmt.Errorf("%d of %d available stacks (of %d) show their server's status", shown, available, n)
		}
		return nil
	})
	return healthy, err
}
