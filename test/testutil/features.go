package testutil

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha1"
)

// Names of the user objects the stacks of FeatureStack reference; FeatureObjects
// makes them.
const (
	FeatureAPIKeySecret   = "api-key"
	FeaturePGVectorSecret = "pgvector"
	FeatureSQLSecret      = "external-pg"
	FeatureTLSSecret      = "server-tls"
	FeatureCAConfigMap    = "client-ca"
	FeatureOverrideConfig = "override-run-config"
)

// FeatureVariants is the number of different stacks FeatureStack makes:
// stacks i and i+FeatureVariants are alike. Any FeatureVariants consecutive
// stacks together use every feature of the API.
const FeatureVariants = 4

// FeatureStack is stack i of a mix in which every FeatureVariants
// consecutive stacks use every feature: external PostgreSQL (the <name>-sql
// Secret), the operator-managed cache, Kubernetes auth, TLS with and without
// a client CA, a fixed replica count, autoscaling, disruption budgets, an
// override config, a Redis kv store, API keys, secretRefs, env from Secrets,
// a LoadBalancer Service, a custom image and scale to zero. (A Redis
// password is refused with a condition on every Llama Stack line, so the
// mix has none.) The user
// objects it references are those of FeatureObjects.
func FeatureStack(ns, name string, i int) *v1alpha1.InferenceStack {
	opts := []Option{WithNamespace(ns)}
	switch i % FeatureVariants {
	case 0: // cache, auth, autoscaling, PDB by minAvailable, mutual TLS, API key
		opts = append(opts,
			WithDistribution(v1alpha1.DistributionRemoteVLLM),
			WithProviders("inference", Provider("vllm",
				WithEndpoint("http://vllm:8000/v1"), WithAPIKey(FeatureAPIKeySecret, "key"))),
			WithModel("llama", "vllm"),
			WithCache(),
			WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
			WithKubernetesAuth("system:authenticated"),
			WithAutoscaling(1, 3, 70),
			WithPodDisruptionBudget(ptr.To(intstr.FromInt32(1)), nil),
			WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: FeatureTLSSecret,
				CABundle: &v1alpha1.CABundleSource{ConfigMapName: FeatureCAConfigMap}}),
		)
	case 1: // external PostgreSQL, Redis, secretRefs, replicas, PDB by maxUnavailable, TLS, env from a Secret
		opts = append(opts,
			WithDistribution(v1alpha1.DistributionStarter),
			WithProviders("inference", Provider("vllm",
				WithEndpoint("http://vllm:8000/v1"), WithAPIKey(FeatureAPIKeySecret, "key"))),
			WithProviders("vectorIo", Provider("pgvector", WithID("vectors"),
				WithSettings(`{"host":"pgvector","port":5432,"db":"vectors","user":"llama"}`),
				WithSecretRef("password", FeaturePGVectorSecret, "password"))),
			WithModel("llama", "vllm"),
			WithSQL(v1alpha1.SQLStoreSpec{Type: v1alpha1.SQLStorePostgres, ConnectionString: SecretKey(FeatureSQLSecret, "uri")}),
			WithKV(v1alpha1.KVStoreSpec{Type: v1alpha1.KVStoreRedis, Endpoint: "redis:6379"}),
			WithReplicas(2),
			WithPodDisruptionBudget(nil, ptr.To(intstr.FromString("50%"))),
			WithTLS(v1alpha1.TLSSpec{Enabled: true, SecretName: FeatureTLSSecret}),
			WithEnvFrom("EXTRA_TOKEN", FeatureAPIKeySecret, "key"),
		)
	case 2: // override config, cache not retained, autoscaling, LoadBalancer, another port
		opts = append(opts,
			WithDistribution(v1alpha1.DistributionStarter),
			WithOverrideConfig(FeatureOverrideConfig),
			WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Cache = &v1alpha1.CacheSpec{Enabled: true, RetainOnDelete: ptr.To(false), StorageSize: ptr.To(resource.MustParse("2Gi"))}
			}),
			WithAutoscaling(2, 4, 80),
			WithPort(8443),
			WithExpose(true),
		)
	default: // custom image, disabled APIs, scaled to zero, resources, scheduling
		opts = append(opts,
			WithImage("quay.io/example/llama-stack:custom"),
			WithProviders("inference", Provider("openai", WithAPIKey(FeatureAPIKeySecret, "key"))),
			WithModel("gpt", ""),
			WithDisabled(v1alpha1.APIPostTraining),
			WithReplicas(0),
			WithResources(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}),
			WithSpec(func(s *v1alpha1.InferenceStackSpec) {
				s.Workload.NodeSelector = map[string]string{"kubernetes.io/arch": "amd64"}
				s.Workload.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			}),
		)
	}
	return Stack(name, opts...)
}

// FeatureObjects are the user Secrets and ConfigMaps in namespace ns that
// the stacks of FeatureStack reference; overrideRunConfig is the run config
// the override ConfigMap holds.
func FeatureObjects(ns string, overrideRunConfig []byte) []client.Object {
	secret := func(name string, typ corev1.SecretType, data map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ, StringData: data}
	}
	// Not a real certificate: the operator only mounts it, nothing here serves TLS.
	pem := func(what string) string {
		return fmt.Sprintf("-----BEGIN %s-----\nbm90IGEgcmVhbCBrZXk=\n-----END %s-----\n", what, what)
	}
	return []client.Object{
		secret(FeatureAPIKeySecret, corev1.SecretTypeOpaque, map[string]string{"key": "sk-test"}),
		secret(FeaturePGVectorSecret, corev1.SecretTypeOpaque, map[string]string{"password": "vectors"}),
		secret(FeatureSQLSecret, corev1.SecretTypeOpaque, map[string]string{"uri": "postgresql://llama:s3cret@pg.example.com:5432/llama"}),
		secret(FeatureTLSSecret, corev1.SecretTypeTLS, map[string]string{"tls.crt": pem("CERTIFICATE"), "tls.key": pem("PRIVATE KEY")}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: FeatureCAConfigMap}, Data: map[string]string{"ca.crt": pem("CERTIFICATE")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: FeatureOverrideConfig}, Data: map[string]string{"run.yaml": string(overrideRunConfig)}},
	}
}
