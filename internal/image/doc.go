// Package image builds the OLM bundle and catalog images and the operator
// image without a container engine. Images are assembled with
// go-containerregistry from a directory or a binary on disk: fixed
// timestamps, labels as OLM expects them, so the same input always gives the
// same digest. They are written to an OCI layout folder or pushed to a
// registry.
//
// It also describes and signs them: an SPDX 2.3 SBOM (sbom.go) and an in-toto
// SLSA v1 provenance statement (provenance.go), both reproducible from the
// commit, attached as OCI 1.1 referrers (attach.go), signed in cosign's
// key-based layout through a Signer (sign.go), and verified (verify.go).
//
// This is the only package of the module that imports go-containerregistry
// and the SBOM, provenance and signing libraries.
package image
