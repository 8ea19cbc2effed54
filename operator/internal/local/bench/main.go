// Command bench measures the operator on the local control plane (`make
// bench`): it creates many InferenceStacks that together use every feature
// of the API (testutil.FeatureStack) and prints how long the operator takes
// to apply every object of every stack, how many API writes it makes per
// stack, how many it makes in a steady state (target 0: every stack is
// reconciled again and again, each reconcile counted by the operator's
// controller_runtime_reconcile_total metric), its peak RSS, and its RSS once
// the cluster holds many unrelated Secrets (which its cache must not hold).
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
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

type options struct {
	operator string
	stacks   int
	steady   time.Duration
	secrets  int
}

func main() {
	var o options
	flag.StringVar(&o.operator, "operator", "bin/manager", "Operator binary (relative to the repository root, or absolute).")
	flag.IntVar(&o.stacks, "stacks", 200, "InferenceStacks to create (a mix using every feature).")
	flag.DurationVar(&o.steady, "steady", 60*time.Second,
		"Length of the steady state: rounds in which every stack is reconciled once more, and writes are counted.")
	flag.IntVar(&o.secrets, "secrets", 10000, "Unrelated Secrets to create before measuring RSS again.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// settleRounds bounds the rounds that wait for the writes that follow
// creation (status updates as the operator's own objects appear in its
// cache) before the steady state is measured.
const settleRounds = 5

const ns = "bench"

func run(ctx context.Context, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	binary := o.operator
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(root, binary)
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

	logFile := filepath.Join(env.Dir(), "operator.log")
	op, err := local.StartOperator(binary, env.Kubeconfig(), logFile, local.DemoPin("2.0.0"))
	if err != nil {
		return err
	}
	defer op.Stop(10 * time.Second)
	m := &metrics{addr: op.MetricsAddr}
	if err := local.Wait(ctx, 200*time.Millisecond, func() error { _, err := m.read(); return err }); err != nil {
		return fmt.Errorf("operator metrics: %w (log: %s)", err, logFile)
	}

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	override, err := runconfig.Base(stackconfig.Line03, string(v1alpha1.DistributionStarter)) // DemoPin("2.0.0") pins 0.3.0
	if err != nil {
		return err
	}
	for _, obj := range testutil.FeatureObjects(ns, override) {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	before, err := m.read()
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(o.stacks, func(i int) error {
		return c.Create(ctx, testutil.FeatureStack(ns, stackName(i), i))
	})
	if err != nil {
		return err
	}
	created := time.Since(start)
	if err := local.Wait(ctx, 250*time.Millisecond, func() error { return allApplied(ctx, c, o.stacks) }); err != nil {
		return fmt.Errorf("%w (log: %s)", err, logFile)
	}
	applied := time.Since(start)
	_, peak, _ := op.RSS()

	fmt.Fprintln(os.Stderr, "bench: waiting for the writes that follow creation...")
	settled := 0
	var afterCreate sample
	for settled < settleRounds {
		settled++
		r, err := round(ctx, c, m, o.stacks, settled)
		if err != nil {
			return err
		}
		afterCreate = r.after
		if r.writes() == 0 {
			break
		}
	}

	fmt.Fprintf(os.Stderr, "bench: steady state for %s...\n", o.steady)
	steadyStart := time.Now()
	rounds := 0
	for rounds == 0 || time.Since(steadyStart) < o.steady {
		rounds++
		if _, err := round(ctx, c, m, o.stacks, settled+rounds); err != nil {
			return err
		}
	}
	steadyTime := time.Since(steadyStart)
	rss, peakSteady, _ := op.RSS()
	afterSteady, err := m.read()
	if err != nil {
		return err
	}

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
	// One more round: the operator has seen every event the Secrets could
	// cause, and still writes nothing.
	last, err := round(ctx, c, m, o.stacks, settled+rounds+1)
	if err != nil {
		return err
	}
	rssSecrets, peakSecrets, _ := op.RSS()

	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	creation := afterCreate.writes - before.writes
	fmt.Printf("stacks:                                   %d, a mix of %d kinds using every feature (created in %s)\n",
		o.stacks, testutil.FeatureVariants, created.Round(time.Millisecond))
	fmt.Printf("time until all applied, not Degraded:     %s\n", applied.Round(time.Millisecond))
	fmt.Printf("API writes per stack at creation:         %.1f (%d in all, settled in round %d)\n",
		float64(creation)/float64(o.stacks), creation, settled)
	fmt.Printf("API writes in the steady state:           %d in %d reconciles (%d rounds of %d stacks, %s) (target 0)\n",
		afterSteady.writes-afterCreate.writes, afterSteady.reconciles-afterCreate.reconciles, rounds, o.stacks, steadyTime.Round(time.Second))
	fmt.Printf("operator peak RSS after creation:         %s\n", mib(peak))
	fmt.Printf("operator RSS / peak after steady state:   %s / %s (heap in use %s)\n", mib(rss), mib(peakSteady), mib(afterSteady.heap))
	fmt.Printf("operator RSS / peak with %d Secrets:   %s / %s (heap in use %s; %d writes in %d reconciles after them)\n",
		o.secrets, mib(rssSecrets), mib(peakSecrets), mib(last.after.heap), last.writes(), last.reconciles())
	return nil
}

func stackName(i int) string { return fmt.Sprintf("s%04d", i) }

// roundResult is what the operator did in one round.
type roundResult struct{ before, after sample }

func (r roundResult) writes() int64     { return r.after.writes - r.before.writes }
func (r roundResult) reconciles() int64 { return r.after.reconciles - r.before.reconciles }

// round changes an annotation of every stack, which makes the operator
// reconcile each (its watch passes annotation changes) without changing
// what it should apply, and waits until its reconcile counter has counted
// that many more reconciles and none is queued or running.
func round(ctx context.Context, c client.Client, m *metrics, n, number int) (roundResult, error) {
	before, err := m.read()
	if err != nil {
		return roundResult{}, err
	}
	patch := client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"annotations":{"bench.inferencestack.io/round":"%d"}}}`, number))
	err = parallel(n, func(i int) error {
		return c.Patch(ctx, &v1alpha1.InferenceStack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stackName(i)}}, patch)
	})
	if err != nil {
		return roundResult{}, err
	}
	var after sample
	err = local.Wait(ctx, 50*time.Millisecond, func() error {
		after, err = m.read()
		switch {
		case err != nil:
			return err
		case after.reconciles-before.reconciles < int64(n):
			return fmt.Errorf("round %d: %d of %d reconciles", number, after.reconciles-before.reconciles, n)
		case after.queued > 0 || after.active > 0:
			return fmt.Errorf("round %d: %d reconciles queued, %d running", number, after.queued, after.active)
		}
		return nil
	})
	return roundResult{before: before, after: after}, err
}

// allApplied reports nil when every stack has ConfigGenerated=True and
// Degraded=False at its generation: every step applied its objects.
func allApplied(ctx context.Context, c client.Client, n int) error {
	var stacks v1alpha1.InferenceStackList
	if err := c.List(ctx, &stacks, client.InNamespace(ns)); err != nil {
		return err
	}
	ready := 0
	var degraded *metav1.Condition
	for _, s := range stacks.Items {
		st := s.Status
		if st.ObservedGeneration != s.Generation {
			continue
		}
		if d := meta.FindStatusCondition(st.Conditions, v1alpha1.TypeDegraded); d != nil && d.Status == metav1.ConditionTrue {
			degraded = d
			continue
		}
		if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.TypeConfigGenerated) &&
			meta.IsStatusConditionFalse(st.Conditions, v1alpha1.TypeDegraded) {
			ready++
		}
	}
	if ready < n {
		if degraded != nil {
			return fmt.Errorf("%d of %d stacks applied; one is Degraded: %s: %s", ready, n, degraded.Reason, degraded.Message)
		}
		return fmt.Errorf("%d of %d stacks applied", ready, n)
	}
	return nil
}

// sample is one reading of the operator's metrics.
type sample struct {
	// writes are API requests that write (POST, PUT, PATCH, DELETE), from
	// rest_client_requests_total.
	writes int64
	// reconciles are finished reconciles of InferenceStacks, from
	// controller_runtime_reconcile_total.
	reconciles int64
	// queued and active are the InferenceStacks waiting in the work queue
	// and being reconciled.
	queued, active int64
	// heap is the operator's heap in use (go_memstats_heap_inuse_bytes):
	// what its cache holds shows there, with less noise than in the RSS.
	heap int64
}

type metrics struct{ addr string }

func (m *metrics) read() (sample, error) {
	resp, err := http.Get("http://" + m.addr + "/metrics")
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("metrics: %s", resp.Status)
	}
	var s sample
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		name, labels, value, ok := parseLine(line)
		if !ok {
			continue
		}
		switch {
		case name == "rest_client_requests_total":
			found |= 1
			for _, verb := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
				if strings.Contains(labels, verb) {
					s.writes += value
				}
			}
		case name == "controller_runtime_reconcile_total" && strings.Contains(labels, `controller="inferencestack"`):
			found |= 2
			s.reconciles += value
		case name == "workqueue_depth" && strings.Contains(labels, `name="inferencestack"`):
			// Served only once something was queued.
			s.queued += value
		case name == "controller_runtime_active_workers" && strings.Contains(labels, `controller="inferencestack"`):
			s.active += value
		case name == "go_memstats_heap_inuse_bytes":
			s.heap = value
		}
	}
	if err := sc.Err(); err != nil {
		return sample{}, err
	}
	if found != 3 {
		return sample{}, errors.New("the operator does not serve its request and reconcile metrics yet")
	}
	return s, nil
}

// parseLine splits a Prometheus text line `name{labels} value`.
func parseLine(line string) (name, labels string, value int64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", "", 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", "", 0, false
	}
	series := line[:sp]
	name = series
	if i := strings.IndexByte(series, '{'); i >= 0 {
		name, labels = series[:i], series[i:]
	}
	return name, labels, int64(v), true
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
