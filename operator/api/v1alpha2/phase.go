package v1alpha2

// Phase summarises an InferenceStack's conditions in one word.
// +kubebuilder:validation:Enum=Pending;Deploying;Ready;Degraded;Deleting
type Phase string
