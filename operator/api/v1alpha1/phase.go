package v1alpha1

import "github.com/inferencestack/inferencestack/operator/api/v1alpha2"

// Phase summarises an InferenceStack's conditions in one word: the hub's
// phases (v1alpha2.Phases), the same in every version.
type Phase = v1alpha2.Phase
