package v1alpha2

// The phases.
const (
	// PhasePending: nothing deployed yet (config not generated, or waiting
	// for a referenced object).
	PhasePending Phase = "Pending"
	// PhaseDeploying: the server is rolling out.
	PhaseDeploying Phase = "Deploying"
	// PhaseReady: the server is available at the desired generation.
	PhaseReady Phase = "Ready"
	// PhaseDegraded: the operator cannot reach the desired state.
	PhaseDegraded Phase = "Degraded"
	// PhaseDeleting: the InferenceStack is being deleted.
	PhaseDeleting Phase = "Deleting"
)

// Phases lists every phase.
var Phases = []Phase{PhasePending, PhaseDeploying, PhaseReady, PhaseDegraded, PhaseDeleting}

// Condition types.
const (
	// TypeConfigGenerated is True when the run config ConfigMap holds the
	// config of the current spec (generated, or read from overrideConfig).
	TypeConfigGenerated = "ConfigGenerated"
	// TypeAvailable is True when the server has its minimum replicas ready.
	TypeAvailable = "Available"
	// TypeProgressing is True while a change is rolling out.
	TypeProgressing = "Progressing"
	// TypeDegraded is True when the operator cannot reach the desired state.
	TypeDegraded = "Degraded"
	// TypeProvidersHealthy is True when every provider the Available
	// server lists reports no error, False when one reports an error, and
	// Unknown when the operator cannot read the server; absent while the
	// server is not Available.
	TypeProvidersHealthy = "ProvidersHealthy"
)

// ConditionTypes lists every condition type the operator sets.
var ConditionTypes = []string{TypeConfigGenerated, TypeAvailable, TypeProgressing, TypeDegraded, TypeProvidersHealthy}

// Condition reasons.
const (
	// ReasonSucceeded: the condition's step completed (ConfigGenerated=True,
	// Progressing=False after a rollout).
	ReasonSucceeded = "Succeeded"
	// ReasonAsExpected: nothing is wrong (Degraded=False).
	ReasonAsExpected = "AsExpected"
	// ReasonInvalidConfig: the spec cannot be turned into a run config.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonInvalidSpec: a stack read through v1alpha1 breaks a rule of
	// v1alpha2 that no API server checked (what its annotations carry), or
	// carries an annotation conversion could not apply (Degraded=True);
	// nothing is deployed or changed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonLineMoveLosesResources: the stack was moved (relabelled) to an
	// operator whose Llama Stack line drops resources the stack's server
	// holds; the message names each. Nothing is deployed or changed (the
	// old server keeps serving) until spec.lineMove accepts them for that
	// line (Degraded=True).
	ReasonLineMoveLosesResources = "LineMoveLosesResources"
	// ReasonOverrideConfigNotFound: the overrideConfig ConfigMap or its key
	// is missing.
	ReasonOverrideConfigNotFound = "OverrideConfigNotFound"
	// ReasonSecretNotFound: a Secret the spec references is missing.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonDistributionNotPinned: the operand pin names no image for the
	// distribution.
	ReasonDistributionNotPinned = "DistributionNotPinned"
	// ReasonUnsupportedOperandVersion: the operand pin names a Llama Stack
	// version whose run-config layout this operator does not know.
	ReasonUnsupportedOperandVersion = "UnsupportedOperandVersion"
	// ReasonDeploying: the server's Deployment is rolling out.
	ReasonDeploying = "Deploying"
	// ReasonMinimumReplicasAvailable: the server has its minimum replicas.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable: the server lacks ready replicas.
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonScaledToZero: workload.replicas is 0.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonCacheNotReady: the operator-managed PostgreSQL is not ready.
	ReasonCacheNotReady = "CacheNotReady"
	// ReasonImagePullFailed: the kubelet cannot pull the image of a pod of
	// the stack (server or cache); the message names the pod, the image and
	// the kubelet's pull error (Degraded=True).
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonCrashLooping: a container of a pod of the stack (server or
	// cache) keeps exiting with an error and the kubelet keeps restarting
	// it; the message names the container, the pod and the exit code, and
	// how to read the log of the last run (Degraded=True).
	ReasonCrashLooping = "CrashLooping"
	// ReasonApplyFailed: writing an owned object to the API server failed.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonNameTaken: an object the operator would make for the stack
	// exists already and is not the operator's for this stack (a user's, or
	// another stack's); the operator does not take it over.
	ReasonNameTaken = "NameTaken"
	// ReasonDeleting: the InferenceStack is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonRouteNotServed: the stack asks for an OpenShift Route
	// (networking.route) and the cluster does not serve route.openshift.io/v1
	// (Degraded=True); the operator looks again now and then.
	ReasonRouteNotServed = "RouteNotServed"
	// ReasonProvidersHealthy: no provider of the server reports an error
	// (ProvidersHealthy=True).
	ReasonProvidersHealthy = "ProvidersHealthy"
	// ReasonProviderUnhealthy: a provider reports an error; the message
	// names each and what it says (ProvidersHealthy=False).
	ReasonProviderUnhealthy = "ProviderUnhealthy"
	// ReasonServerUnreachable: the operator could not read the server's
	// providers; the message says why (ProvidersHealthy=Unknown).
	ReasonServerUnreachable = "ServerUnreachable"
)

// Reasons lists every condition reason the operator sets.
var Reasons = []string{
	ReasonSucceeded, ReasonAsExpected, ReasonInvalidConfig, ReasonOverrideConfigNotFound,
	ReasonSecretNotFound, ReasonDistributionNotPinned, ReasonUnsupportedOperandVersion, ReasonDeploying,
	ReasonMinimumReplicasAvailable, ReasonMinimumReplicasUnavailable, ReasonScaledToZero,
	ReasonCacheNotReady, ReasonImagePullFailed, ReasonCrashLooping, ReasonApplyFailed, ReasonDeleting,
	ReasonProvidersHealthy, ReasonProviderUnhealthy, ReasonServerUnreachable,
	ReasonRouteNotServed, ReasonNameTaken, ReasonInvalidSpec, ReasonLineMoveLosesResources,
}
