// Package testenv starts the real Kubernetes control plane that tests run
// against: etcd and kube-apiserver through controller-runtime's envtest, plus,
// when asked, kube-controller-manager for owner-reference garbage collection.
//
// The binaries are built from source by hack/controlplane.sh into
// bin/controlplane (or the folder KUBEBUILDER_ASSETS names). Every process is
// started so that the kernel kills it when the test binary dies, so a panic or
// a `go test -timeout` leaves nothing running.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options says what to start.
type Options struct {
	// CRDDirectoryPaths are folders (or files) of CRDs to install; a missing path is an error.
	CRDDirectoryPaths []string
	// GarbageCollector also runs kube-controller-manager with the garbage
	// collector and namespace controllers, so owned objects go when their owner does.
	GarbageCollector bool
	// Scheme is the client's scheme; nil means client-go's scheme plus apiextensions/v1.
	Scheme *runtime.Scheme
	// APIServerArgs are extra kube-apiserver flags (name without dashes ->
	// values). A flag with no values is not passed at all, which removes one
	// envtest sets (disable-admission-plugins=ServiceAccount, for example).
	APIServerArgs map[string][]string
	// EtcdArgs are extra etcd flags, as APIServerArgs.
	EtcdArgs map[string][]string
	// ServingAddress is the IP address the API server listens on and
	// advertises (the endpoint of the `kubernetes` Service); empty means
	// 127.0.0.1. It must be an address of this machine.
	ServingAddress string
	// ServingHosts are extra IP addresses and DNS names the API server's
	// serving certificate holds, such as the ClusterIP of the `kubernetes`
	// Service, through which pods reach it. When set, testenv makes the
	// serving CA and certificate itself instead of envtest.
	ServingHosts []string
	// Controllers are more kube-controller-manager controllers to run (names
	// as its --controllers flag takes them); kube-controller-manager runs when
	// GarbageCollector is set or Controllers is not empty.
	Controllers []string
}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client built from Config.
	Client client.Client

	env        *envtest.Environment
	kcm        *Process
	dir        string
	kubeconfig string
}

// AssetsDir is the folder holding etcd, kube-apiserver and
// kube-controller-manager: KUBEBUILDER_ASSETS when set, else bin/controlplane
// at the top of this repository.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("testenv: KUBEBUILDER_ASSETS is not set and %w", err)
	}
	return filepath.Join(root, "bin", "controlplane"), nil
}

// RepoRoot is the folder of this module's go.mod at or above the working
// directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(data), "module github.com/inferencestack/inferencestack\n") {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no repository root above %s", wd)
		}
	}
}

// FreePorts returns n distinct TCP ports free on every address of the
// machine: a port free on 127.0.0.1 alone may be taken on another address
// (the node's kube-apiserver on its host IP), where a server that binds
// every address (catalogd's webhook server, ":port") then fails.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Start starts etcd and kube-apiserver (and kube-controller-manager when
// opts.GarbageCollector is set) and installs opts.CRDDirectoryPaths.
func Start(opts Options) (_ *Env, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	names := []string{"etcd", "kube-apiserver"}
	if opts.GarbageCollector || len(opts.Controllers) > 0 {
		names = append(names, "kube-controller-manager")
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(assets, name)); err != nil {
			return nil, fmt.Errorf("testenv: %s is missing in %s: build the control plane with `make controlplane` "+
				"(hack/controlplane.sh) or point KUBEBUILDER_ASSETS at a folder holding it", name, assets)
		}
	}
	dir, err := os.MkdirTemp("", "testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()

	scheme := opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, err
		}
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	apiServer := &envtest.APIServer{Path: e.dieWithParent(assets, "kube-apiserver")}
	for name, values := range opts.APIServerArgs {
		if len(values) == 0 {
			apiServer.Configure().Disable(name)
			continue
		}
		apiServer.Configure().Set(name, values...)
	}
	etcd := &envtest.Etcd{Path: e.dieWithParent(assets, "etcd")}
	for name, values := range opts.EtcdArgs {
		if len(values) == 0 {
			etcd.Configure().Disable(name)
			continue
		}
		etcd.Configure().Set(name, values...)
	}
	if err := e.configureServing(apiServer, opts); err != nil {
		return nil, err
	}
	e.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: apiServer,
			Etcd:      etcd,
		},
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// Forked on the lasting thread, like every child of the tests
	// (onLastingThread): the wrappers' Pdeathsig is the forking thread's.
	err = onLastingThread(func() (err error) {
		e.Config, err = e.env.Start()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	e.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.kubeconfig, e.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	var controllers []string
	if opts.GarbageCollector {
		controllers = append(controllers, "garbagecollector", "namespace")
	}
	controllers = append(controllers, opts.Controllers...)
	if len(controllers) > 0 {
		if err := e.startControllerManager(filepath.Join(assets, "kube-controller-manager"), controllers); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// dieWithParent writes a wrapper script that runs bin under
// `setpriv --pdeathsig KILL`, so the kernel kills it when the test binary
// exits by any means. Without setpriv it returns the binary itself.
func (e *Env) dieWithParent(assets, name string) string {
	bin := filepath.Join(assets, name)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin
	}
	wrapper := filepath.Join(e.dir, name)
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return bin
	}
	return wrapper
}

func (e *Env) startControllerManager(path string, controllers []string) error {
	// The root CA publisher puts this CA into every namespace's
	// kube-root-ca.crt ConfigMap, which pods trust the API server with.
	rootCA := filepath.Join(e.dir, "serving-ca.crt")
	if err := os.WriteFile(rootCA, e.Config.CAData, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(path,
		"--kubeconfig="+e.kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--root-ca-file="+rootCA,
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	)
	p, err := StartProcess(cmd, filepath.Join(e.dir, "kube-controller-manager.log"))
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if ended, err := p.Wait(500 * time.Millisecond); ended {
		return fmt.Errorf("testenv: kube-controller-manager exited at start: %w\n%s", err, p.Log())
	}
	e.kcm = p
	return nil
}

// Kubeconfig is the path of a cluster-admin kubeconfig file for this control plane.
func (e *Env) Kubeconfig() string { return e.kubeconfig }

// Dir is a scratch folder that lives as long as the Env; logs are kept there.
func (e *Env) Dir() string { return e.dir }

// Stop stops every process and removes the scratch folder.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil {
		e.kcm.Stop(10 * time.Second)
		e.kcm = nil
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("testenv: stopping the control plane: %w", err))
		}
		e.env = nil
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
		e.dir = ""
	}
	return errors.Join(errs...)
}

// RunMain is the body of a TestMain: it starts the control plane into *env,
// runs the tests, stops everything (also on SIGINT/SIGTERM) and exits with the
// tests' status.
func RunMain(m *testing.M, opts Options, env **Env) {
	Main(m, func() (func() error, error) {
		e, err := Start(opts)
		if err != nil {
			return nil, err
		}
		*env = e
		return e.Stop, nil
	})
}

// Main is the body of a TestMain that runs the tests between start and the
// stop function start returns (called also on SIGINT/SIGTERM), and exits with
// the tests' status, or 1 when start or stop fails.
func Main(m *testing.M, start func() (stop func() error, err error)) {
	os.Exit(runMain(m, start))
}

func runMain(m *testing.M, start func() (func() error, error)) int {
	stop, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		_ = stop()
		os.Exit(130)
	}()
	code := m.Run()
	signal.Stop(signals)
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
