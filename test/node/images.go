package node

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/inferencestack/inferencestack/internal/image"
	"github.com/inferencestack/inferencestack/test/testenv"
)

// PauseImage is the pod sandbox image of the node: the pause program
// (./test/node/pause), built and pushed by New.
const PauseImage = "registry.test/inferencestack/pause:node"

// LocalRef returns where to push an image to the in-process registry so
// that the node pulls it as ref: ref's repository, tag or digest on the
// registry's 127.0.0.1 address. ref's registry must be one of
// MirroredRegistries (Docker Hub when ref names none).
func (n *Node) LocalRef(ref string) (string, error) {
	r, err := image.ParseReference(ref)
	if err != nil {
		return "", err
	}
	registry := r.Context().RegistryStr()
	if registry == "index.docker.io" {
		registry = "docker.io"
	}
	if !slices.Contains(MirroredRegistries, registry) {
		return "", fmt.Errorf("node: the node pulls %s from %s, not from the test registry: use a registry of %v (registry.test for test-only images)",
			ref, registry, MirroredRegistries[:len(MirroredRegistries)-1])
	}
	sep := ":"
	if image.HasDigest(ref) {
		sep = "@"
	}
	return n.opts.Registry.Host() + "/" + r.Context().RepositoryStr() + sep + r.Identifier(), nil
}

// PushBinary builds the image of a static executable (image.BuildBinary:
// the offline base, the executable at opts.Path, non-root) and pushes it so
// that the node pulls it as ref. It returns ref by digest, as a pod spec can
// name it.
func (n *Node) PushBinary(ctx context.Context, file string, opts image.BinaryOptions, ref string) (string, error) {
	return n.pushBinary(ctx, file, opts.Path, ref, opts)
}

// PushGoImage builds the main package pkg of this repository (e.g.
// "./test/node/httpserver") as a static binary and pushes its
// image (PushBinary: the offline base, non-root) so that the node pulls it
// as ref, e.g. "registry.test/inferencestack/standin-server:dev". The binary
// goes to opts.Path, "/<last element of pkg>" when empty, the entrypoint.
// It returns ref by digest, for a pod's image or an InferenceStack's
// spec.distribution.image.
//
// The operator runs a stack's server as `llama stack run <run config>`
// (the container's command, so the entrypoint is not used): a stand-in
// server goes to /usr/local/bin/llama, on the image's PATH.
func (n *Node) PushGoImage(ctx context.Context, pkg string, opts image.BinaryOptions, ref string) (string, error) {
	f, err := os.CreateTemp("", "node-image-")
	if err != nil {
		return "", err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	if err := testenv.BuildStatic(pkg, f.Name()); err != nil {
		return "", err
	}
	if opts.Path == "" {
		opts.Path = "/" + path.Base(pkg)
	}
	return n.pushBinary(ctx, f.Name(), opts.Path, ref, opts)
}

func (n *Node) pushBinary(ctx context.Context, file, inImage, ref string, opts image.BinaryOptions) (string, error) {
	opts.Path = inImage
	local, err := n.LocalRef(ref)
	if err != nil {
		return "", err
	}
	img, err := image.BuildBinary(file, opts)
	if err != nil {
		return "", err
	}
	pushed, err := image.Push(ctx, img, local)
	if err != nil {
		return "", err
	}
	return image.WithDigest(ref, pushed.DigestStr())
}
