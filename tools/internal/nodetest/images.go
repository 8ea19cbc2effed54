package nodetest

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/inferencestack/inferencestack/internal/testenv"
	"github.com/inferencestack/inferencestack/tools/internal/image"
)

// PauseImage is the pod sandbox image of the node: the pause program
// (./tools/internal/nodetest/pause), built and pushed by New.
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
// "./tools/internal/nodetest/httpserver") as a static binary and pushes its image
// (PushBinary, the binary at /<last element of pkg>, the entrypoint) so that
// the node pulls it as ref, e.g. "registry.test/inferencestack/standin:dev".
// It returns ref by digest. A test can then run the program as a pod, or
// set an InferenceStack's spec.distribution.image to it.
func (n *Node) PushGoImage(ctx context.Context, pkg, ref string) (string, error) {
	f, err := os.CreateTemp("", "node-image-")
	if err != nil {
		return "", err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	if err := testenv.BuildStatic(pkg, f.Name()); err != nil {
		return "", err
	}
	return n.pushBinary(ctx, f.Name(), "/"+path.Base(pkg), ref, image.BinaryOptions{})
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
