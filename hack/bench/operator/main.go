// Command bench measures the operator on the local control plane (`make
// bench`): it creates many InferenceStacks, either a mix that together uses
// every feature of the API (testutil.FeatureStack) or copies of the starter
// sample, and prints how long the operator takes to apply every object of
// every stack, how many API writes it makes per stack, how many it makes in a
// steady state (target 0: every stack is reconciled again and again, each
// reconcile counted by the operator's controller_runtime_reconcile_total
// metric), its peak RSS, and its RSS once the cluster holds many unrelated
// objects of every kind it watches (which its cache must not hold). Given
// several sizes it runs each on a fresh control plane and operator and ends
// with a table: the scale curve.
//
// With -server-status (the default) the stacks become Ready: the bench
// writes what the Deployment controller would (one available replica) into
// each server Deployment's status, and one stand-in Llama Stack server
// (test/standin/llamastack, plain HTTP, the pinned line) answers for every
// stack, the operator pointed at it with its test-only
// --server-status-test-address flag. The bench waits until every stack
// shows its server's providers (status.server, ProvidersHealthy), then
// measures the steady state as before, and reports the operator's CPU time
// and the requests it sent to servers (inferencestack_server_status_requests_total)
// in it. A stack whose server the one stand-in cannot answer as it expects
// (TLS, mutual TLS: the features kind has such stacks) shows
// ProvidersHealthy Unknown, which counts as shown.
//
// The stand-in sits behind the bench's own front (servers.go), which after
// the steady state has the servers behave as each of -cases says in turn:
// answer at once, answer after -slow, every other accept the connection
// and never answer (the others answer), or all of them hang. For each it
// waits until every server was sent two requests in it (a poll of a server
// that answers sends two, of one that hangs one: the first poll's result
// is recorded by then), then prints over -case-window the prober's
// requests a minute and the
// operator's status writes, Events and all writes a minute (target 0: a
// status records a classified cause, not the error's text), and the
// longest a server that answers, and one that hangs, waited between two
// polls since the switch (servers that hang must not delay the others).
//
// The API server's audit log records the metadata of every write in the
// bench's namespace; the bench tells its own writes apart by their user
// agent and prints the operator's per resource (objects, creates, patches,
// updates, status writes, deletes): until every stack was applied, and
// from then until settled. The floor is one write per object made and one
// status write per stack.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/local"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

// The kinds of stacks the bench can create.
const (
	kindFeatures = "features"
	kindStarter  = "starter"
)

// starterSample is the InferenceStack the starter kind copies.
const starterSample = "operator/config/samples/inferencestack_v1alpha1_starter.yaml"

type options struct {
	operator      string
	operatorFlags []string
	kind          string
	sizes         []int
	steady        time.Duration
	unrelated     int
	timeout       time.Duration
	// serverStatus makes the stacks Ready, served by one stand-in server.
	serverStatus bool
	// idle is a window after the steady state in which nothing is changed:
	// what the operator does alone (its polling of the servers).
	idle time.Duration
	// cases are how the servers behave in turn after the steady state
	// (servers.go), each measured over window; slow is the delay of the
	// slow case.
	cases                     []string
	window, slow, caseTimeout time.Duration
	// clockTicks is the rate of the CPU times in /proc/<pid>/stat, ticks a
	// second (AT_CLKTCK).
	clockTicks int64
}

func main() {
	var o options
	var sizes, operatorFlags, caseList string
	flag.StringVar(&o.operator, "operator", "bin/manager", "Operator binary (relative to the repository root, or absolute).")
	flag.StringVar(&operatorFlags, "operator-flags", "", "Extra flags of the operator, separated by spaces (e.g. --max-concurrent-reconciles=4).")
	flag.StringVar(&o.kind, "kind", kindFeatures,
		"Stacks to create: "+kindFeatures+" (a mix of "+strconv.Itoa(testutil.FeatureVariants)+" kinds using every feature) or "+
			kindStarter+" (copies of "+starterSample+").")
	flag.StringVar(&sizes, "stacks", "200",
		"InferenceStacks to create; a comma-separated list (e.g. 200,1000,2000) runs each size on a fresh control plane and prints the scale curve.")
	flag.DurationVar(&o.steady, "steady", 60*time.Second,
		"Length of the steady state: rounds in which every stack is reconciled once more, and writes are counted.")
	flag.IntVar(&o.unrelated, "unrelated", 10000,
		"Unrelated objects of each kind the operator watches (Secrets, ConfigMaps, Deployments, Services, PVCs) to create before measuring RSS again; 0 skips them.")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "Give up when the stacks of one size are not applied after this long.")
	flag.DurationVar(&o.idle, "idle", 0,
		"After the steady state, a window of this length in which the bench changes nothing: the operator's writes, CPU and requests to servers alone (0 skips it).")
	flag.BoolVar(&o.serverStatus, "server-status", true,
		"Make the stacks Ready (the bench writes their Deployments' status) with one stand-in Llama Stack server answering for all, so the operator reads their live status.")
	flag.StringVar(&caseList, "cases", strings.Join(cases, ","),
		"With -server-status, after the steady state: how the servers behave in turn, each measured over -case-window once every server was sent two requests in it: "+
			caseAnswer+" (at once), "+caseSlow+" (after -slow), "+caseHang+" (accept the connection, never answer), "+caseMixed+" (every other hangs, the others answer); \"\" skips them.")
	flag.DurationVar(&o.window, "case-window", time.Minute, "How long each of -cases is measured.")
	flag.DurationVar(&o.caseTimeout, "case-timeout", 5*time.Minute,
		"How long to wait after each switch of -cases for every server to be sent two requests; the window then begins anyway, and says so.")
	flag.DurationVar(&o.slow, "slow", 2*time.Second, "How long the servers of the slow case take to answer (keep it under the operator's --server-status-timeout).")
	flag.Parse()
	// envtest logs through controller-runtime's logger; the bench prints
	// its own progress.
	ctrllog.SetLogger(logr.Discard())
	if err := o.parse(sizes, operatorFlags, caseList); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (o *options) parse(sizes, operatorFlags, caseList string) error {
	var err error
	if o.cases, err = splitCases(caseList); err != nil {
		return err
	}
	if o.kind != kindFeatures && o.kind != kindStarter {
		return fmt.Errorf("-kind %q: want %s or %s", o.kind, kindFeatures, kindStarter)
	}
	for s := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-stacks %q: %q is not a positive number of stacks", sizes, s)
		}
		o.sizes = append(o.sizes, n)
	}
	o.operatorFlags = strings.Fields(operatorFlags)
	return nil
}

// settleRounds bounds the rounds that wait for the writes that follow
// creation (status updates as the operator's own objects appear in its
// cache) before the steady state is measured.
const settleRounds = 5

const (
	ns          = "bench"
	unrelatedNS = "unrelated"
)

// result is what one size measured.
type result struct {
	stacks           int
	operatorFlags    []string
	created, applied time.Duration
	// cpuApplied is the CPU time the operator spent until then, and
	// cpuOthers that of the control plane and the bench itself.
	cpuApplied, cpuOthers time.Duration
	// creationWrites counts from the first stack's creation until a round
	// of reconciles writes nothing (settled rounds later).
	creationWrites int64
	settled        int
	// The steady state: rounds of reconciles of every stack.
	steadyWrites, steadyReconciles int64
	rounds                         int
	steadyTime                     time.Duration
	peak, rss, peakSteady          int64
	// rssBase is the operator's RSS before the first stack was created.
	rssBase    int64
	rssParts   string
	heapSteady int64
	// With the unrelated objects, when made: what their events made the
	// operator do, and the round after them.
	unrelatedObjects, unrelatedPerKind         int
	unrelatedCreated                           time.Duration
	unrelatedWrites, unrelatedReconciles       int64
	lastRoundWrites, lastRoundReconciles       int64
	rssUnrelated, peakUnrelated, heapUnrelated int64
	loadBefore, loadAfter                      string
	// With server status: until every stack showed its server's status,
	// and in the steady state the operator's CPU time and its requests to
	// servers.
	live        time.Duration
	readyWrites int64
	// The idle window.
	idleTime                       time.Duration
	idleWrites, idleServerRequests int64
	idleReconciles                 int64
	cpuIdle                        time.Duration
	liveHealthy                    int
	cpuSteady                      time.Duration
	serverRequestsSteady           int64
	serverRequestsCreation         int64
	// The operator's writes per resource (from the API server's audit
	// log): until every stack was applied, and from then until settled
	// (with server status: the stacks' readiness and live status).
	createdKinds, settledKinds map[string]*kindWrites
	// createdWrites are those writes until every stack was applied.
	createdWrites []write
	// cases are the live status's figures per behaviour of the servers.
	cases []caseResult
}

func run(ctx context.Context, o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if o.clockTicks, err = clockTicks(); err != nil {
		return err
	}
	binary := o.operator
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(root, binary)
	}
	newStack, objects, err := stackKind(root, o.kind)
	if err != nil {
		return err
	}
	var results []result
	for _, n := range o.sizes {
		r, err := runSize(ctx, o, root, binary, n, newStack, objects)
		if err != nil {
			return fmt.Errorf("%d stacks: %w", n, err)
		}
		r.print(o)
		results = append(results, r)
	}
	if len(results) > 1 {
		slices.SortFunc(results, func(a, b result) int { return a.stacks - b.stacks })
		printCurve(o, results)
	}
	return nil
}

// stackKind returns how to make stack i of the kind, and the user objects
// its stacks reference.
func stackKind(root, kind string) (func(name string, i int) *v1alpha1.InferenceStack, []client.Object, error) {
	if kind == kindFeatures {
		override, err := runconfig.Base(stackconfig.Line03, string(v1alpha1.DistributionStarter)) // DemoPin("2.0.0") pins 0.3.0
		if err != nil {
			return nil, nil, err
		}
		return func(name string, i int) *v1alpha1.InferenceStack { return testutil.FeatureStack(ns, name, i) },
			testutil.FeatureObjects(ns, override), nil
	}
	path := filepath.Join(root, starterSample)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sample := &v1alpha1.InferenceStack{}
	if err := yaml.UnmarshalStrict(data, sample); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return func(name string, _ int) *v1alpha1.InferenceStack {
		s := sample.DeepCopy()
		s.Namespace, s.Name = ns, name
		return s
	}, nil, nil
}

func runSize(ctx context.Context, o options, root, binary string, n int,
	newStack func(string, int) *v1alpha1.InferenceStack, objects []client.Object) (result, error) {
	r := result{stacks: n, operatorFlags: o.operatorFlags, loadBefore: loadAverage()}
	fmt.Fprintf(os.Stderr, "bench: %d stacks: starting etcd and kube-apiserver (load average %s)...\n", n, r.loadBefore)
	env, audit, err := startControlPlane(root)
	if err != nil {
		return r, err
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the bench's own requests are not what is measured
	cfg.UserAgent = benchAgent // the audit log tells them apart
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: local.Scheme()})
	if err != nil {
		return r, err
	}

	logFile := filepath.Join(env.Dir(), "operator.log")
	flags := o.operatorFlags
	var fr *front
	if o.serverStatus {
		addr, stop, err := startStandin(env.Dir(), local.DemoPin("2.0.0").LlamaStackVersion)
		if err != nil {
			return r, err
		}
		defer stop()
		if fr, err = startFront(addr, o.slow); err != nil {
			return r, err
		}
		defer fr.close()
		flags = append([]string{"--server-status-test-address=" + fr.addr}, flags...)
	}
	op, err := local.StartOperator(binary, env.Kubeconfig(), logFile, local.DemoPin("2.0.0"), flags...)
	if err != nil {
		return r, err
	}
	defer op.Stop(10 * time.Second)
	m := &metrics{addr: op.MetricsAddr}
	if err := local.Wait(ctx, 200*time.Millisecond, func() error { _, err := m.read(); return err }); err != nil {
		return r, fmt.Errorf("operator metrics: %w (log: %s)", err, logFile)
	}

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return r, err
	}
	for _, obj := range objects {
		// A copy: the objects serve every size, each on a new control plane.
		if err := c.Create(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return r, err
		}
	}
	before, err := m.read()
	if err != nil {
		return r, err
	}
	if _, err := audit.operators(); err != nil {
		return r, err
	}
	// The operator with its caches synced and nothing to hold: what each
	// stack adds is measured above this.
	r.rssBase, _, _ = op.RSS()
	cpuStart, othersStart := cpuTime(op.Cmd.Process.Pid, o.clockTicks), othersCPU(op.Cmd.Process.Pid, o.clockTicks)
	start := time.Now()
	err = parallel(n, 8, func(i int) error { return c.Create(ctx, newStack(stackName(i), i)) })
	if err != nil {
		return r, err
	}
	r.created = time.Since(start)
	waitCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := waitApplied(waitCtx, c, n); err != nil {
		return r, fmt.Errorf("%w (log: %s)", err, logFile)
	}
	r.applied = time.Since(start)
	created, err := audit.operators()
	if err != nil {
		return r, err
	}
	r.createdKinds, r.createdWrites = perKind(created), created
	_, r.peak, _ = op.RSS()
	r.cpuApplied, r.cpuOthers = cpuTime(op.Cmd.Process.Pid, o.clockTicks)-cpuStart, othersCPU(op.Cmd.Process.Pid, o.clockTicks)-othersStart
	var beforeLive sample
	if o.serverStatus {
		fmt.Fprintln(os.Stderr, "bench: making the servers available, waiting for their live status...")
		if beforeLive, err = m.read(); err != nil {
			return r, err
		}
		liveStart := time.Now()
		var servers atomic.Int64
		err := parallel(n, 8, func(i int) error {
			up, err := makeAvailable(ctx, c, stackName(i))
			if up {
				servers.Add(1)
			}
			return err
		})
		if err != nil {
			return r, err
		}
		if r.liveHealthy, err = waitLive(waitCtx, c, int(servers.Load())); err != nil {
			return r, fmt.Errorf("%w (log: %s)", err, logFile)
		}
		r.live = time.Since(liveStart)
	}

	fmt.Fprintln(os.Stderr, "bench: waiting for the writes that follow creation...")
	var afterCreate sample
	for r.settled < settleRounds {
		r.settled++
		rr, err := round(ctx, c, m, n, r.settled)
		if err != nil {
			return r, err
		}
		afterCreate = rr.after
		if rr.writes() == 0 {
			break
		}
	}
	r.creationWrites = afterCreate.writes - before.writes
	settled, err := audit.operators()
	if err != nil {
		return r, err
	}
	r.settledKinds = perKind(settled)
	if o.serverStatus {
		// Those of the stacks' readiness (their status, the PhaseReady
		// Event, the live status) apart.
		r.readyWrites = afterCreate.writes - beforeLive.writes
		r.creationWrites -= r.readyWrites
	}

	fmt.Fprintf(os.Stderr, "bench: steady state for %s...\n", o.steady)
	steadyStart := time.Now()
	cpuSteadyStart := cpuTime(op.Cmd.Process.Pid, o.clockTicks)
	for r.rounds == 0 || time.Since(steadyStart) < o.steady {
		r.rounds++
		if _, err := round(ctx, c, m, n, r.settled+r.rounds); err != nil {
			return r, err
		}
	}
	r.steadyTime = time.Since(steadyStart)
	r.cpuSteady = cpuTime(op.Cmd.Process.Pid, o.clockTicks) - cpuSteadyStart
	r.rss, r.peakSteady, _ = op.RSS()
	r.rssParts = rssParts(op.Cmd.Process.Pid)
	afterSteady, err := m.read()
	if err != nil {
		return r, err
	}
	r.steadyWrites, r.steadyReconciles = afterSteady.writes-afterCreate.writes, afterSteady.reconciles-afterCreate.reconciles
	r.serverRequestsCreation, r.serverRequestsSteady = afterCreate.serverRequests-before.serverRequests, afterSteady.serverRequests-afterCreate.serverRequests
	r.heapSteady = afterSteady.heap

	if o.idle > 0 {
		fmt.Fprintf(os.Stderr, "bench: idle for %s...\n", o.idle)
		cpu0 := cpuTime(op.Cmd.Process.Pid, o.clockTicks)
		idleStart := time.Now()
		select { // a window to measure, not a wait for anything
		case <-time.After(o.idle):
		case <-ctx.Done():
			return r, ctx.Err()
		}
		r.idleTime, r.cpuIdle = time.Since(idleStart), cpuTime(op.Cmd.Process.Pid, o.clockTicks)-cpu0
		afterIdle, err := m.read()
		if err != nil {
			return r, err
		}
		r.idleWrites, r.idleServerRequests = afterIdle.writes-afterSteady.writes, afterIdle.serverRequests-afterSteady.serverRequests
		r.idleReconciles = afterIdle.reconciles - afterSteady.reconciles
		afterSteady = afterIdle
	}

	if o.serverStatus && len(o.cases) > 0 {
		if r.cases, err = runCases(ctx, o, fr, m, audit); err != nil {
			return r, fmt.Errorf("%w (log: %s)", err, logFile)
		}
		if afterSteady, err = m.read(); err != nil {
			return r, err
		}
	}

	if o.unrelated > 0 {
		fmt.Fprintf(os.Stderr, "bench: creating %d unrelated objects of each kind the operator watches...\n", o.unrelated)
		unrelatedStart := time.Now()
		made, err := createUnrelated(ctx, c, o.unrelated)
		if err != nil {
			return r, err
		}
		r.unrelatedCreated, r.unrelatedPerKind, r.unrelatedObjects = time.Since(unrelatedStart), o.unrelated, made
		// What their events made the operator do, then one more round: it
		// has seen every event they could cause, and still writes nothing.
		afterObjects, err := m.read()
		if err != nil {
			return r, err
		}
		r.unrelatedWrites, r.unrelatedReconciles = afterObjects.writes-afterSteady.writes, afterObjects.reconciles-afterSteady.reconciles
		last, err := round(ctx, c, m, n, r.settled+r.rounds+1)
		if err != nil {
			return r, err
		}
		r.lastRoundWrites, r.lastRoundReconciles = last.writes(), last.reconciles()
		r.rssUnrelated, r.peakUnrelated, _ = op.RSS()
		r.heapUnrelated = last.after.heap
	}
	r.loadAfter = loadAverage()
	return r, nil
}

// createUnrelated creates perKind objects of each kind the operator watches,
// in a namespace of their own and without the operator's labels, and
// returns how many it made.
func createUnrelated(ctx context.Context, c client.Client, perKind int) (int, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unrelatedNS}}); err != nil {
		return 0, err
	}
	payload := strings.Repeat("x", 1024)
	labels := map[string]string{"app": "unrelated"}
	kinds := []func(name string) client.Object{
		func(name string) client.Object {
			return &corev1.Secret{ObjectMeta: unrelatedMeta(name), StringData: map[string]string{"data": payload}}
		},
		func(name string) client.Object {
			return &corev1.ConfigMap{ObjectMeta: unrelatedMeta(name), Data: map[string]string{"data": payload}}
		},
		func(name string) client.Object {
			return &appsv1.Deployment{ObjectMeta: unrelatedMeta(name), Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				}},
			}}
		},
		func(name string) client.Object {
			// Headless: no cluster IP, which 10,000 Services would exhaust.
			return &corev1.Service{ObjectMeta: unrelatedMeta(name), Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
			}}
		},
		func(name string) client.Object {
			return &corev1.PersistentVolumeClaim{ObjectMeta: unrelatedMeta(name), Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
		},
	}
	err := parallel(perKind*len(kinds), 16, func(i int) error {
		return c.Create(ctx, kinds[i%len(kinds)](fmt.Sprintf("u%06d", i)))
	})
	return perKind * len(kinds), err
}

func unrelatedMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: unrelatedNS, Name: name}
}

func stackName(i int) string { return fmt.Sprintf("s%04d", i) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r result) print(o options) {
	flags := "default flags"
	if len(r.operatorFlags) > 0 {
		flags = strings.Join(r.operatorFlags, " ")
	}
	what := fmt.Sprintf("a mix of %d kinds using every feature", testutil.FeatureVariants)
	if o.kind == kindStarter {
		what = "copies of " + starterSample
	}
	fmt.Printf("stacks:                                   %d, %s (created in %s)\n", r.stacks, what, r.created.Round(time.Millisecond))
	fmt.Printf("operator:                                 %s, %s\n", o.operator, flags)
	fmt.Printf("load average before / after:              %s / %s\n", r.loadBefore, r.loadAfter)
	fmt.Printf("time until all applied, not Degraded:     %s (CPU meanwhile: operator %s, etcd, kube-apiserver and bench %s)\n",
		r.applied.Round(time.Millisecond), r.cpuApplied.Round(10*time.Millisecond), r.cpuOthers.Round(10*time.Millisecond))
	fmt.Printf("API writes per stack at creation:         %.2f (%d in all, settled in round %d)\n",
		float64(r.creationWrites)/float64(r.stacks), r.creationWrites, r.settled)
	fmt.Printf("API writes in the steady state:           %d in %d reconciles (%d rounds of %d stacks, %s) (target 0)\n",
		r.steadyWrites, r.steadyReconciles, r.rounds, r.stacks, r.steadyTime.Round(time.Second))
	fmt.Printf("operator CPU in the steady state:         %s in %s (%.1f%% of a core)\n", r.cpuSteady.Round(10*time.Millisecond),
		r.steadyTime.Round(time.Second), 100*r.cpuSteady.Seconds()/r.steadyTime.Seconds())
	if o.serverStatus {
		fmt.Printf("API writes per stack to Ready + live:     %.2f (%d in all: the status when Available, its PhaseReady Event, the status with the server's)\n",
			float64(r.readyWrites)/float64(r.stacks), r.readyWrites)
		fmt.Printf("live server status:                       every stack shown %s after its server was Available (%d ProvidersHealthy=True)\n",
			r.live.Round(time.Millisecond), r.liveHealthy)
		fmt.Printf("requests to servers:                      %d until settled; %d in the steady state (%.0f a minute, %.2f per stack a minute)\n",
			r.serverRequestsCreation, r.serverRequestsSteady, float64(r.serverRequestsSteady)/r.steadyTime.Minutes(),
			float64(r.serverRequestsSteady)/r.steadyTime.Minutes()/float64(r.stacks))
	}
	if r.idleTime > 0 {
		fmt.Printf("idle window (the bench changes nothing):  %s: %d writes, %d reconciles, %d requests to servers (%.0f a minute), operator CPU %s (%.2f%% of a core)\n",
			r.idleTime.Round(time.Second), r.idleWrites, r.idleReconciles, r.idleServerRequests, float64(r.idleServerRequests)/r.idleTime.Minutes(),
			r.cpuIdle.Round(10*time.Millisecond), 100*r.cpuIdle.Seconds()/r.idleTime.Seconds())
	}
	printPerKind("the operator's writes per resource until every stack was applied", r.stacks, r.createdKinds, true)
	kinds := 1
	if o.kind == kindFeatures {
		kinds = testutil.FeatureVariants
	}
	printStackWrites(r.createdWrites, min(kinds, r.stacks))
	title := "the operator's writes per resource from then until settled"
	if o.serverStatus {
		title += " (the stacks' readiness and live status)"
	}
	printPerKind(title, r.stacks, r.settledKinds, false)
	if len(r.cases) > 0 {
		printCases(r.stacks, o.slow, r.cases)
	}
	fmt.Printf("operator RSS before the first stack:      %s\n", mib(r.rssBase))
	fmt.Printf("operator peak RSS after creation:         %s\n", mib(r.peak))
	fmt.Printf("operator RSS / peak after steady state:   %s / %s (%s; heap in use %s)\n", mib(r.rss), mib(r.peakSteady), r.rssParts, mib(r.heapSteady))
	if r.unrelatedObjects > 0 {
		fmt.Printf("unrelated objects:                        %d (%d each of Secrets, ConfigMaps, Deployments, Services, PVCs; created in %s; %d writes, %d reconciles meanwhile)\n",
			r.unrelatedObjects, r.unrelatedPerKind, r.unrelatedCreated.Round(time.Second), r.unrelatedWrites, r.unrelatedReconciles)
		fmt.Printf("operator RSS / peak with them:            %s / %s (heap in use %s; %d writes in %d reconciles after them)\n",
			mib(r.rssUnrelated), mib(r.peakUnrelated), mib(r.heapUnrelated), r.lastRoundWrites, r.lastRoundReconciles)
	}
	fmt.Println()
}

// printCurve prints one row per size, and then how flat the cost per stack
// stays: each size's per-stack figures divided by those of the first size.
func printCurve(o options, results []result) {
	fmt.Printf("scale curve (%s stacks, each size on a fresh control plane; unrelated: %d objects of each watched kind):\n", o.kind, o.unrelated)
	fmt.Println("  to all Deployments: from the first create until every stack's status said ConfigGenerated=True and Degraded=False")
	fmt.Println("    at its generation (every object, its Deployment among them, applied); idle: the -idle window after the steady state;")
	fmt.Println("    RSS: after the steady state; base: before the first stack; RSS/stack: (RSS - base) / stacks, which holds what the first")
	fmt.Println("    stacks load once (the lines' data, the code's pages); added: (RSS - RSS of the size before) / (stacks - stacks before)")
	fmt.Printf("%7s  %18s  %12s  %20s  %12s  %12s  %9s  %9s  %9s  %10s  %10s  %18s  %s\n",
		"stacks", "to all Deployments", "writes/stack", "steady writes/recs", "CPU/min idle", "req/min idle",
		"peak RSS", "base RSS", "RSS", "RSS/stack", "added", "RSS with unrelated", "load avg before / after")
	for i, r := range results {
		added := "-"
		if i > 0 {
			added = kib(r.rssAdded(results[i-1]))
		}
		unrelated := "-"
		if r.unrelatedObjects > 0 {
			unrelated = fmt.Sprintf("%s (%+.1f)", mib(r.rssUnrelated), float64(r.rssUnrelated-r.rss)/(1<<20))
		}
		cpuIdle, requestsIdle := "-", "-"
		if r.idleTime > 0 {
			cpuIdle = (time.Duration(float64(r.cpuIdle) / r.idleTime.Minutes())).Round(10 * time.Millisecond).String()
			requestsIdle = fmt.Sprintf("%.0f", float64(r.idleServerRequests)/r.idleTime.Minutes())
		}
		fmt.Printf("%7d  %18s  %12.2f  %20s  %12s  %12s  %9s  %9s  %9s  %10s  %10s  %18s  %s / %s\n",
			r.stacks, r.applied.Round(10*time.Millisecond), float64(r.creationWrites)/float64(r.stacks),
			fmt.Sprintf("%d / %d", r.steadyWrites+r.lastRoundWrites, r.steadyReconciles+r.lastRoundReconciles),
			cpuIdle, requestsIdle, mib(r.peak), mib(r.rssBase), mib(r.rss), kib(r.rssPerStack()), added, unrelated,
			r.loadBefore, r.loadAfter)
	}
	first := results[0]
	fmt.Printf("\nper stack, divided by the %d-stack figure (1.00 = flat):\n", first.stacks)
	figures := []struct {
		name string
		of   func(result) float64
	}{
		{"time to all Deployments", func(r result) float64 { return r.applied.Seconds() / float64(r.stacks) }},
		{"writes at creation", func(r result) float64 { return float64(r.creationWrites) / float64(r.stacks) }},
		{"operator CPU per stack at creation", func(r result) float64 { return r.cpuApplied.Seconds() / float64(r.stacks) }},
		{"operator CPU per steady reconcile", func(r result) float64 { return perOne(r.cpuSteady.Seconds(), r.steadyReconciles) }},
		{"  less the prober's (idle rate)", func(r result) float64 { return perOne(r.cpuSteadyReconciles(), r.steadyReconciles) }},
		{"operator CPU a minute idle", func(r result) float64 { return perStackMinute(r.cpuIdle.Seconds(), r) }},
		{"requests to servers a minute idle", func(r result) float64 { return perStackMinute(float64(r.idleServerRequests), r) }},
		{"RSS above the base", func(r result) float64 { return float64(r.rssPerStack()) }},
	}
	fmt.Printf("%-36s", "")
	for _, r := range results {
		fmt.Printf("  %8d", r.stacks)
	}
	fmt.Println()
	for _, f := range figures {
		fmt.Printf("%-36s", f.name)
		for _, r := range results {
			base, v := f.of(first), f.of(r)
			if base == 0 || math.IsNaN(base) || math.IsNaN(v) {
				fmt.Printf("  %8s", "-")
				continue
			}
			fmt.Printf("  %8.2f", v/base)
		}
		fmt.Println()
	}
	if len(results) > 2 {
		// What a stack adds, from one size to the next, divided by what
		// one added from the first size to the second.
		fmt.Printf("%-36s  %8s", "RSS an added stack takes", "-")
		for i, r := range results[1:] {
			fmt.Printf("  %8.2f", float64(r.rssAdded(results[i]))/float64(results[1].rssAdded(first)))
		}
		fmt.Println()
	}
}

// cpuSteadyReconciles is the operator's CPU time in the steady state less
// what its prober spent meanwhile, estimated at the prober's rate in the
// idle window (in which the operator reconciles nothing): the prober polls
// every stack's server all the while, so its share of the steady state
// grows with the stacks and the state's length. NaN without an idle window.
func (r result) cpuSteadyReconciles() float64 {
	if r.idleTime <= 0 {
		return math.NaN()
	}
	return r.cpuSteady.Seconds() - r.cpuIdle.Seconds()*r.steadyTime.Seconds()/r.idleTime.Seconds()
}

// rssAdded is the RSS each stack added from the size before (prev) to r.
func (r result) rssAdded(prev result) int64 { return (r.rss - prev.rss) / int64(r.stacks-prev.stacks) }

// rssPerStack is what each stack added to the operator's RSS: its RSS after
// the steady state above its RSS before the first stack, per stack.
func (r result) rssPerStack() int64 { return (r.rss - r.rssBase) / int64(r.stacks) }

// perOne is v per one of n, NaN when there were none.
func perOne(v float64, n int64) float64 {
	if n == 0 {
		return math.NaN()
	}
	return v / float64(n)
}

// perStackMinute is v of the idle window per stack and minute, NaN
// without the window.
func perStackMinute(v float64, r result) float64 {
	if r.idleTime == 0 {
		return math.NaN()
	}
	return v / r.idleTime.Minutes() / float64(r.stacks)
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }

// rssParts says what the RSS of process pid is made of: anonymous memory
// (the heap, stacks) and pages of files (the binary).
func rssParts(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "parts unknown"
	}
	var parts []string
	for line := range strings.SplitSeq(string(data), "\n") {
		key, value, _ := strings.Cut(line, ":")
		if key == "RssAnon" || key == "RssFile" {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			parts = append(parts, fmt.Sprintf("%s %s", strings.TrimPrefix(key, "Rss"), mib(kb*1024)))
		}
	}
	return strings.Join(parts, ", ")
}

// othersCPU is the CPU time of this process and of its children but the
// operator (etcd and kube-apiserver); hz is the clock tick rate.
func othersCPU(operator int, hz int64) time.Duration {
	total := cpuTime(os.Getpid(), hz)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == operator {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		_, after, _ := strings.Cut(string(data), ") ")
		if f := strings.Fields(after); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			total += cpuTime(pid, hz)
		}
	}
	return total
}

// cpuTime is the CPU time (user and system) process pid has used; hz is
// the clock tick rate of /proc/<pid>/stat (clockTicks).
func cpuTime(pid int, hz int64) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses: state is
	// the first, utime and stime the 12th and 13th, in clock ticks.
	_, after, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(after)
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return ticksToDuration(user+sys, hz)
}

// loadAverage is the 1, 5 and 15 minute load average of the machine.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

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
	err = parallel(n, 8, func(i int) error {
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

// waitApplied waits until n stacks have ConfigGenerated=True and
// Degraded=False at their generation (every step applied its objects),
// following them with a watch.
func waitApplied(ctx context.Context, c client.WithWatch, n int) error {
	st := &applied{of: map[string]bool{}}
	err := follow(ctx, c, st.see, func() bool { return st.count() >= n })
	if err != nil {
		return fmt.Errorf("%w (%s of %d)", err, st, n)
	}
	return nil
}

// follow lists the bench's stacks and then watches them, passing each
// version seen to see, until done says so after one. A watch rather than
// polling lists: a list of 10,000 stacks every moment would compete with
// the operator and the API server for the CPU, and the bench would be what
// is measured.
func follow(ctx context.Context, c client.WithWatch, see func(*v1alpha1.InferenceStack), done func() bool) error {
	for {
		var list v1alpha1.InferenceStackList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			see(&list.Items[i])
		}
		if done() {
			return nil
		}
		w, err := c.Watch(ctx, &v1alpha1.InferenceStackList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*v1alpha1.InferenceStack); ok && ev.Type != watch.Deleted {
				see(s)
			}
			if done() {
				w.Stop()
				return nil
			}
		}
		// The watch ended (the API server closes them after a while): list
		// again.
		w.Stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// applied tracks which stacks are applied; it counts as it goes, since it
// sees every event of every stack.
type applied struct {
	of       map[string]bool
	n        int
	degraded *metav1.Condition
}

func (a *applied) see(s *v1alpha1.InferenceStack) {
	st := s.Status
	d := meta.FindStatusCondition(st.Conditions, v1alpha2.TypeDegraded)
	if d != nil && d.Status == metav1.ConditionTrue {
		a.degraded = d
	}
	ok := st.ObservedGeneration == s.Generation &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha2.TypeConfigGenerated) &&
		meta.IsStatusConditionFalse(st.Conditions, v1alpha2.TypeDegraded)
	switch was := a.of[s.Name]; {
	case ok && !was:
		a.n++
	case !ok && was:
		a.n--
	}
	a.of[s.Name] = ok
}

func (a *applied) count() int { return a.n }

func (a *applied) String() string {
	out := fmt.Sprintf("%d stacks applied", a.count())
	if a.degraded != nil {
		out += fmt.Sprintf("; one was Degraded: %s: %s", a.degraded.Reason, a.degraded.Message)
	}
	return out
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
	// serverRequests are the requests the operator sent to Llama Stack
	// servers (inferencestack_server_status_requests_total).
	serverRequests int64
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
		case name == "inferencestack_server_status_requests_total":
			s.serverRequests = value
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

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(int) error) error {
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}
