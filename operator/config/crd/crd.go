// Package crd holds the InferenceStack CRD as `make manifests` generates it
// into bases/ (controller-gen, from operator/api's types and markers), for
// code that must judge objects by the CRD's own rules
// (operator/api/v1alpha2/validation). It embeds the generated file itself,
// so it is never stale: `make verify` already fails when that file is.
package crd

import _ "embed"

// InferenceStacks is bases/inferencestack.io_inferencestacks.yaml: the CRD
// with every version operator/api has.
//
//go:embed bases/inferencestack.io_inferencestacks.yaml
var InferenceStacks []byte
