// Package image builds the OLM bundle and catalog images without a container
// engine. Images are assembled with go-containerregistry from a directory on
// disk: one layer, fixed timestamps, labels as OLM expects them, so the same
// input always gives the same digest. They are written to an OCI layout folder
// or pushed to a registry.
//
// This is the only package of the module that imports go-containerregistry.
package image
