package conversion_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/conversion"
	"github.com/inferencestack/inferencestack/test/testenv"
	"github.com/inferencestack/inferencestack/test/testutil"
)

const crdName = "inferencestacks.inferencestack.io"

// servingBoth is the repository's CRD as a CRD package release that serves
// v1alpha1 and v1alpha2 (v1alpha1 stored) ships it: webhook conversion to
// url, no caBundle (the server puts it in). (Installed by the test, not by
// envtest, which drops conversion webhooks it does not serve itself.)
func servingBoth(t *testing.T, url string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "operator", "config", "crd", "bases", crdName[len("inferencestacks."):]+"_inferencestacks.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Served = true
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url)},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	return &crd
}

// TestConversionThroughTheAPIServer: a real kube-apiserver converts
// InferenceStacks through the server: an object written through either
// version reads back the same through both, losslessly although v1alpha1
// (the stored version) has no field for a memory target; the serving
// certificate renews while conversions go on; with the server down, reads
// of v1alpha2 fail with the API server's conversion error, nothing is lost,
// and everything reads again once it is back.
// conversionEnv starts a control plane with the repository's CRD served in
// both versions (servingBoth), converted by a webhook to be served at addr.
func conversionEnv(t *testing.T) (env *testenv.Env, core *kubernetes.Clientset, ext *apiextensionsclient.Clientset, addr string) {
	t.Helper()
	ports, err := testenv.FreePorts(1)
	require.NoError(t, err)
	addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	env, err = testenv.Start(testenv.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	core, err = kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ext, err = apiextensionsclient.NewForConfig(env.Config)
	require.NoError(t, err)
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), servingBoth(t, "https://"+addr+conversion.Path), metav1.CreateOptions{})
	require.NoError(t, err)
	return env, core, ext, addr
}

func TestConversionThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	env, core, ext, addr := conversionEnv(t)
	scheme, err := conversion.Scheme()
	require.NoError(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conv"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	start := func(validity time.Duration) (stop func() error) {
		t.Helper()
		sctx, cancel := context.WithCancel(ctx)
		s := &conversion.Server{Core: core, Extensions: ext, Namespace: "conv", SecretName: "inferencestack-conversion-tls", CRDName: crdName,
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Addr: addr, Validity: validity, CheckInterval: 100 * time.Millisecond, SwitchAfter: time.Second, Log: testr.New(t)}
		_, err := s.Listen()
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- s.Run(sctx) }()
		var once sync.Once
		var runErr error
		stop = func() error {
			once.Do(func() { cancel(); runErr = <-done })
			return runErr
		}
		t.Cleanup(func() { _ = stop() })
		return stop
	}
	stop := start(12 * time.Second)

	var made v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: through-v2}, spec: {distribution: {name: starter},
		workload: {serviceAccountName: sa}, cache: {enabled: true}, storage: {kv: {type: redis, endpoint: "redis:6379"}},
		networking: {allowedFrom: {namespaces: [clients], labels: [team.example.com/llm]}},
		scaling: {autoscaling: {minReplicas: 1, maxReplicas: 4, metrics: [{resource: memory, averageUtilization: 60}, {resource: cpu, averageUtilization: 70}]}}}}`), &made))
	eventually(t, "the API server to accept a v1alpha2 object (the CRD trusts the server)", func() error { return c.Create(ctx, &made) })

	var asV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV1))
	require.Equal(t, ptr.To(int32(70)), asV1.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage)
	require.Equal(t, "sa", asV1.Spec.Workload.ServiceAccountName)
	require.Contains(t, asV1.Annotations[v1alpha2.MetricsAnnotation], "memory")
	require.JSONEq(t, `{"networking": {"allowedFrom": {"namespaces": ["clients"], "labels": ["team.example.com/llm"]}}}`, asV1.Annotations[v1alpha2.SpecAnnotation])

	// v1alpha2's rule: allowedFrom and a LoadBalancer exclude each other.
	var both v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: both}, spec: {distribution: {name: starter},
		networking: {expose: true, allowedFrom: {namespaces: [clients]}}}}`), &both))
	require.ErrorContains(t, c.Create(ctx, &both), "allowedFrom admits pods of namespaces, and a LoadBalancer (expose: true) serves clients outside the cluster")
	// The operator's client certificate is for mutual TLS only.
	var noCA v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: no-ca}, spec: {distribution: {name: starter},
		networking: {tls: {enabled: true, secretName: tls, operatorClientSecretName: operator-client}}}}`), &noCA))
	require.ErrorContains(t, c.Create(ctx, &noCA), "operatorClientSecretName is the operator's client certificate for mutual TLS: it needs caBundle")

	// v1alpha2's exposure rules: an Ingress host is a DNS name (not an IP,
	// not a wildcard), allowedFrom must admit the Ingress controller, and
	// the Ingress and the Route cannot claim one host.
	for networking, refusal := range map[string]string{
		`{ingress: {host: "10.0.0.1"}}`:                                  "spec.networking.ingress.host",
		`{ingress: {host: "*.example.com"}}`:                             "spec.networking.ingress.host",
		`{route: {host: "Llama.example.com"}}`:                           "spec.networking.route.host",
		`{ingress: {host: a.example.com}, allowedFrom: {}}`:              "name it in allowedFrom.namespaces or allowedFrom.labels",
		`{ingress: {host: a.example.com}, route: {host: a.example.com}}`: "ingress.host and route.host are the same host",
	} {
		var refused v1alpha2.InferenceStack
		require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: refused}, spec: {distribution: {name: starter}, networking: `+networking+`}}`), &refused))
		require.ErrorContains(t, c.Create(ctx, &refused), refusal, networking)
	}
	var exposed v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: exposed}, spec: {distribution: {name: starter},
		networking: {ingress: {host: llama.example.com, className: nginx, tls: {}}, route: {}, allowedFrom: {namespaces: [ingress-nginx]}}}}`), &exposed))
	require.NoError(t, c.Create(ctx, &exposed))
	var exposedV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&exposed), &exposedV1))
	require.JSONEq(t, `{"networking": {"ingress": {"host": "llama.example.com", "className": "nginx", "tls": {}}, "route": {}, "allowedFrom": {"namespaces": ["ingress-nginx"]}}}`,
		exposedV1.Annotations[v1alpha2.SpecAnnotation])
	require.NoError(t, c.Delete(ctx, &exposed))

	// v1alpha2's rules on workload.workers and workload.podOverrides.
	for body, want := range map[string]string{
		`workers: 0`: "should be greater than or equal to 1",
		`workers: 2, podOverrides: {command: [sh]}`:                                       "workers runs the server with the operator's uvicorn command",
		`podOverrides: {volumes: [{name: h, hostPath: {path: /}}]}`:                       "restricted pod security standard",
		`podOverrides: {volumes: [{name: data, emptyDir: {}}]}`:                           "are the operator's volumes",
		`podOverrides: {volumeMounts: [{name: data, mountPath: /var/lib/llama-stack/x}]}`: "/var/lib/llama-stack (the server's state)",
		`podOverrides: {volumeMounts: [{name: tmp, mountPath: /etc/llama-stack/config}]}`: "/etc/llama-stack (run config, TLS)",
		`podOverrides: {terminationGracePeriodSeconds: -1}`:                               "should be greater than or equal to 0",
	} {
		var refused v1alpha2.InferenceStack
		require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: refused}, spec: {distribution: {name: starter}, workload: {`+body+`}}}`), &refused))
		require.ErrorContains(t, c.Create(ctx, &refused), want, body)
	}
	var overridden v1alpha2.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: overridden}, spec: {distribution: {name: starter}, workload: {workers: 2,
		podOverrides: {volumes: [{name: p, configMap: {name: p}}], volumeMounts: [{name: p, mountPath: /opt/p}], args: [--timeout-keep-alive, "5"], terminationGracePeriodSeconds: 5}}}}`), &overridden))
	require.NoError(t, c.Create(ctx, &overridden))
	var overriddenV1 v1alpha1.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&overridden), &overriddenV1))
	require.Contains(t, overriddenV1.Annotations[v1alpha2.SpecAnnotation], `"workers":2`)
	require.NoError(t, c.Delete(ctx, &overriddenV1))

	readBack := func() {
		t.Helper()
		var asV2 v1alpha2.InferenceStack
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &asV2))
		require.Equal(t, made.Spec, asV2.Spec, "stored as v1alpha1, read as v1alpha2: nothing lost")
		require.NotContains(t, asV2.Annotations, v1alpha2.SpecAnnotation)
		require.Equal(t, made.Annotations[v1alpha2.MetricsAnnotation], asV2.Annotations[v1alpha2.MetricsAnnotation],
			"none, or the v1alpha1 client's own (below), carried as it left it")
		require.Empty(t, v1alpha1.AnnotationProblems(&asV2))
	}
	readBack()

	// A v1alpha1 client edits the CPU target; the memory target stays.
	asV1.Spec.Workload.Autoscaling.TargetCPUUtilizationPercentage = ptr.To(int32(90))
	require.NoError(t, c.Update(ctx, &asV1))
	var edited v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &edited))
	require.Equal(t, []v1alpha2.ResourceMetric{{Resource: "memory", AverageUtilization: 60}, {Resource: "cpu", AverageUtilization: 90}}, edited.Spec.Scaling.Autoscaling.Metrics)
	// The annotation as that client left it (its CPU target is the field's)
	// rides on the v1alpha2 object, so that it is never rewritten.
	require.Equal(t, asV1.Annotations[v1alpha2.MetricsAnnotation], edited.Annotations[v1alpha2.MetricsAnnotation])
	made.Spec = edited.Spec
	made.Annotations = map[string]string{v1alpha2.MetricsAnnotation: asV1.Annotations[v1alpha2.MetricsAnnotation]}

	// The certificate renews (after 8 of its 12 seconds): the Secret gets a
	// new one, the CRD trusts the new CA and the old one, conversions go on.
	secret, err := core.CoreV1().Secrets("conv").Get(ctx, "inferencestack-conversion-tls", metav1.GetOptions{})
	require.NoError(t, err)
	first := secret.Data["tls.crt"]
	eventually(t, "the serving certificate to renew", func() error {
		s, err := core.CoreV1().Secrets("conv").Get(ctx, "inferencestack-conversion-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if bytes.Equal(s.Data["tls.crt"], first) {
			return errNotYet
		}
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, s.Data["ca.crt"]) {
			return errNotYet
		}
		return nil
	})
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, bytes.Count(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, []byte("BEGIN CERTIFICATE")), "the new CA and the previous one")
	require.Equal(t, "https://"+addr+conversion.Path, *crd.Spec.Conversion.Webhook.ClientConfig.URL, "nothing but the caBundle written")
	// Until the server serves the renewed certificate (SwitchAfter later),
	// and after, every conversion succeeds: no request of the API server's
	// fails on the switch.
	renewed, _ := pem.Decode(func() []byte {
		s, err := core.CoreV1().Secrets("conv").Get(ctx, "inferencestack-conversion-tls", metav1.GetOptions{})
		require.NoError(t, err)
		return s.Data["tls.crt"]
	}())
	served := func() []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate only
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	deadline := time.Now().Add(time.Minute)
	for !bytes.Equal(served(), renewed.Bytes) {
		require.True(t, time.Now().Before(deadline), "the server serves the renewed certificate")
		var v v1alpha2.InferenceStack
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &v), "a conversion before the switch")
	}
	for range 20 {
		var v v1alpha2.InferenceStack
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&made), &v), "a conversion after the switch")
	}
	readBack()

	// Created through v1alpha1, read through v1alpha2.
	var old v1alpha1.InferenceStack
	require.NoError(t, yaml.UnmarshalStrict([]byte(`{metadata: {namespace: conv, name: through-v1}, spec: {distribution: {name: starter},
		workload: {replicas: 1, podDisruptionBudget: {minAvailable: 1}}}}`), &old))
	require.NoError(t, c.Create(ctx, &old))
	var oldAsV2 v1alpha2.InferenceStack
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&old), &oldAsV2))
	require.Equal(t, ptr.To(int32(1)), oldAsV2.Spec.Scaling.Replicas)
	require.Nil(t, oldAsV2.Spec.Workload)

	// The server goes down: reads through the stored version work, reads
	// through v1alpha2 fail with the API server's conversion error; no
	// object is lost.
	require.NoError(t, stop())
	var v v1alpha2.InferenceStack
	err = c.Get(ctx, client.ObjectKeyFromObject(&made), &v)
	require.Error(t, err)
	require.Contains(t, err.Error(), "conversion webhook for inferencestack.io/v1alpha1, Kind=InferenceStack failed")
	var list v1alpha1.InferenceStackList
	require.NoError(t, c.List(ctx, &list, client.InNamespace("conv")))
	require.Len(t, list.Items, 2)

	// Back, with the same certificate (from the Secret).
	start(12 * time.Second)
	eventually(t, "conversions after the restart", func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(&made), &v)
	})
	readBack()

	// The storage version moves to v1alpha2: both stay in
	// status.storedVersions, so the API server refuses a CRD without
	// v1alpha1 until the migration rewrote every object.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1alpha2"
		}
		crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	}))
	require.Equal(t, []string{"v1alpha1", "v1alpha2"}, crd.Status.StoredVersions)
	dropV1alpha1 := func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
			require.NoError(t, err)
			crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1alpha1" })
			_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
			return err
		})
	}
	require.ErrorContains(t, dropV1alpha1(), "status.storedVersions[0]: Invalid value: \"v1alpha1\": missing from spec.versions")

	before := map[string]string{}
	for _, o := range []client.Object{&made, &old} {
		var v v1alpha2.InferenceStack
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(o), &v))
		before[v.Name] = v.ResourceVersion
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	m, err := conversion.Migrate(ctx, dyn, ext, crdName)
	require.NoError(t, err)
	require.Equal(t, conversion.Migration{Storage: "v1alpha2", Rewritten: 2, Before: []string{"v1alpha1", "v1alpha2"}}, m)
	for name, rv := range before {
		var v v1alpha2.InferenceStack
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "conv", Name: name}, &v))
		require.NotEqual(t, rv, v.ResourceVersion, "%s written again", name)
	}
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"v1alpha2"}, crd.Status.StoredVersions)
	readBack()
	require.NoError(t, dropV1alpha1(), "after the migration a CRD release may stop serving v1alpha1")
	readBack()

	// A CRD that calls a Service of another namespace (the package installed
	// into another namespace than its bundle names): the webhook refuses to
	// trust itself there, naming both.
	require.NoError(t, stop())
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
			Service: &apiextensionsv1.ServiceReference{Namespace: "elsewhere", Name: "inferencestack-conversion", Path: ptr.To(conversion.Path)}}
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	}))
	// One webhook as the package runs it (a fresh one each call).
	newServer := func() *conversion.Server {
		return &conversion.Server{Core: core, Extensions: ext, Namespace: "conv", Service: "inferencestack-conversion", SecretName: "inferencestack-conversion-tls",
			CRDName: crdName, Addr: "127.0.0.1:0", Validity: time.Hour, CheckInterval: time.Hour, Log: testr.New(t)}
	}
	s := newServer()
	require.ErrorContains(t, s.Run(ctx), "CRD inferencestacks.inferencestack.io calls the conversion webhook at Service elsewhere/inferencestack-conversion, "+
		"but this webhook runs as Service conv/inferencestack-conversion: install the inferencestack-crds package into namespace elsewhere")

	// Told to stop before its first refresh has its answers (the OLM test
	// stops it once it sees the caBundle, which the refresh's write may
	// have made before its answer came): a stop, not an error.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	s = newServer()
	require.NoError(t, s.Run(stopped), "Run stopped while it starts")
}

var errNotYet = &notYet{}

type notYet struct{}

func (*notYet) Error() string { return "not yet" }

// eventually retries f until it succeeds, failing the test after a minute.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, what, time.Minute, f)
}
