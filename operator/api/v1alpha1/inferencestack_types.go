package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// InferenceStackSpec is the desired state of one Llama Stack server.
//
// +kubebuilder:validation:XValidation:rule="!has(self.overrideConfig) || !(has(self.providers) || has(self.resources) || has(self.storage) || has(self.disabled))",message="overrideConfig holds a complete run config: it cannot be combined with providers, resources, storage or disabled"
// +kubebuilder:validation:XValidation:rule="!has(self.overrideConfig) || !has(self.auth)",message="auth is written into the generated run config: with overrideConfig, put the server auth section into the override ConfigMap instead"
// +kubebuilder:validation:XValidation:rule="has(self.distribution.name) || has(self.providers) || has(self.overrideConfig)",message="a custom distribution.image has no embedded base config: set providers or overrideConfig"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution.name) || self.distribution.name != 'postgres-demo' || has(self.overrideConfig) || (has(self.cache) && self.cache.enabled) || (has(self.storage) && has(self.storage.sql) && self.storage.sql.type == 'postgres')",message="distribution postgres-demo keeps its stores in PostgreSQL: set cache.enabled, or storage.sql of type postgres"
// +kubebuilder:validation:XValidation:rule="!(has(self.cache) && self.cache.enabled && has(self.storage) && has(self.storage.sql) && self.storage.sql.type == 'postgres')",message="cache.enabled runs an operator-managed PostgreSQL: it cannot be combined with an external storage.sql of type postgres"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'inference' in self.disabled && has(self.providers) && has(self.providers.inference))",message="providers.inference is set but the inference API is disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'safety' in self.disabled && has(self.providers) && has(self.providers.safety))",message="providers.safety is set but the safety API is disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'vector_io' in self.disabled && has(self.providers) && has(self.providers.vectorIo))",message="providers.vectorIo is set but the vector_io API is disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'tool_runtime' in self.disabled && has(self.providers) && has(self.providers.toolRuntime))",message="providers.toolRuntime is set but the tool_runtime API is disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'telemetry' in self.disabled && has(self.providers) && has(self.providers.telemetry))",message="providers.telemetry is set but the telemetry API is disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'inference' in self.disabled && has(self.resources) && has(self.resources.models) && size(self.resources.models) > 0)",message="resources.models need the inference API: remove inference from disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'safety' in self.disabled && has(self.resources) && has(self.resources.shields) && size(self.resources.shields) > 0)",message="resources.shields need the safety API: remove safety from disabled"
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && 'tool_runtime' in self.disabled && has(self.resources) && has(self.resources.tools) && size(self.resources.tools) > 0)",message="resources.tools need the tool_runtime API: remove tool_runtime from disabled"
// +kubebuilder:validation:XValidation:rule="has(self.overrideConfig) || !has(self.workload) || ((!has(self.workload.replicas) || self.workload.replicas <= 1) && !has(self.workload.autoscaling)) || (has(self.storage) && has(self.storage.kv) && self.storage.kv.type == 'redis' && ((has(self.storage.sql) && self.storage.sql.type == 'postgres') || (has(self.cache) && self.cache.enabled)))",message="more than one server replica (workload.replicas > 1 or workload.autoscaling) needs state shared by every pod: set storage.kv to redis and storage.sql to postgres (or cache.enabled); with SQLite each pod would keep its own registry and stores"
type InferenceStackSpec struct {
	// Distribution selects the Llama Stack server: one of the distributions
	// the operator embeds (by name) or a custom server image.
	// +required
	Distribution DistributionSpec `json:"distribution"`

	// Providers overlay the distribution's providers, per API type. A
	// provider whose id matches one of the base config replaces it, a new id
	// is appended, and base providers not mentioned are kept.
	// +optional
	Providers *ProvidersSpec `json:"providers,omitempty"`

	// Resources are the models, shields and tool groups the server registers
	// at start-up, in addition to those of the distribution.
	// +optional
	Resources *ResourcesSpec `json:"resources,omitempty"`

	// Storage selects the key-value and SQL stores of the server. The
	// distribution's defaults (SQLite on the pod's disk) apply when unset.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// Cache asks the operator to run a PostgreSQL for the server's SQL
	// stores (metadata, inference and conversation stores).
	// +optional
	Cache *CacheSpec `json:"cache,omitempty"`

	// Disabled lists Llama Stack APIs to switch off. Their providers and
	// every registered resource that points at them are removed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=12
	Disabled []APIName `json:"disabled,omitempty"`

	// OverrideConfig names a ConfigMap holding a complete run config that
	// the server uses as is, instead of a generated one.
	// +optional
	OverrideConfig *OverrideConfigSpec `json:"overrideConfig,omitempty"`

	// Networking sets the server port, TLS and exposure.
	// +optional
	Networking *NetworkingSpec `json:"networking,omitempty"`

	// Auth turns on authentication of the server's callers.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Workload shapes the server's pods.
	// +optional
	Workload *WorkloadSpec `json:"workload,omitempty"`
}

// DistributionName names a distribution the operator embeds.
// +kubebuilder:validation:Enum=starter;remote-vllm;postgres-demo;meta-reference-gpu
type DistributionName string

// The distributions the operator embeds. Their images come from the operand
// pin shipped with each operator release.
const (
	DistributionStarter          DistributionName = "starter"
	DistributionRemoteVLLM       DistributionName = "remote-vllm"
	DistributionPostgresDemo     DistributionName = "postgres-demo"
	DistributionMetaReferenceGPU DistributionName = "meta-reference-gpu"
)

// DistributionNames lists every distribution the operator embeds, in the
// order of the CRD enum.
var DistributionNames = []DistributionName{
	DistributionStarter, DistributionRemoteVLLM, DistributionPostgresDemo, DistributionMetaReferenceGPU,
}

// CustomDistributionName is the name status.resolvedDistribution reports
// when spec.distribution names an image rather than a distribution.
const CustomDistributionName = "custom"

// DistributionSpec selects the server: exactly one of name or image.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.image)",message="set exactly one of distribution.name or distribution.image"
type DistributionSpec struct {
	// Name of a distribution the operator embeds; its image comes from the
	// operator's operand pin.
	// +optional
	Name DistributionName `json:"name,omitempty"`

	// Image is a custom Llama Stack server image. It has no embedded base
	// config, so providers (or overrideConfig) must describe the server.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="distribution.image must be an image reference without spaces"
	Image string `json:"image,omitempty"`
}

// APIName is a Llama Stack API.
// +kubebuilder:validation:Enum=agents;batches;datasetio;eval;files;inference;post_training;safety;scoring;telemetry;tool_runtime;vector_io
type APIName string

// The Llama Stack APIs that can be disabled.
const (
	APIAgents       APIName = "agents"
	APIBatches      APIName = "batches"
	APIDatasetIO    APIName = "datasetio"
	APIEval         APIName = "eval"
	APIFiles        APIName = "files"
	APIInference    APIName = "inference"
	APIPostTraining APIName = "post_training"
	APISafety       APIName = "safety"
	APIScoring      APIName = "scoring"
	APITelemetry    APIName = "telemetry"
	APIToolRuntime  APIName = "tool_runtime"
	APIVectorIO     APIName = "vector_io"
)

// APINames lists every API name of the disabled enum.
var APINames = []APIName{
	APIAgents, APIBatches, APIDatasetIO, APIEval, APIFiles, APIInference, APIPostTraining,
	APISafety, APIScoring, APITelemetry, APIToolRuntime, APIVectorIO,
}

// ProvidersSpec lists the user's providers per API type.
type ProvidersSpec struct {
	// Inference providers serve models.
	// +optional
	Inference ProviderList `json:"inference,omitempty"`
	// Safety providers serve shields.
	// +optional
	Safety ProviderList `json:"safety,omitempty"`
	// VectorIO providers serve vector databases.
	// +optional
	VectorIO ProviderList `json:"vectorIo,omitempty"`
	// ToolRuntime providers serve tool groups.
	// +optional
	ToolRuntime ProviderList `json:"toolRuntime,omitempty"`
	// Telemetry providers receive traces and metrics.
	// +optional
	Telemetry ProviderList `json:"telemetry,omitempty"`
}

// ProviderList is the providers of one API type.
//
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=16
// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(p, has(p.id))",message="id is required on every provider when an API type lists more than one"
// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.id) || self.exists_one(q, has(q.id) && q.id == p.id))",message="provider ids must be unique within an API type"
type ProviderList []ProviderSpec

// ProviderSpec is one remote provider: the server reaches it over the
// network. In the run config it becomes provider_type remote::<provider>.
type ProviderSpec struct {
	// ID is the provider_id in the run config; models, shields and tools
	// refer to it. It defaults to provider, and is required when the API
	// type lists more than one provider. An id of the distribution's base
	// config replaces that provider.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$`
	ID string `json:"id,omitempty"`

	// Provider is the Llama Stack remote provider, e.g. vllm, ollama,
	// openai, pgvector, tavily-search; the run config gets
	// provider_type remote::<provider>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$`
	Provider string `json:"provider"`

	// Endpoint is the provider's URL: it goes to the field the provider
	// type's config class names for its URL (url, base_url,
	// weaviate_cluster_url, ...); a type without one refuses it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="endpoint must be an http:// or https:// URL"
	Endpoint string `json:"endpoint,omitempty"`

	// APIKey is the Secret key holding the provider's API key, for the
	// field the provider type's config class names for its secret
	// (api_key, api_token, ...); a type without one refuses it. The run
	// config refers to it through an environment variable, never by value.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) > 0 && size(self.key) > 0",message="apiKey needs name and key: the Secret and its key holding the provider's API key"
	APIKey *corev1.SecretKeySelector `json:"apiKey,omitempty"`

	// SecretRefs maps provider config keys to Secret keys, for secrets other
	// than the API key (e.g. password). Like apiKey, they reach the server
	// as environment variables.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, has(self[k].name) && size(self[k].name) > 0 && size(self[k].key) > 0)",message="every secretRefs entry needs name and key: the Secret and its key holding the value"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z][a-z0-9_]*$') && size(k) <= 63)",message="secretRefs keys are provider config keys: lowercase letters, digits and underscores, at most 63 characters"
	SecretRefs map[string]corev1.SecretKeySelector `json:"secretRefs,omitempty"`

	// Settings is free-form provider config merged into the provider's
	// config section. Never put secrets here: use apiKey or secretRefs.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Settings *runtime.RawExtension `json:"settings,omitempty"`
}

// ResourcesSpec lists resources registered at server start-up.
type ResourcesSpec struct {
	// Models to register.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Models []ModelSpec `json:"models,omitempty"`

	// Shields to register.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Shields []ShieldSpec `json:"shields,omitempty"`

	// Tools are tool groups to register.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Tools []ToolGroupSpec `json:"tools,omitempty"`
}

// ModelType is the kind of a model.
// +kubebuilder:validation:Enum=llm;embedding
type ModelType string

// The model types.
const (
	ModelTypeLLM       ModelType = "llm"
	ModelTypeEmbedding ModelType = "embedding"
)

// ModelSpec is one model registered with an inference provider.
//
// +kubebuilder:validation:XValidation:rule="self.modelType == 'embedding' || !has(self.embeddingDimension)",message="embeddingDimension is only valid for modelType embedding"
// +kubebuilder:validation:XValidation:rule="self.modelType != 'embedding' || has(self.embeddingDimension)",message="an embedding model needs embeddingDimension"
type ModelSpec struct {
	// Name is the model_id clients use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// Provider is the id of the inference provider serving the model. It
	// may be omitted when exactly one inference provider exists.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`

	// ProviderModelID is the model's name at the provider, when it differs
	// from name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ProviderModelID string `json:"providerModelId,omitempty"`

	// ModelType is llm (default) or embedding.
	// +optional
	// +kubebuilder:default=llm
	ModelType ModelType `json:"modelType,omitempty"`

	// EmbeddingDimension is the vector size of an embedding model.
	// +optional
	// +kubebuilder:validation:Minimum=1
	EmbeddingDimension *int32 `json:"embeddingDimension,omitempty"`
}

// ShieldSpec is one shield registered with a safety provider.
type ShieldSpec struct {
	// Name is the shield_id clients use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// Provider is the id of the safety provider. It may be omitted when
	// exactly one safety provider exists.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`

	// ProviderShieldID is the shield's name at the provider (often the
	// guard model), when it differs from name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ProviderShieldID string `json:"providerShieldId,omitempty"`
}

// ToolGroupSpec is one tool group registered with a tool-runtime provider.
type ToolGroupSpec struct {
	// Name is the toolgroup_id, e.g. builtin::websearch.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// Provider is the id of the tool-runtime provider. It may be omitted when
	// exactly one tool-runtime provider exists.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`

	// MCPEndpoint is the URL of a Model Context Protocol server, for tool
	// groups served by the model-context-protocol provider.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="mcpEndpoint must be an http:// or https:// URL"
	MCPEndpoint string `json:"mcpEndpoint,omitempty"`
}

// StorageSpec selects the server's stores.
type StorageSpec struct {
	// KV is the key-value store (registry of resources).
	// +optional
	KV *KVStoreSpec `json:"kv,omitempty"`

	// SQL is the SQL store (metadata, inference and conversation stores).
	// +optional
	SQL *SQLStoreSpec `json:"sql,omitempty"`
}

// KVStoreType is a key-value store backend.
// +kubebuilder:validation:Enum=sqlite;redis
type KVStoreType string

// The key-value store backends.
const (
	KVStoreSQLite KVStoreType = "sqlite"
	KVStoreRedis  KVStoreType = "redis"
)

// KVStoreSpec is the key-value store.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'redis' || (!has(self.endpoint) && !has(self.password))",message="endpoint and password are only valid for a kv store of type redis"
// +kubebuilder:validation:XValidation:rule="self.type != 'redis' || has(self.endpoint)",message="a kv store of type redis needs an endpoint"
type KVStoreSpec struct {
	// Type is sqlite (on the pod's disk) or redis.
	// +required
	Type KVStoreType `json:"type"`

	// Endpoint is the Redis server as host:port (redis only).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.-]+:[0-9]{1,5}$`
	Endpoint string `json:"endpoint,omitempty"`

	// Password is the Secret key holding the Redis password (redis only).
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) > 0 && size(self.key) > 0",message="password needs name and key: the Secret and its key holding the Redis password"
	Password *corev1.SecretKeySelector `json:"password,omitempty"`
}

// SQLStoreType is a SQL store backend.
// +kubebuilder:validation:Enum=sqlite;postgres
type SQLStoreType string

// The SQL store backends.
const (
	SQLStoreSQLite   SQLStoreType = "sqlite"
	SQLStorePostgres SQLStoreType = "postgres"
)

// SQLStoreSpec is the SQL store.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'postgres' || !has(self.connectionString)",message="connectionString is only valid for a sql store of type postgres"
// +kubebuilder:validation:XValidation:rule="self.type != 'postgres' || has(self.connectionString)",message="a sql store of type postgres needs connectionString"
type SQLStoreSpec struct {
	// Type is sqlite (on the pod's disk) or postgres (external).
	// +required
	Type SQLStoreType `json:"type"`

	// ConnectionString is the Secret key holding the PostgreSQL URI
	// (postgresql://user:password@host:port/db; postgres only).
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) > 0 && size(self.key) > 0",message="connectionString needs name and key: the Secret and its key holding the PostgreSQL URI"
	ConnectionString *corev1.SecretKeySelector `json:"connectionString,omitempty"`
}

// CacheSpec is the operator-managed PostgreSQL.
type CacheSpec struct {
	// Enabled runs a PostgreSQL beside the server and points its SQL stores
	// at it.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// StorageSize of the PostgreSQL volume. It can grow (when the storage
	// class allows expansion), never shrink.
	// +optional
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="cache.storageSize must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="cache.storageSize cannot shrink: a PersistentVolumeClaim only grows"
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`

	// StorageClassName of the PostgreSQL volume; the cluster default when
	// unset. It cannot change once set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cache.storageClassName cannot change: the PostgreSQL volume keeps its storage class"
	StorageClassName *string `json:"storageClassName,omitempty"`

	// RetainOnDelete keeps the PostgreSQL volume when the InferenceStack is
	// deleted (default true).
	// +optional
	// +kubebuilder:default=true
	RetainOnDelete *bool `json:"retainOnDelete,omitempty"`
}

// OverrideConfigSpec names a ConfigMap holding a complete run config.
type OverrideConfigSpec struct {
	// ConfigMapName is the ConfigMap, in the InferenceStack's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ConfigMapName string `json:"configMapName"`

	// Key of the run config in the ConfigMap.
	// +optional
	// +kubebuilder:default="run.yaml"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// NetworkingSpec sets how the server is reached.
type NetworkingSpec struct {
	// Port the server's Service exposes (default 8321). The container
	// itself always listens on 8321.
	// +optional
	// +kubebuilder:default=8321
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// TLS makes the server serve HTTPS.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Expose, when true, makes the server's Service a LoadBalancer so it is
	// reachable from outside the cluster; false or unset keep it ClusterIP.
	// +optional
	Expose *bool `json:"expose,omitempty"`
}

// TLSSpec is the server's TLS.
//
// +kubebuilder:validation:XValidation:rule="self.enabled || (!has(self.secretName) && !has(self.caBundle))",message="secretName and caBundle are only valid when tls.enabled is true"
// +kubebuilder:validation:XValidation:rule="!self.enabled || has(self.secretName)",message="tls.enabled needs secretName: a kubernetes.io/tls Secret holding tls.crt and tls.key"
type TLSSpec struct {
	// Enabled turns TLS on.
	// +optional
	// +kubebuilder:default=false
	Enabled bool `json:"enabled"`

	// SecretName is a kubernetes.io/tls Secret with the server's certificate
	// (tls.crt) and key (tls.key).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// CABundle is a ConfigMap key holding CA certificates; when set the
	// server requires client certificates signed by them (mutual TLS).
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty"`
}

// CABundleSource is a ConfigMap key holding PEM CA certificates.
type CABundleSource struct {
	// ConfigMapName is the ConfigMap, in the InferenceStack's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ConfigMapName string `json:"configMapName"`

	// Key in the ConfigMap (default ca.crt).
	// +optional
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// AuthSpec turns on authentication of the server's callers.
//
// +kubebuilder:validation:XValidation:rule="has(self.kubernetes)",message="auth needs a provider: set auth.kubernetes"
type AuthSpec struct {
	// Kubernetes validates callers' bearer tokens against the cluster's API
	// server.
	// +optional
	Kubernetes *KubernetesAuthSpec `json:"kubernetes,omitempty"`
}

// KubernetesAuthSpec validates bearer tokens against the cluster.
type KubernetesAuthSpec struct {
	// AllowedGroups, when set, admits only callers in one of these groups
	// (e.g. system:serviceaccounts:my-namespace); any authenticated caller
	// otherwise.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	AllowedGroups []string `json:"allowedGroups,omitempty"`
}

// WorkloadSpec shapes the server's pods.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.replicas) && has(self.autoscaling))",message="replicas and autoscaling are mutually exclusive: the autoscaler owns the replica count"
type WorkloadSpec struct {
	// StateVolume keeps the server's local state (its SQLite stores, file
	// storage, vector indexes) on a PersistentVolumeClaim <name>-state
	// mounted at /var/lib/llama-stack; without it the state lives in an
	// emptyDir and is lost when the pod goes.
	// +optional
	StateVolume *StateVolumeSpec `json:"stateVolume,omitempty"`

	// Replicas of the server (default 1; 0 stops it).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Resources of the server container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Autoscaling scales the server on CPU use.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// PodDisruptionBudget limits voluntary disruptions of the server.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// Env adds environment variables to the server container.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef) || (has(e.valueFrom.secretKeyRef.name) && size(e.valueFrom.secretKeyRef.name) > 0 && size(e.valueFrom.secretKeyRef.key) > 0))",message="env valueFrom.secretKeyRef needs name and key"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.configMapKeyRef) || (has(e.valueFrom.configMapKeyRef.name) && size(e.valueFrom.configMapKeyRef.name) > 0 && size(e.valueFrom.configMapKeyRef.key) > 0))",message="env valueFrom.configMapKeyRef needs name and key"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// NodeSelector of the server pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the server pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the server pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// ServiceAccountName runs the server pods as this ServiceAccount; the
	// operator creates one per InferenceStack when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// StateVolumeSpec is the server's state volume.
type StateVolumeSpec struct {
	// Size of the volume. It can grow (when the storage class allows
	// expansion), never shrink.
	// +optional
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="workload.stateVolume.size must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="workload.stateVolume.size cannot shrink: a PersistentVolumeClaim only grows"
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the volume; the cluster default when unset. It
	// cannot change once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workload.stateVolume.storageClassName cannot change: the volume keeps its storage class"
	StorageClassName *string `json:"storageClassName,omitempty"`

	// RetainOnDelete keeps the volume when the InferenceStack is deleted
	// (default true).
	// +optional
	// +kubebuilder:default=true
	RetainOnDelete *bool `json:"retainOnDelete,omitempty"`
}

// AutoscalingSpec scales the server with a HorizontalPodAutoscaler.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.maxReplicas >= self.minReplicas",message="autoscaling.maxReplicas must be greater than or equal to minReplicas"
type AutoscalingSpec struct {
	// MinReplicas is the lower bound (default 1).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper bound.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage is the mean CPU use, in percent of the
	// request, the autoscaler aims at (default 80).
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// PodDisruptionBudgetSpec is exactly one of minAvailable or maxUnavailable.
//
// +kubebuilder:validation:XValidation:rule="has(self.minAvailable) != has(self.maxUnavailable)",message="podDisruptionBudget needs exactly one of minAvailable or maxUnavailable"
type PodDisruptionBudgetSpec struct {
	// MinAvailable pods (a number or a percentage).
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// MaxUnavailable pods (a number or a percentage).
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// InferenceStackStatus is the observed state of an InferenceStack.
type InferenceStackStatus struct {
	// Phase summarises the conditions for humans.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions: ConfigGenerated, Available, Progressing, Degraded,
	// ProvidersHealthy.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// URL is the in-cluster URL of the server,
	// http(s)://<service>.<namespace>.svc:<port> (https with
	// networking.tls.enabled), once its Service exists.
	// +optional
	URL string `json:"url,omitempty"`

	// IngressURL is the server's URL through its Ingress
	// (networking.ingress), http(s)://<host>, once the Ingress exists.
	// +optional
	IngressURL string `json:"ingressURL,omitempty"`

	// RouteURL is the server's URL through its OpenShift Route
	// (networking.route), https://<host>, once a router has admitted it.
	// +optional
	RouteURL string `json:"routeURL,omitempty"`

	// Replicas is the number of server replicas the Deployment asks for
	// (workload.replicas, or the autoscaler's choice).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of server pods that pass their readiness
	// probe.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of server pods ready for at least the
	// Deployment's minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// ResolvedDistribution is the server image actually deployed: the one
	// the server Deployment runs.
	// +optional
	ResolvedDistribution *ResolvedDistribution `json:"resolvedDistribution,omitempty"`

	// Config is the run config actually deployed.
	// +optional
	Config *ConfigStatus `json:"config,omitempty"`

	// Server is what the running server says of itself (its version
	// endpoint and its providers list, with their health), read by the
	// operator over the server's Service, with its TLS and auth, while the
	// server is Available; absent otherwise. Condition ProvidersHealthy
	// sums up the providers' health.
	// +optional
	Server *ServerStatus `json:"server,omitempty"`

	// StateLine is the Llama Stack line (major.minor) whose names the
	// stack's state uses (SQL tables, PostgreSQL databases): the line
	// that first deployed the stack. It is kept when the stack moves to
	// another line (docs/moving-between-lines.md).
	// +optional
	StateLine string `json:"stateLine,omitempty"`
}

// ServerStatus is the live server's own account: upstream's operator
// keeps the same in status.version.llamaStackServerVersion and
// status.distributionConfig.providers.
type ServerStatus struct {
	// Version is the Llama Stack version the server reports (GET
	// /v1/version), which may differ from resolvedDistribution.operandVersion
	// for a custom image.
	// +optional
	Version string `json:"version,omitempty"`

	// Providers are the server's enabled providers (GET /v1/providers),
	// without their config: the server masks only a few secret-looking
	// keys of it.
	// +optional
	// +listType=atomic
	Providers []ProviderStatus `json:"providers,omitempty"`
}

// ProviderStatus is one provider the server runs.
type ProviderStatus struct {
	// API the provider implements (inference, vector_io, ...).
	API string `json:"api"`

	// ProviderID is the provider's id in the run config.
	ProviderID string `json:"providerID"`

	// ProviderType is the provider's type (remote::vllm, inline::faiss, ...).
	ProviderType string `json:"providerType"`

	// Health is what the server's health check of the provider says.
	// +optional
	Health ProviderHealth `json:"health,omitempty"`
}

// ProviderHealth is a provider's health as the server reports it.
type ProviderHealth struct {
	// Status is OK, Error or Not Implemented (the provider has no health
	// check).
	// +optional
	Status string `json:"status,omitempty"`

	// Message says why, when the server gives a reason.
	// +optional
	Message string `json:"message,omitempty"`
}

// ResolvedDistribution is the distribution and image the server Deployment
// runs.
type ResolvedDistribution struct {
	// Name of the distribution, or "custom" for a custom image.
	// +optional
	Name string `json:"name,omitempty"`

	// Image deployed, by digest when the operand pin names one.
	// +optional
	Image string `json:"image,omitempty"`

	// OperandVersion is the Llama Stack version of the deployed image, from
	// the operand pin; while the Deployment still runs the image recorded
	// here before (another major's, until a move to this one rolls out),
	// the version recorded then; "unknown" for a custom image, for a pin
	// that does not name it, and for another image this operator did not
	// choose.
	// +optional
	OperandVersion string `json:"operandVersion,omitempty"`

	// OperatorVersion is the operator release that reconciles the stack,
	// whose operand pin chose the image.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
}

// UnknownVersion is the operand version status.resolvedDistribution reports
// when the operator does not know it.
const UnknownVersion = "unknown"

// ConfigStatus is the deployed run config.
type ConfigStatus struct {
	// Hash is the SHA-256 (hex) of the run config.
	// +optional
	Hash string `json:"hash,omitempty"`

	// ConfigMapName is the ConfigMap holding the run config.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// InferenceStack is one installation of a Llama Stack server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=istack
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Distribution",type=string,JSONPath=`.status.resolvedDistribution.name`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.resolvedDistribution.operandVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Server-Version",type=string,JSONPath=`.status.server.version`,priority=1
// +kubebuilder:printcolumn:name="Providers",type=string,JSONPath=`.status.conditions[?(@.type=="ProvidersHealthy")].reason`,priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 45 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter, hold only lowercase letters, digits and '-', and be at most 45 characters: the operator derives Service and volume names from it"
type InferenceStack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec InferenceStackSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status InferenceStackStatus `json:"status,omitempty"`
}

// InferenceStackList is a list of InferenceStacks.
//
// +kubebuilder:object:root=true
type InferenceStackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the InferenceStacks.
	Items []InferenceStack `json:"items"`
}
