// Command manager runs the InferenceStack operator: it loads the operand pin
// of its release, and runs the InferenceStack controller in a
// controller-runtime manager with secure metrics, health probes and leader
// election.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/components/cache"
	"github.com/inferencestack/inferencestack/operator/components/network"
	"github.com/inferencestack/inferencestack/operator/internal/apiserved"
	"github.com/inferencestack/inferencestack/operator/internal/controller"
	"github.com/inferencestack/inferencestack/operator/internal/metricsauth"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/internal/wire"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
)

type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionID string
	leaderElectionNS string
	pinFile          string
	cacheImage       string
	cacheRunAsUser   string
	retryInterval    time.Duration
	stackSelector    string
	takeUnlabeled    bool
	concurrency      int
	apiCheckInterval time.Duration
	apiVersion       string
	// serverStatus is how the live servers are read (status.server).
	serverStatus serverStatusOptions
	// operatorNamespace and operatorPodLabels are the operator's own pods,
	// which the servers' NetworkPolicies admit for the prober.
	operatorNamespace string
	operatorPodLabels string
	// operatorPeer is the two checked (nil: none to admit).
	operatorPeer *network.OperatorPeer
}

type serverStatusOptions struct {
	interval, timeout time.Duration
	concurrency       int
	// testAddress, when set, is dialled instead of every server's Service:
	// the bench runs the servers as one stand-in process, with no cluster
	// network. Not for production.
	testAddress string
}

// podNamespaceEnv is the variable the manager Deployment sets to its pod's
// namespace (downward API).
const podNamespaceEnv = "POD_NAMESPACE"

// gcPercent is the operator's GOGC unless the GOGC variable sets one: most
// of its heap is the short-lived garbage of reconciles, so collecting at 1.5
// times the live heap rather than twice costs little CPU and a third of
// its memory.
const gcPercent = 50

// readTimeout cuts off the operator's check that it can read InferenceStacks:
// longer than the 30 s the API server waits for a conversion webhook, so the
// check reports the API server's own error.
const readTimeout = 40 * time.Second

func main() {
	if len(os.Args) > 1 && os.Args[1] == ConversionCommand {
		conversionMain(os.Args[2:])
		return
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "",
		"Address of the metrics endpoint; 0 turns it off (default: one port per major, :8443 for 1, :8444 for 2, ...).")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, to callers authorized by the API server.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "",
		"Address of the /healthz and /readyz endpoints (default: one port per major, :8081 for 1, :8082 for 2, ...).")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the Go profiler's /debug/pprof endpoints; 0 turns them off.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so only one replica reconciles.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "",
		"Lease name of the leader election (default: one per major version of the operator, from the pin's operator version).")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's).")
	fs.StringVar(&o.pinFile, "pin-file", pin.DefaultPath,
		"Operand pin file; when absent, "+pin.EnvPrefix+"<DISTRIBUTION>, "+pin.OperatorVersionEnv+" and "+pin.LlamaStackVersionEnv+" variables stand in.")
	fs.StringVar(&o.cacheImage, "cache-image", envOr(pin.CacheImageEnv, cache.DefaultImage), "PostgreSQL image of spec.cache.")
	fs.StringVar(&o.cacheRunAsUser, "cache-run-as-user", cache.Auto,
		"User (and group and fsGroup) PostgreSQL of spec.cache runs as: a user id; "+cache.Platform+" to leave them to the platform; or "+
			cache.Auto+": "+cache.Platform+" on OpenShift (whose restricted-v2 SCC assigns them), "+
			strconv.FormatInt(cache.PostgresUID, 10)+" (the official postgres image's user) elsewhere. "+
			"The same decision gives servers with workload.stateVolume their fsGroup (none with "+cache.Platform+").")
	fs.DurationVar(&o.retryInterval, "retry-interval", controller.DefaultRetryInterval,
		"How soon a stack waiting for a missing Secret or ConfigMap is looked at again.")
	fs.DurationVar(&o.apiCheckInterval, "api-check-interval", 10*time.Second,
		"While the API server does not serve the InferenceStack version this operator reads (a CRD package release that does not serve it), how often it asks again; "+
			"once it does, how often the operator checks that it can read InferenceStacks through it (a read of one stack past its cache; the conversion webhook down fails it).")
	fs.StringVar(&o.apiVersion, "api-version", v1alpha1.GroupVersion.Version,
		"The InferenceStack API version this operator reads and writes ("+strings.Join(wire.Versions, ", ")+"; the release input's api.reads, docs/api-versions.md).")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", 0,
		"How many InferenceStacks are reconciled at once; 0: 4 per CPU the operator may use (GOMAXPROCS).")
	fs.StringVar(&o.stackSelector, "stack-selector", "",
		"Label selector narrowing the InferenceStacks this operator reconciles, within those labelled "+v1alpha2.LabelOperatorMajor+"=<its major>.")
	fs.BoolVar(&o.takeUnlabeled, "take-unlabeled-stacks", true,
		"Reconcile the InferenceStacks without "+v1alpha2.LabelOperatorMajor+" too (within --stack-selector), without labelling them; "+
			"exactly one of the majors running side by side takes them (each release sets it in its bundle).")
	fs.DurationVar(&o.serverStatus.interval, "server-status-interval", serverstatus.DefaultInterval,
		"How often the operator reads each Available server's version and providers (status.server, condition ProvidersHealthy); "+
			"each wait varies by 20%, and doubles (up to 10m) while a server does not answer. 0 turns the reading off.")
	fs.DurationVar(&o.serverStatus.timeout, "server-status-timeout", serverstatus.DefaultTimeout, "How long one reading of a server may take.")
	fs.IntVar(&o.serverStatus.concurrency, "server-status-concurrency", serverstatus.DefaultConcurrency, "How many servers are read at once; beside them, a quarter as many (at least 1) whose last read failed. A read holds its slot for 200 ms at most, then waits for its server without one.")
	fs.StringVar(&o.serverStatus.testAddress, "server-status-test-address", "",
		"TESTS ONLY: dial this host:port instead of each server's Service (the bench's stand-in server); TLS still verifies the Service's name.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", os.Getenv(podNamespaceEnv),
		"Namespace of the operator's pods (default: $"+podNamespaceEnv+", which the manager Deployment sets from the downward API). "+
			"Every server's NetworkPolicy admits the operator's pods (this namespace and --operator-pod-labels) on the server's port, "+
			"whatever networking.allowedFrom says, so the server-status reading reaches the server; empty (out of cluster): it admits none.")
	fs.StringVar(&o.operatorPodLabels, "operator-pod-labels", labels.Set(network.DefaultOperatorPodLabels).String(),
		"Labels of the operator's pods as key=value,... (its Deployment's selector), which the servers' NetworkPolicies admit in --operator-namespace.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	p, err := pin.Load(o.pinFile, os.Environ(), runconfig.Distributions())
	if err != nil {
		return err
	}
	major, err := p.Major()
	if err != nil {
		return err
	}
	var extra labels.Selector
	if o.stackSelector != "" {
		if extra, err = labels.Parse(o.stackSelector); err != nil {
			return fmt.Errorf("--stack-selector %q: %w", o.stackSelector, err)
		}
	}
	selector, err := controller.StackSelector(major, extra)
	if err != nil {
		return err
	}
	o.defaults(major)
	if o.operatorPeer, err = o.peer(); err != nil {
		return err
	}
	gv, err := wire.GroupVersion(o.apiVersion)
	if err != nil {
		return fmt.Errorf("--api-version: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme), v1alpha2.AddToScheme(scheme)); err != nil {
		return err
	}
	metrics := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		metrics.FilterProvider = metricsauth.Filter
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the API server: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	cacheUser, err := cache.RunAsUser(o.cacheRunAsUser, dc.ServerGroups)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNS,
		// A stopping leader (a rollout replacing the pod, such as an
		// upgrade within the major) gives the Lease up once its
		// controllers have stopped, so the new pod leads at once instead
		// of after the Lease's 15 s. Safe because the program ends as soon
		// as the manager returns.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controller.CacheOptionsAt(selector, gv),
		MapperProvider:                apiserved.MapperProvider(gv.WithKind("InferenceStack")),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	// The controllers start once the API server serves the version they
	// read: a CRD package that does not serve it is reported (log, metric)
	// instead of failing the start, so the pod does not crash-loop.
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if err := apiserved.Wait(ctx, dc.ServerResourcesForGroupVersion, gv, "inferencestacks", o.apiCheckInterval, ctrl.Log.WithName("api")); err != nil {
			return nil // stopping
		}
		if err := setupControllers(ctx, mgr, o, p, major, extra, cacheUser, gv); err != nil {
			return err
		}
		// Reads that need the conversion webhook fail while it is down, and
		// the operator's watch does not say so until a stack changes
		// (apiserved.Monitor): each --api-check-interval it reads one stack
		// from the API server's storage.
		apiserved.Monitor(ctx, apiserved.ReadOne(mgr.GetAPIReader(), gv), gv, o.apiCheckInterval, readTimeout, ctrl.Log.WithName("api"))
		return nil
	}))
	if err != nil {
		return err
	}
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "operatorVersion", p.OperatorVersion, "distributions", len(p.Operands),
		"stacks", selector.String(), "apiVersion", gv.String(), "takeUnlabeledStacks", o.takeUnlabeled, "leaderElectionID", o.leaderElectionID,
		"cacheRunAsUser", runAsUser(cacheUser), "serverPoliciesAdmit", admitted(o.operatorPeer))
	return mgr.Start(ctx)
}

// setupControllers adds the reconciler (of this major's stacks, and of the
// unlabelled ones when this major takes them) to the manager.
func setupControllers(ctx context.Context, mgr manager.Manager, o options, p pin.Pin, major string, extra labels.Selector, cacheUser *int64, gv schema.GroupVersion) error {
	recorder := mgr.GetEventRecorder("inferencestack-operator-v" + major)
	r := &controller.InferenceStackReconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		APIVersion:     gv,
		Recorder:       recorder,
		Pin:            p,
		CacheImage:     o.cacheImage,
		CacheRunAsUser: cacheUser,
		// The same platform decision: where the platform assigns the
		// cache's user and group (OpenShift), it assigns the server's
		// fsGroup too.
		ServerFSGroup: cacheUser,
		RetryInterval: o.retryInterval,
		Concurrency:   o.concurrency,
	}
	if so := o.serverStatus; so.interval > 0 {
		r.Prober = &serverstatus.Prober{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
			Interval: so.interval, Timeout: so.timeout, Concurrency: so.concurrency}
		if a := so.testAddress; a != "" {
			r.Prober.Resolve = func(string) string { return a }
		}
	}
	r.OperatorPeer = o.operatorPeer
	if o.takeUnlabeled {
		r.TakeUnlabeled = controller.Unlabeled(extra)
	}
	return r.SetupWithManager(ctx, mgr)
}

// defaults fills in what differs per major, so that two majors run side by
// side (also on one host, out of cluster): the Lease of the leader election
// and the metrics and probe ports.
func (o *options) defaults(major string) {
	n, _ := strconv.Atoi(major)
	if o.leaderElectionID == "" {
		o.leaderElectionID = "inferencestack-operator-v" + major + ".inferencestack.io"
	}
	if o.metricsAddr == "" {
		o.metricsAddr = ":" + strconv.Itoa(8442+n)
	}
	if o.probeAddr == "" {
		o.probeAddr = ":" + strconv.Itoa(8080+n)
	}
}

// peer is the operator's pods the servers' NetworkPolicies admit: none when
// the servers are not read, or when the operator does not know its
// namespace (out of cluster, its connections do not come from a pod).
func (o *options) peer() (*network.OperatorPeer, error) {
	if o.serverStatus.interval <= 0 || o.operatorNamespace == "" {
		return nil, nil
	}
	podLabels, err := labels.ConvertSelectorToLabelsMap(o.operatorPodLabels)
	if err != nil {
		return nil, fmt.Errorf("--operator-pod-labels %q: %w", o.operatorPodLabels, err)
	}
	peer, err := network.NewOperatorPeer(o.operatorNamespace, podLabels)
	if err != nil {
		return nil, fmt.Errorf("--operator-namespace %q, --operator-pod-labels %q: %w", o.operatorNamespace, o.operatorPodLabels, err)
	}
	return peer, nil
}

// admitted says which of the operator's pods the servers' NetworkPolicies
// admit, for the start-up log line.
func admitted(p *network.OperatorPeer) string {
	if p == nil {
		return "no operator pod"
	}
	return "pods " + labels.Set(p.PodLabels).String() + " of namespace " + p.Namespace
}

func runAsUser(uid *int64) string {
	if uid == nil {
		return "assigned by the platform"
	}
	return strconv.FormatInt(*uid, 10)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
