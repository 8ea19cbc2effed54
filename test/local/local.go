// Package local runs the operator binary against the local control plane
// (etcd and kube-apiserver built by hack/controlplane.sh) for `make demo` and
// `make bench`: a real cluster API, a real operator process, no containers.
package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/operator/runconfig"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// Scheme knows client-go's types and InferenceStacks.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// StartControlPlane starts etcd, kube-apiserver and, with gc,
// kube-controller-manager, and installs the operator's CRD. The Service IP
// range holds 65,534 addresses (envtest's default, a /24, runs out after
// 254 Services: 200 stacks with caches need more).
func StartControlPlane(root string, gc bool) (*testenv.Env, error) {
	return testenv.Start(testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "operator", "config", "crd", "bases")},
		GarbageCollector:  gc,
		Scheme:            Scheme(),
		APIServerArgs:     map[string][]string{"service-cluster-ip-range": {"10.0.0.0/16"}},
	})
}

// Operator is a running operator process.
type Operator struct {
	*testenv.Process
	// MetricsAddr serves Prometheus metrics over plain HTTP.
	MetricsAddr string
}

// StartOperator runs the operator binary with kubeconfig, the operand pin p
// (from RELATED_IMAGE_* variables, as in a bundle without the pin file; its
// operator version is the operator's, and so its major) and the extra flags
// args, logging to logFile.
func StartOperator(binary, kubeconfig, logFile string, p pin.Pin, args ...string) (*Operator, error) {
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return nil, err
	}
	o := &Operator{MetricsAddr: "127.0.0.1:" + strconv.Itoa(ports[0])}
	cmd := exec.Command(binary, append([]string{
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + o.MetricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address=0",
		"--pin-file=" + filepath.Join(os.TempDir(), "no-such-pin-file"),
		"--retry-interval=2s",
	}, args...)...)
	cmd.Env = append(os.Environ(), pin.OperatorVersionEnv+"="+p.OperatorVersion)
	if p.LlamaStackVersion != "" {
		cmd.Env = append(cmd.Env, pin.LlamaStackVersionEnv+"="+p.LlamaStackVersion)
	}
	for d, image := range p.Operands {
		cmd.Env = append(cmd.Env, pin.EnvName(d)+"="+image)
	}
	if o.Process, err = testenv.StartProcess(cmd, logFile); err != nil {
		return nil, err
	}
	return o, nil
}

// RSS returns the operator's resident set size and its peak, in bytes.
func (o *Operator) RSS() (current, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.Cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			current = kb * 1024
		case "VmHWM":
			peak = kb * 1024
		}
	}
	return current, peak, nil
}

// DemoPin is the pin of an operator release for local runs: upstream's
// image of each distribution by tag, at the Llama Stack version the
// releases of that major pin (1.x: 0.2.23, 2.x: 0.3.0, 3.x: 0.7.1, 4.x:
// OGX 0.8.0; see channels/releases), and 0.3.0 for the made-up majors of
// tests.
func DemoPin(version string) pin.Pin {
	llama := "0.3.0"
	for prefix, v := range map[string]string{"1.": "0.2.23", "3.": "0.7.1", "4.": "0.8.0"} {
		if strings.HasPrefix(version, prefix) {
			llama = v
		}
	}
	p := pin.Pin{OperatorVersion: version, LlamaStackVersion: llama, Operands: map[string]string{}}
	line, err := stackconfig.LineOf(llama)
	if err != nil {
		panic(err)
	}
	for _, d := range runconfig.LineDistributions(line) {
		p.Operands[d] = line.ImageRepository(d) + ":" + llama
	}
	return p
}

// Wait polls check every interval until it returns nil or ctx ends.
func Wait(ctx context.Context, interval time.Duration, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
