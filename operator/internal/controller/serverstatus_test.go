package controller_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/internal/serverstatus"
	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

var (
	standinOnce sync.Once
	standinBin  string
	standinErr  error
)

// standin builds the Llama Stack stand-in once per test binary.
func standin(t *testing.T) string {
	t.Helper()
	standinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "standin-")
		if err != nil {
			standinErr = err
			return
		}
		standinBin = filepath.Join(dir, "llama")
		standinErr = testenv.BuildStatic("./test/standin/llamastack", standinBin)
	})
	if standinErr != nil {
		t.Fatal(standinErr)
	}
	return standinBin
}

// liveServer is a stand-in server process serving a stack's run config
// as the pod would, with TLS and kubernetes auth that checks tokens with
// the test's API server, as upstream's provider does.
type liveServer struct {
	addr, host string
	ca         *x509.CertPool
	// client is the test's own client certificate (mutual TLS).
	client tls.Certificate
	proc   *testenv.Process
}

// liveConfigs are run configs of each line for the stand-in: two
// inference providers, mutual TLS and kubernetes auth against the test's
// API server.
var liveConfigs = map[string]string{
	"0.2.23": `version: 2
image_name: live
providers:
  inference:
  - {provider_id: ollama, provider_type: remote::ollama, config: {url: 'http://ollama:11434'}}
  - {provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://vllm:8000/v1'}}
metadata_store: {type: sqlite, db_path: '%[1]s/registry.db'}
external_providers_dir: '%[1]s/providers.d'
` + liveServerSection,
	"0.3.0": `version: 2
image_name: live
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
external_providers_dir: '%[1]s/providers.d'
` + liveServerSection,
}

const liveServerSection = `server:
  port: %[2]d
  tls_certfile: '%[1]s/tls.crt'
  tls_keyfile: '%[1]s/tls.key'
  tls_cafile: '%[1]s/clients-ca.crt'
  auth:
    provider_config: {type: kubernetes, api_server_url: '%[3]s', verify_tls: true, tls_cafile: '%[1]s/kube-ca.crt'}
`

// startLiveServer runs the stand-in of Llama Stack version with cert.
func startLiveServer(t *testing.T, version string, cert, client testenv.ServingCert, host string) *liveServer {
	t.Helper()
	dir := t.TempDir()
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert.Cert, "tls.key": cert.Key, "kube-ca.crt": env.Config.CAData, "clients-ca.crt": client.CA,
		"run.yaml": fmt.Appendf(nil, liveConfigs[version], dir, ports[0], env.Config.Host)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The port comes from --port, as upstream's `llama stack run` takes it
	// (the config's server.port never reaches uvicorn).
	cmd := exec.Command(standin(t), "stack", "run", filepath.Join(dir, "run.yaml"), "--port", strconv.Itoa(ports[0]))
	cmd.Env = append(os.Environ(), "LLAMA_STACK_STANDIN_VERSION="+version, "HOME="+dir,
		"LLAMA_STACK_CONFIG_DIR="+filepath.Join(dir, ".llama"), "LLAMA_STACK_STANDIN_CHECK_TOKENS=1")
	proc, err := testenv.StartProcess(cmd, filepath.Join(dir, "llama.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(5 * time.Second) })
	s := &liveServer{addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), host: host, ca: x509.NewCertPool(), proc: proc}
	s.ca.AppendCertsFromPEM(cert.CA)
	if s.client, err = tls.X509KeyPair(client.Cert, client.Key); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		if proc.Exited() {
			t.Fatalf("the stand-in exited: %s", proc.Log())
		}
		return s.setHealth("vllm", "Not Implemented", "Provider does not implement health check")
	})
	return s
}

// proberHoldsNothing: the only identity that called the server is the
// prober's ServiceAccount the operator made for the stack (never the one
// the server runs as), and the API server grants it nothing: no verb on any
// resource of the namespace or the cluster.
func proberHoldsNothing(t *testing.T, srv *liveServer, ns, stack string) {
	t.Helper()
	resp, err := srv.httpClient(true).Get("https://" + srv.addr + "/standin/v1/principals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who []string
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + stack + "-prober"
	if !slices.Equal(who, []string{user}) {
		t.Errorf("the server was called as %q, want only the prober's own identity %s", who, user)
	}
	for _, attr := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "get", Resource: "secrets"},
		{Namespace: ns, Verb: "list", Resource: "secrets"},
		{Namespace: ns, Verb: "create", Resource: "pods"},
		{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
		{Namespace: ns, Verb: "get", Group: "inferencestack.io", Resource: "inferencestacks"},
		{Verb: "list", Resource: "namespaces"},
		{Verb: "*", Group: "*", Resource: "*"},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &attr}}
		if err := env.Client.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Errorf("the prober's identity %s may %s %s/%s in %q: it must hold no rights", user, attr.Verb, attr.Resource, attr.Subresource, attr.Namespace)
		}
	}
}

// setHealth sets what the stand-in says of a provider's health.
func (s *liveServer) setHealth(provider, status, message string) error {
	c := s.httpClient(true)
	req, err := http.NewRequest(http.MethodPut, "https://"+s.addr+"/standin/v1/health/"+provider,
		bytes.NewReader(fmt.Appendf(nil, `{"status":%q,"message":%q}`, status, message)))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT health: HTTP %d", resp.StatusCode)
	}
	return nil
}

// httpClient trusts the server's CA and, when withCert, presents the
// test's client certificate.
func (s *liveServer) httpClient(withCert bool) *http.Client {
	c := &tls.Config{RootCAs: s.ca, ServerName: s.host, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{s.client}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
}

// get calls path with a bearer token (none when "") and returns the HTTP
// status, or the error of a request that got no answer.
func (s *liveServer) get(path, token string, withCert bool) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+s.addr+path, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.httpClient(withCert).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// available writes what the Deployment controller would once the
// server's pod is ready.
func available(t *testing.T, ns, name string) {
	t.Helper()
	var dep *appsv1.Deployment
	eventually(t, timeout, func() error {
		var err error
		dep, err = get(t, &appsv1.Deployment{}, ns, name)
		return err
	})
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := env.Client.Status().Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
}

// providersHealthy waits until the stack's ProvidersHealthy condition has
// status and reason, and returns the stack.
func providersHealthy(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *v1alpha1.InferenceStack {
	t.Helper()
	return providersHealthyEnding(t, ns, name, status, reason, "")
}

// providersHealthyEnding is providersHealthy with a message that ends in
// suffix.
func providersHealthyEnding(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, suffix string) *v1alpha1.InferenceStack {
	t.Helper()
	var stack *v1alpha1.InferenceStack
	eventually(t, timeout, func() error {
		stack, _ = get(t, &v1alpha1.InferenceStack{}, ns, name)
		c := meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeProvidersHealthy)
		if c == nil || c.Status != status || c.Reason != reason || !strings.HasSuffix(c.Message, suffix) {
			return fmt.Errorf("ProvidersHealthy is %+v, want %s %s ending in %q (status.server %+v)", c, status, reason, suffix, stack.Status.Server)
		}
		return nil
	})
	return stack
}

// quiet waits until the prober has sent n more requests to servers (the
// signal that it polled again) and fails if the operator wrote anything
// or recorded an Event for the stack meanwhile.
func quiet(t *testing.T, op *operator, p *serverstatus.Prober, ns, name string, n int64, why string) {
	t.Helper()
	op.writes.Reset()
	events := op.events.of(ns, name)
	from := p.Requests()
	eventually(t, timeout, func() error {
		if got := p.Requests() - from; got < n {
			return fmt.Errorf("%s: the prober sent %d requests, waiting for %d", why, got, n)
		}
		return nil
	})
	if w := op.writes.In(ns); len(w) != 0 {
		t.Errorf("%s: %d polls that found nothing new made %d writes:\n%s", why, n/2, len(w), strings.Join(w, "\n"))
	}
	if got := op.events.of(ns, name); !slices.Equal(got, events) {
		t.Errorf("%s: events %q, want %q (none new)", why, got, events)
	}
}

// TestLiveServerStatus: once a stack with mutual TLS and kubernetes auth
// is Available, the operator reads its server (a stand-in process that
// verifies the operator's token with a SelfSubjectReview against this API
// server, as upstream does, and serves the line's endpoints) through its
// Service name, verifying the server's certificate against the stack's TLS
// Secret and presenting the client certificate the stack names for it
// (networking.tls.operatorClientSecretName): status.server holds the version and the providers with their
// health, ProvidersHealthy follows the providers, with one Warning when
// one turns unhealthy and one Normal event when it recovers; polls that
// find nothing new write nothing, and a server that stops answering makes
// ProvidersHealthy Unknown, then nothing more.
//
// On each line (0.2.23: the auth middleware guards /v1/version too; 0.3.0:
// it does not).
func TestLiveServerStatus(t *testing.T) {
	pin03 := pin.Pin{OperatorVersion: "2.0.0", LlamaStackVersion: "0.3.0", Operands: map[string]string{
		"starter": "docker.io/llamastack/distribution-starter:0.3.0",
	}}
	for _, p := range []pin.Pin{testPin, pin03} {
		t.Run(p.LlamaStackVersion, func(t *testing.T) { liveServerStatus(t, p) })
	}
}

func liveServerStatus(t *testing.T, operand pin.Pin) {
	version := operand.LlamaStackVersion
	ns := namespace(t)
	host := "live." + ns + ".svc"
	cert, err := testenv.NewServingCert("live-ca", []string{host})
	if err != nil {
		t.Fatal(err)
	}
	// The operator's client certificate, signed by the stack's client CA.
	client, err := testenv.NewClientCert("live-clients-ca", "inferencestack-operator")
	if err != nil {
		t.Fatal(err)
	}
	srv := startLiveServer(t, version, cert, client, host)
	var dialled sync.Map
	p := &serverstatus.Prober{Interval: 200 * time.Millisecond, Timeout: 5 * time.Second,
		Resolve: func(hostport string) string {
			dialled.Store(hostport, true)
			return srv.addr
		}}
	// Only this test's stack: other tests leave Available stacks behind,
	// which the prober would read too.
	only := labels.SelectorFromSet(labels.Set{"test.inferencestack.io/live": ns})
	op := startOperator(t, withProber(p), onlyStacks(only), withPin(operand))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert.Cert, corev1.TLSPrivateKeyKey: cert.Key}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-client"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: client.Cert, corev1.TLSPrivateKeyKey: client.Key}})
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live-clients"},
		Data: map[string]string{"ca.crt": string(client.CA)}})
	stack := testutil.Stack("live", testutil.WithNamespace(ns),
		testutil.WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: "live-tls",
			CABundle: &v1alpha1.CABundleSource{ConfigMapName: "live-clients", Key: "ca.crt"}}),
		testutil.WithKubernetesAuth("system:authenticated"))
	// operatorClientSecretName is a v1alpha2 field: v1alpha1 carries it in
	// the spec annotation.
	stack.Annotations = map[string]string{v1alpha2.SpecAnnotation: `{"networking":{"tls":{"operatorClientSecretName":"operator-client"}}}`}
	stack.Labels = map[string]string{"test.inferencestack.io/live": ns}
	create(t, stack)
	converged(t, ns, "live")
	if p.Requests() != 0 {
		t.Fatalf("the prober read a server that is not Available (%d requests)", p.Requests())
	}
	available(t, ns, "live")

	stack = providersHealthy(t, ns, "live", metav1.ConditionTrue, v1alpha2.ReasonProvidersHealthy)
	notImplemented := v1alpha1.ProviderHealth{Status: "Not Implemented", Message: "Provider does not implement health check"}
	want := &v1alpha1.ServerStatus{Version: version, Providers: []v1alpha1.ProviderStatus{
		{API: "inference", ProviderID: "ollama", ProviderType: "remote::ollama", Health: notImplemented},
		{API: "inference", ProviderID: "vllm", ProviderType: "remote::vllm", Health: notImplemented},
	}}
	if got := stack.Status.Server; got == nil || got.Version != want.Version || !slices.Equal(got.Providers, want.Providers) {
		t.Fatalf("status.server = %+v, want %+v", got, want)
	}
	if stack.Status.Phase != v1alpha2.PhaseReady {
		t.Errorf("phase %s, want Ready", stack.Status.Phase)
	}
	if _, ok := dialled.Load(host + ":8321"); !ok {
		t.Errorf("the prober did not dial the Service %s:8321", host)
	}
	quiet(t, op, p, ns, "live", 6, "healthy")
	proberHoldsNothing(t, srv, ns, "live")

	// The stand-in checks tokens as upstream does: none, or one the API
	// server does not know, is refused; the server's own ServiceAccount's
	// (the operator's choice) is admitted.
	token, err := env.Token(context.Background(), ns, "live-server", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{"": http.StatusUnauthorized, "not-a-token": http.StatusUnauthorized, token: http.StatusOK} {
		if got, err := srv.get("/v1/providers", tok, true); err != nil || got != want {
			t.Errorf("GET /v1/providers with token %.12q: HTTP %d (%v), want %d", tok, got, err, want)
		}
	}
	// The line's rule for /v1/version.
	versionOpen := map[string]int{"0.2.23": http.StatusUnauthorized, "0.3.0": http.StatusOK}[version]
	if got, err := srv.get("/v1/version", "", true); err != nil || got != versionOpen {
		t.Errorf("GET /v1/version without a token on %s: HTTP %d (%v), want %d", version, got, err, versionOpen)
	}
	// And mutual TLS is on: without a client certificate, no answer.
	if got, err := srv.get("/v1/providers", token, false); err == nil {
		t.Errorf("GET /v1/providers without a client certificate: HTTP %d, want the handshake refused", got)
	}

	// A provider turns unhealthy: one Warning naming it.
	if err := srv.setHealth("vllm", "Error", "Health check failed: connection refused"); err != nil {
		t.Fatal(err)
	}
	stack = providersHealthy(t, ns, "live", metav1.ConditionFalse, v1alpha2.ReasonProviderUnhealthy)
	c := meta.FindStatusCondition(stack.Status.Conditions, v1alpha2.TypeProvidersHealthy)
	if !strings.Contains(c.Message, "vllm (inference, remote::vllm): Health check failed: connection refused") {
		t.Errorf("ProvidersHealthy message %q does not name the provider and its error", c.Message)
	}
	eventually(t, timeout, func() error {
		if got := op.events.of(ns, "live"); !slices.Contains(got, v1alpha2.ReasonProviderUnhealthy) {
			return fmt.Errorf("events %q, want a %s", got, v1alpha2.ReasonProviderUnhealthy)
		}
		return nil
	})
	quiet(t, op, p, ns, "live", 6, "unhealthy")
	op.reconcileAll(t, ns, []string{"live"}, "idle-unhealthy")
	if got := op.events.of(ns, "live"); slices.Index(got, v1alpha2.ReasonProviderUnhealthy) != len(got)-1 ||
		len(slices.DeleteFunc(slices.Clone(got), func(r string) bool { return r != v1alpha2.ReasonProviderUnhealthy })) != 1 {
		t.Errorf("events %q, want exactly one %s", got, v1alpha2.ReasonProviderUnhealthy)
	}

	// It recovers: one Normal event.
	if err := srv.setHealth("vllm", "OK", ""); err != nil {
		t.Fatal(err)
	}
	providersHealthy(t, ns, "live", metav1.ConditionTrue, v1alpha2.ReasonProvidersHealthy)
	eventually(t, timeout, func() error {
		if got := op.events.of(ns, "live"); got[len(got)-1] != v1alpha2.ReasonProvidersHealthy {
			return fmt.Errorf("events %q, want a last %s", got, v1alpha2.ReasonProvidersHealthy)
		}
		return nil
	})

	// The server stops answering: Unknown once its port is closed, then
	// quiet. A poll while it shuts down may find another cause first (its
	// open connection closed before the answer): a change the status
	// tells, so the quiet is counted from the settled cause.
	srv.proc.Stop(5 * time.Second)
	stack = providersHealthyEnding(t, ns, "live", metav1.ConditionUnknown, v1alpha2.ReasonServerUnreachable, "connection refused")
	if stack.Status.Server == nil {
		t.Errorf("status.server was cleared while the server was unreachable; want the last read kept")
	}
	quiet(t, op, p, ns, "live", 4, "unreachable")
}
