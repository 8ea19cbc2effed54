package olm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferencestack/inferencestack/test/testenv"
)

// SystemNamespace is where catalogd and operator-controller keep their state
// (operator-controller's Helm release secrets) and where their service
// accounts live, as in an OLM v1 install.
const SystemNamespace = "olmv1-system"

// RedirectedPrefix is the image reference prefix that the private
// registries.conf sends to the local registry: the catalog's bundle images
// (quay.io/inferencestack/<package>-bundle:v<version>) are pulled from
// <registry>/inferencestack/<package>-bundle:v<version>.
const RedirectedPrefix = "quay.io/inferencestack"

// Options says where OLM v1 comes from and which registry it pulls from.
type Options struct {
	// OLMDir holds catalogd, operator-controller and crd/ (hack/olm.sh's
	// output). Empty means $OLM_BIN, else bin/olm at the repository root.
	OLMDir string
	// Registry is the host ("127.0.0.1:PORT") of the plain-HTTP registry that
	// RedirectedPrefix is redirected to.
	Registry string
	// StartTimeout bounds waiting for both binaries to report ready; zero means 60s.
	StartTimeout time.Duration
	// ControlPlane is what else the control plane needs, such as a node's
	// settings (node.Node.ControlPlane); Start adds OLM's CRDs, the
	// garbage collector and the OwnerReferencesPermissionEnforcement
	// admission plugin.
	ControlPlane testenv.Options
}

// Cluster is a running control plane with OLM v1 on it.
type Cluster struct {
	// Env is the control plane (with the garbage collector); its methods
	// (Token, KubeconfigFor, ...) are the Cluster's.
	*testenv.Env
	// Registry is Options.Registry.
	Registry string
	// Signing signs and verifies what PushRelease pushes.
	Signing *Signing

	dir   string
	procs []*process
}

// OLMDir returns where hack/olm.sh puts OLM v1: $OLM_BIN, else bin/olm beside
// the control plane's default folder at the repository root.
func OLMDir() (string, error) {
	if dir := os.Getenv("OLM_BIN"); dir != "" {
		return dir, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "olm"), nil
}

// Start starts the control plane, installs the ClusterCatalog and
// ClusterExtension CRDs and starts catalogd and operator-controller. Stop
// undoes all of it; on error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	olmDir := opts.OLMDir
	if olmDir == "" {
		if olmDir, err = OLMDir(); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"catalogd", "operator-controller", "crd/clustercatalogs.yaml", "crd/clusterextensions.yaml"} {
		if _, err := os.Stat(filepath.Join(olmDir, name)); err != nil {
			return nil, fmt.Errorf("test/olm: %s is missing in %s: build OLM v1 with `make olm` (hack/olm.sh) "+
				"or point OLM_BIN at a folder holding it", name, olmDir)
		}
	}
	if opts.Registry == "" {
		return nil, errors.New("test/olm: Options.Registry is empty: start a registry (registry.Start) and pass its host")
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}

	cp := opts.ControlPlane
	cp.CRDDirectoryPaths = append(slices.Clone(cp.CRDDirectoryPaths), filepath.Join(olmDir, "crd"))
	cp.GarbageCollector = true
	args := maps.Clone(cp.APIServerArgs)
	if args == nil {
		args = map[string][]string{}
	}
	// As on OpenShift: setting blockOwnerDeletion on an owner reference
	// needs update on the owner's finalizers, so a bundle missing
	// inferencestacks/finalizers fails the tests. The plugin learns new
	// CRDs only every 30 s (WaitOwnerReferences).
	args["enable-admission-plugins"] = append(slices.Clone(args["enable-admission-plugins"]), "OwnerReferencesPermissionEnforcement")
	cp.APIServerArgs = args
	signing, err := NewSigning()
	if err != nil {
		return nil, err
	}
	env, err := testenv.Start(cp)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env, Registry: opts.Registry, Signing: signing, dir: filepath.Join(env.Dir(), "olm")}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	home, err := c.writeHome()
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(c.dir, "certs")
	catalogdCA := filepath.Join(c.dir, "catalogd-ca")
	for _, d := range []string{certs, catalogdCA} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := servingCert(certs); err != nil {
		return nil, err
	}
	// operator-controller reads every file of --catalogd-cas-dir as a CA.
	if err := os.Link(filepath.Join(certs, "ca.crt"), filepath.Join(catalogdCA, "ca.crt")); err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}); err != nil {
		return nil, fmt.Errorf("test/olm: creating namespace %s: %w", SystemNamespace, err)
	}

	ports, err := testenv.FreePorts(6)
	if err != nil {
		return nil, err
	}
	catalogdAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	env1 := []string{"KUBECONFIG=" + env.Kubeconfig(), "HOME=" + home, "TMPDIR=" + home}
	catalogd := processSpec{
		name:           "catalogd",
		bin:            filepath.Join(olmDir, "catalogd"),
		serviceAccount: "catalogd-controller-manager",
		probe:          "127.0.0.1:" + strconv.Itoa(ports[1]),
		env:            env1,
		args: []string{
			"--system-namespace=" + SystemNamespace,
			"--catalogs-server-addr=" + catalogdAddr,
			"--external-address=" + catalogdAddr,
			"--cache-dir=" + filepath.Join(c.dir, "catalogd-cache"),
			"--tls-cert=" + filepath.Join(certs, "tls.crt"),
			"--tls-key=" + filepath.Join(certs, "tls.key"),
			"--webhook-server-port=" + strconv.Itoa(ports[2]),
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[3]),
		},
	}
	operatorController := processSpec{
		name:           "operator-controller",
		bin:            filepath.Join(olmDir, "operator-controller"),
		serviceAccount: "operator-controller-controller-manager",
		probe:          "127.0.0.1:" + strconv.Itoa(ports[4]),
		env:            env1,
		args: []string{
			"--system-namespace=" + SystemNamespace,
			"--cache-path=" + filepath.Join(c.dir, "operator-controller-cache"),
			"--catalogd-cas-dir=" + catalogdCA,
		},
	}
	for _, spec := range []processSpec{catalogd, operatorController} {
		spec.args = append(spec.args, "--health-probe-bind-address="+spec.probe)
		p, err := c.start(ctx, spec)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	deadline := time.Now().Add(timeout)
	for _, p := range c.procs {
		if err := p.waitReady(deadline); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// writeHome makes the private HOME both binaries run with: registries.conf
// redirects RedirectedPrefix to the local registry over plain HTTP, and
// policy.json accepts unsigned images (the test images are unsigned).
func (c *Cluster) writeHome() (string, error) {
	home := filepath.Join(c.dir, "home")
	conf := filepath.Join(home, ".config", "containers")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return "", err
	}
	registries := fmt.Sprintf(`# Written by test/olm: pull the catalog's images from the test registry.
[[registry]]
prefix = %q
location = %q
insecure = true

[[registry]]
location = %q
insecure = true
`, RedirectedPrefix, c.Registry+"/inferencestack", c.Registry)
	if err := os.WriteFile(filepath.Join(conf, "registries.conf"), []byte(registries), 0o644); err != nil {
		return "", err
	}
	policy := `{"default":[{"type":"insecureAcceptAnything"}]}` + "\n"
	if err := os.WriteFile(filepath.Join(conf, "policy.json"), []byte(policy), 0o644); err != nil {
		return "", err
	}
	return home, nil
}

// Logs returns what a binary ("catalogd", "operator-controller") has logged so far.
func (c *Cluster) Logs(name string) string {
	data, err := os.ReadFile(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return fmt.Sprintf("(no log for %s: %v)", name, err)
	}
	return string(data)
}

// Stop stops catalogd, operator-controller and the control plane, and removes
// every file they used.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range c.procs {
		p.Stop(10 * time.Second)
	}
	c.procs = nil
	if c.Env != nil {
		errs = append(errs, c.Env.Stop())
		c.Env = nil
	}
	return errors.Join(errs...)
}

type processSpec struct {
	name           string
	bin            string
	serviceAccount string
	probe          string
	env            []string
	args           []string
}

type process struct {
	*testenv.Process
	name  string
	probe string
}

// start runs spec.bin in a new mount namespace whose /run holds a token of
// spec.serviceAccount at secrets/kubernetes.io/serviceaccount/, where
// client-go and OLM look for the in-cluster identity.
func (c *Cluster) start(ctx context.Context, spec processSpec) (*process, error) {
	run := filepath.Join(c.dir, spec.name+"-run")
	saDir := filepath.Join(run, "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(saDir, 0o755); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: spec.serviceAccount, Namespace: SystemNamespace}}
	if err := c.Client.Create(ctx, sa); err != nil {
		return nil, fmt.Errorf("test/olm: creating service account %s/%s: %w", SystemNamespace, spec.serviceAccount, err)
	}
	token, err := c.Token(ctx, SystemNamespace, spec.serviceAccount, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	files := map[string]string{"token": token, "namespace": SystemNamespace}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(saDir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}

	unshare := []string{"-m"}
	if os.Geteuid() != 0 {
		// A user namespace lets an unprivileged user own the new mount namespace.
		unshare = []string{"-r", "-m"}
	}
	args := append(unshare, "--", "/bin/sh", "-c", `mount --bind "$0" /run && exec "$@"`, run, spec.bin)
	args = append(args, spec.args...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), spec.env...)
	// The kernel kills the process when the test binary dies; the PID stays
	// the same through unshare's and sh's exec, so the binary itself is killed.
	proc, err := testenv.StartProcess(cmd, filepath.Join(c.dir, spec.name+".log"))
	if err != nil {
		return nil, fmt.Errorf("test/olm: %s under unshare (needs util-linux unshare and mount namespaces): %w", spec.name, err)
	}
	return &process{Process: proc, name: spec.name, probe: spec.probe}, nil
}

// waitReady polls the process's readiness probe until deadline.
func (p *process) waitReady(deadline time.Time) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		if ended, err := p.Wait(0); ended {
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("test/olm: %s exited at start (%w); its log:\n%s", p.name, err, testenv.LastLines(p.Log(), 40))
		}
		if resp, err := hc.Get("http://" + p.probe + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("test/olm: %s not ready on %s in time; its log:\n%s", p.name, p.probe, testenv.LastLines(p.Log(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
