package controller_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(&discard{})))
	testenv.RunMain(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")},
		GarbageCollector:  true,
		Scheme:            scheme(),
	}, &env)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// testPin is the operand pin the tests' operator runs with: release
// 1.0.0's operands, upstream's images by tag (their digests are not known
// here).
var testPin = pin.Pin{OperatorVersion: "1.0.0", LlamaStackVersion: "0.2.23", Operands: map[string]string{
	"starter":            "docker.io/llamastack/distribution-starter:0.2.23",
	"postgres-demo":      "docker.io/llamastack/distribution-postgres-demo:0.2.23",
	"meta-reference-gpu": "docker.io/llamastack/distribution-meta-reference-gpu:0.2.23",
}}

// operator is a running InferenceStack controller whose API writes are
// counted and whose finished reconciles are recorded.
type operator struct {
	writes     *writeCounter
	reconciles *reconcileRecord
	// events records the reasons of the Events the operator emitted, per
	// stack, as it emits them (the API server's copy comes later).
	events *eventRecord
	// rounds numbers the rounds of reconcileAll.
	rounds atomic.Int64
	stop   func()
	// reconciler is the running reconciler; cache is its manager's cache.
	reconciler *controller.InferenceStackReconciler
	cache      client.Reader
}

// operatorOption changes how startOperator runs the controller.
type operatorOption func(*operatorSetup)

type operatorSetup struct {
	// stacks selects the InferenceStacks in the cache; nil: all.
	stacks labels.Selector
	// takeUnlabeled is the reconciler's TakeUnlabeled.
	takeUnlabeled labels.Selector
	// concurrency is the reconciler's Concurrency.
	concurrency int
	// routeCheckInterval is the reconciler's RouteCheckInterval.
	routeCheckInterval time.Duration
	// prober, when set, is the reconciler's Prober; its Client and Reader
	// are set to the operator's (writes counted).
	prober *serverstatus.Prober
	// pin, when set, replaces testPin.
	pin *pin.Pin
	// config, when set, is how the operator reaches the API server instead
	// of as a cluster admin (env.Config).
	config *rest.Config
	// logs, when set, receives the operator's log lines.
	logs io.Writer
	// operatorPeer is the reconciler's OperatorPeer.
	operatorPeer *network.OperatorPeer
}

// asIdentity runs the operator with cfg's identity (and its RBAC).
func asIdentity(cfg *rest.Config) operatorOption {
	return func(o *operatorSetup) { o.config = cfg }
}

// loggingTo sends the operator's log lines to w.
func loggingTo(w io.Writer) operatorOption {
	return func(o *operatorSetup) { o.logs = w }
}

// withOperatorPeer has the servers' NetworkPolicies admit the operator's
// pods p.
func withOperatorPeer(p *network.OperatorPeer) operatorOption {
	return func(o *operatorSetup) { o.operatorPeer = p }
}

// withPin runs the operator with operand pin p instead of testPin.
func withPin(p pin.Pin) operatorOption {
	return func(o *operatorSetup) { o.pin = &p }
}

// withRouteCheckInterval sets how often, at most, the operator asks
// whether the API server serves Routes.
func withRouteCheckInterval(d time.Duration) operatorOption {
	return func(o *operatorSetup) { o.routeCheckInterval = d }
}

// onlyStacks keeps the operator to the stacks sel selects.
func onlyStacks(sel labels.Selector) operatorOption {
	return func(o *operatorSetup) { o.stacks = sel }
}

// withProber has the operator read the live servers with p.
func withProber(p *serverstatus.Prober) operatorOption {
	return func(o *operatorSetup) { o.prober = p }
}

// takingUnlabeled has the operator reconcile the unlabelled stacks that
// extra selects (nil: all) too, as the major that takes them does.
func takingUnlabeled(extra labels.Selector) operatorOption {
	return func(o *operatorSetup) { o.takeUnlabeled = controller.Unlabeled(extra) }
}

// withConcurrency sets how many stacks are reconciled at once.
func withConcurrency(n int) operatorOption {
	return func(o *operatorSetup) { o.concurrency = n }
}

// onlyMajor keeps to the stacks of one major, as the operator binary does.
func onlyMajor(t *testing.T, major string) operatorOption {
	sel, err := controller.StackSelector(major, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *operatorSetup) { o.stacks = sel }
}

// startOperator runs the controller in a manager of its own until the test
// ends (or stop is called).
func startOperator(t *testing.T, opts ...operatorOption) *operator {
	t.Helper()
	var setup operatorSetup
	for _, o := range opts {
		o(&setup)
	}
	cfg, logger := env.Config, ctrl.Log
	if setup.config != nil {
		cfg = setup.config
	}
	if setup.logs != nil {
		logger = zap.New(zap.WriteTo(setup.logs))
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                 logger,
		Scheme:                 scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controller.CacheOptions(setup.stacks),
		// Each test runs a manager of its own with the same controller.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{writes: &writeCounter{}, reconciles: &reconcileRecord{}, events: &eventRecord{}, cache: mgr.GetCache()}
	counted := &countingClient{Client: mgr.GetClient(), counter: op.writes}
	r := &controller.InferenceStackReconciler{
		Client:             counted,
		APIReader:          mgr.GetAPIReader(),
		Recorder:           &recordingRecorder{EventRecorder: mgr.GetEventRecorder("inferencestack-operator"), record: op.events},
		Pin:                testPin,
		CacheImage:         "docker.io/library/postgres:16.4",
		RetryInterval:      500 * time.Millisecond,
		FinalizerTimeout:   10 * time.Second,
		Concurrency:        setup.concurrency,
		RouteCheckInterval: setup.routeCheckInterval,
		TakeUnlabeled:      setup.takeUnlabeled,
		OperatorPeer:       setup.operatorPeer,
	}
	if setup.pin != nil {
		r.Pin = *setup.pin
	}
	if p := setup.prober; p != nil {
		p.Client, p.Reader = counted, mgr.GetAPIReader()
		r.Prober = p
	}
	op.reconciler = r
	controller.OnReconciled(r, op.reconciles.add)
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(op.stop)
	return op
}

// cached waits until the operator's cache holds obj at its resourceVersion
// (as the test last wrote or read it from the API server) or a later one:
// from then on a reconcile that begins reads that version.
func (op *operator) cached(t *testing.T, obj client.Object) {
	t.Helper()
	eventually(t, timeout, func() error {
		in := obj.DeepCopyObject().(client.Object)
		if err := op.cache.Get(context.Background(), client.ObjectKeyFromObject(obj), in); err != nil {
			return err
		}
		cmp, err := resourceversion.CompareResourceVersion(in.GetResourceVersion(), obj.GetResourceVersion())
		if err != nil {
			t.Fatal(err)
		}
		if cmp < 0 {
			return fmt.Errorf("the operator's cache holds %T %s at resourceVersion %s, want %s or later",
				obj, client.ObjectKeyFromObject(obj), in.GetResourceVersion(), obj.GetResourceVersion())
		}
		return nil
	})
}

// namespace makes a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(8)}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually retries check until it returns nil, failing the test with its
// last error after timeout.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get[T client.Object](t *testing.T, obj T, ns, name string) (T, error) {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	return obj, err
}

// edit reads ns/name into obj, changes it and writes it back; when the
// operator wrote the object in between (a conflict), it reads and changes
// it again. It returns what it wrote.
func edit[T client.Object](t *testing.T, obj T, ns, name string, change func(T)) T {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if _, err := get(t, obj, ns, name); err != nil {
			return err
		}
		change(obj)
		return env.Client.Update(context.Background(), obj)
	}); err != nil {
		t.Fatalf("editing %T %s/%s: %v", obj, ns, name, err)
	}
	return obj
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// eventRecord is the reasons of the Events emitted about each stack
// ("namespace/name"), in order.
type eventRecord struct {
	mu      sync.Mutex
	reasons map[string][]string
}

func (e *eventRecord) add(key, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reasons == nil {
		e.reasons = map[string][]string{}
	}
	e.reasons[key] = append(e.reasons[key], reason)
}

// of returns the reasons of the Events about stack ns/name so far.
func (e *eventRecord) of(ns, name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reasons[ns+"/"+name])
}

// recordingRecorder records each Event's reason, then emits it.
type recordingRecorder struct {
	events.EventRecorder
	record *eventRecord
}

func (r *recordingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if o, ok := regarding.(client.Object); ok {
		r.record.add(o.GetNamespace()+"/"+o.GetName(), reason)
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
