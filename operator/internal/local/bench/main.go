// Command bench measures the operator on the local control plane (`make
// bench`): it creates many InferenceStacks and prints how long the operator
// takes to apply every object and generate every config, how many API writes
// it makes per stack and during a steady state (target 0), its peak RSS, and
// its RSS once the cluster holds many unrelated Secrets (which its cache must
// not hold).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/internal/testenv"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/internal/local"
	"github.com/inferencestack/inferencestack/operator/internal/testutil"
)

type options struct {
	operator string
	stacks   int
	steady   time.Duration
	secrets  int
}

func main() {
	var o options
	flag.StringVar(&o.operator, "operator", "bin/manager", "Operator binary.")
	flag.IntVar(&o.stacks, "stacks", 200, "InferenceStacks to create.")
	flag.DurationVar(&o.steady, "steady", 60*time.Second, "Length of the steady state in which writes are counted.")
	flag.IntVar(&o.secrets, "secrets", 10000, "Unrelated Secrets to create before measuring RSS again.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: starting etcd and kube-apiserver...")
	env, err := local.StartControlPlane(root, false)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000 // the bench's own requests are not what is measured
	c, err := client.New(cfg, client.Options{Scheme: local.Scheme()})
	if err != nil {
		return err
	}

	op, err := local.StartOperator(filepath.Join(root, o.operator), env.Kubeconfig(), filepath.Join(env.Dir(), "operator.log"), local.DemoPin("2.0.0"))
	if err != nil {
		return err
	}
	defer op.Stop(10 * time.Second)
	if err := local.Wait(ctx, 200*time.Millisecond, func() error { _, err := writes(op.MetricsAddr); return err }); err != nil {
		return fmt.Errorf("operator metrics: %w (log: %s)", err, filepath.Join(env.Dir(), "operator.log"))
	}

	ns := "bench"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-key"},
		StringData: map[string]string{"key": "sk-bench"}}); err != nil {
		return err
	}
	before, _ := writes(op.MetricsAddr)
	start := time.Now()
	err = parallel(o.stacks, func(i int) error {
		return c.Create(ctx, testutil.Stack(fmt.Sprintf("s%04d", i), testutil.WithNamespace(ns),
			testutil.WithDistribution(v1alpha1.DistributionRemoteVLLM),
			testutil.WithProviders("inference", testutil.Provider("vllm",
				testutil.WithEndpoint("http://vllm:8000/v1"), testutil.WithAPIKey("api-key", "key"))),
			testutil.WithModel("llama", "vllm")))
	})
	if err != nil {
		return err
	}
	created := time.Since(start)
	if err := local.Wait(ctx, 250*time.Millisecond, func() error { return allApplied(ctx, c, ns, o.stacks) }); err != nil {
		return err
	}
	applied := time.Since(start)
	time.Sleep(2 * time.Second) // let the last status writes land
	afterCreate, _ := writes(op.MetricsAddr)
	_, peak, _ := op.RSS()

	fmt.Fprintf(os.Stderr, "bench: steady state for %s...\n", o.steady)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.steady):
	}
	afterSteady, _ := writes(op.MetricsAddr)
	rss, peakSteady, _ := op.RSS()

	fmt.Fprintf(os.Stderr, "bench: creating %d unrelated Secrets...\n", o.secrets)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}); err != nil {
		return err
	}
	payload := strings.Repeat("x", 1024)
	err = parallel(o.secrets, func(i int) error {
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("u%05d", i)},
			StringData: map[string]string{"data": payload}})
	})
	if err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	rssSecrets, peakSecrets, _ := op.RSS()

	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Printf("stacks:                                   %d (created in %s)\n", o.stacks, created.Round(time.Millisecond))
	fmt.Printf("time until all applied, ConfigGenerated:  %s\n", applied.Round(time.Millisecond))
	fmt.Printf("API writes per stack at creation:         %.1f (%d in all)\n", float64(afterCreate-before)/float64(o.stacks), afterCreate-before)
	fmt.Printf("API writes during %s steady state:       %d (target 0)\n", o.steady, afterSteady-afterCreate)
	fmt.Printf("operator peak RSS after creation:         %s\n", mib(peak))
	fmt.Printf("operator RSS / peak after steady state:   %s / %s\n", mib(rss), mib(peakSteady))
	fmt.Printf("operator RSS / peak with %d Secrets:   %s / %s\n", o.secrets, mib(rssSecrets), mib(peakSecrets))
	return nil
}

// allApplied reports nil when every stack has ConfigGenerated=True at its
// generation and its server Deployment and Service exist.
func allApplied(ctx context.Context, c client.Client, ns string, n int) error {
	var stacks v1alpha1.InferenceStackList
	if err := c.List(ctx, &stacks, client.InNamespace(ns)); err != nil {
		return err
	}
	ready := 0
	for _, s := range stacks.Items {
		if s.Status.ObservedGeneration == s.Generation && meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.TypeConfigGenerated) {
			ready++
		}
	}
	if ready < n {
		return fmt.Errorf("%d of %d stacks have their config", ready, n)
	}
	for _, list := range []client.ObjectList{&corev1.ServiceList{}, &corev1.ConfigMapList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{"app.kubernetes.io/instance"}); err != nil {
			return err
		}
		if got := meta.LenList(list); got < n {
			return fmt.Errorf("%d of %d %T items", got, n, list)
		}
	}
	return nil
}

// writes sums the operator's API requests that write (POST, PUT, PATCH,
// DELETE) from its rest_client_requests_total metric.
func writes(addr string) (int64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	var total int64
	found := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		found = true
		for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(line, m) {
				v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				if err != nil {
					return 0, err
				}
				total += int64(v)
			}
		}
	}
	if !found {
		return 0, errors.New("no rest_client_requests_total metric yet")
	}
	return total, sc.Err()
}

// parallel runs f(0..n-1) on 8 workers and returns the first error.
func parallel(n int, f func(int) error) error {
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}
