// Command demo shows the operator at work on the local control plane (`make
// demo`): it starts etcd, kube-apiserver and kube-controller-manager, installs
// the CRD, runs the operator binary, applies a sample InferenceStack, and
// prints the objects the operator made and the stack's status. Ctrl-C stops
// everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
)

func main() {
	operator := flag.String("operator", "bin/manager", "Operator binary.")
	sample := flag.String("sample", "operator/config/samples/inferencestack_v1alpha1_starter.yaml", "InferenceStack to apply.")
	exitAfter := flag.Duration("exit-after", 0, "Stop after this long instead of waiting for Ctrl-C (0: wait).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *operator, *sample, *exitAfter); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, operator, sample string, exitAfter time.Duration) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(sample)
	if err != nil {
		return err
	}
	stack := &v1alpha1.InferenceStack{}
	if err := yaml.UnmarshalStrict(data, stack); err != nil {
		return fmt.Errorf("%s: %w", sample, err)
	}
	if stack.Namespace == "" {
		stack.Namespace = "default"
	}

	fmt.Println("demo: starting etcd, kube-apiserver and kube-controller-manager...")
	env, err := local.StartControlPlane(root, true)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	logFile := filepath.Join(env.Dir(), "operator.log")
	op, err := local.StartOperator(filepath.Join(root, operator), env.Kubeconfig(), logFile, local.DemoPin("2.0.0"))
	if err != nil {
		return err
	}
	defer op.Stop(10 * time.Second)
	fmt.Printf("demo: operator running (log %s)\n", logFile)

	if err := env.Client.Create(ctx, stack); err != nil {
		return fmt.Errorf("applying %s: %w", sample, err)
	}
	fmt.Printf("demo: applied %s (InferenceStack %s/%s)\n", sample, stack.Namespace, stack.Name)
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = local.Wait(wait, 200*time.Millisecond, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(stack.Status.Conditions, v1alpha2.TypeConfigGenerated) {
			return fmt.Errorf("conditions %v", stack.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the stack did not get its config: %w (operator log: %s)", err, logFile)
	}
	time.Sleep(time.Second)
	kubectl := func(args ...string) {
		cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", env.Kubeconfig()}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		_ = cmd.Run()
	}
	fmt.Println("\ndemo: the objects the operator made:")
	kubectl("get", "deployments,services,serviceaccounts,configmaps,networkpolicies,horizontalpodautoscalers,poddisruptionbudgets",
		"-n", stack.Namespace, "-l", "app.kubernetes.io/instance="+stack.Name)
	fmt.Println("\ndemo: the InferenceStack:")
	kubectl("get", "inferencestacks", "-n", stack.Namespace)
	kubectl("get", "inferencestack", stack.Name, "-n", stack.Namespace, "-o", "jsonpath={.status}")
	fmt.Printf("\n\ndemo: explore with: kubectl --kubeconfig %s get all -A\n", env.Kubeconfig())
	fmt.Println("demo: pods do not start here (no kubelet), so the stack stays Deploying. Ctrl-C stops everything.")
	if exitAfter > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(exitAfter):
		}
	} else {
		<-ctx.Done()
	}
	fmt.Println("demo: stopping")
	return nil
}
