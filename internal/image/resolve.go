package image

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ResolveOptions tune how Resolve reaches a registry.
type ResolveOptions struct {
	// Insecure allows plain HTTP to registries that are not on a loopback or
	// private address (those use HTTP anyway).
	Insecure bool
	// Remote holds extra go-containerregistry options (a transport in tests).
	Remote []remote.Option
}

// Resolve asks the registry for the digest of ref (a tag or digest reference)
// and returns the digest reference "<repository>@sha256:...". A reference that
// already names a digest is returned in that form without a registry call.
func Resolve(ctx context.Context, ref string, opts ResolveOptions) (string, error) {
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return "", fmt.Errorf("image reference %q does not parse: %w", ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return d.Context().Name() + "@" + d.DigestStr(), nil
	}
	ropts := append(remoteOptions(ctx), opts.Remote...)
	desc, err := remote.Head(r, ropts...)
	if err == nil && !isManifest(desc.MediaType) {
		err = fmt.Errorf("HEAD answered media type %q, not an image manifest or index", desc.MediaType)
	}
	if err != nil {
		// Some registries answer HEAD poorly; GET the manifest before giving up.
		full, gerr := remote.Get(r, ropts...)
		if gerr != nil {
			return "", fmt.Errorf("resolving %s: HEAD: %w; GET: %w", ref, err, gerr)
		}
		if merr := checkManifest(full.MediaType, full.Manifest); merr != nil {
			return "", fmt.Errorf("resolving %s: the registry's answer is not an image manifest (%w): is %s a container registry?",
				ref, merr, r.Context().RegistryStr())
		}
		desc = &full.Descriptor
	}
	return r.Context().Name() + "@" + desc.Digest.String(), nil
}

// isManifest reports whether mt is the media type of an image manifest or
// an index (Docker's or OCI's).
func isManifest(mt types.MediaType) bool { return mt.IsImage() || mt.IsIndex() }

// checkManifest checks that body, answered with media type mt, is an image
// manifest or index: a registry (or anything else) that answers 200 to
// every request must not have its answer taken for a digest.
func checkManifest(mt types.MediaType, body []byte) error {
	if !isManifest(mt) {
		return fmt.Errorf("media type %q", mt)
	}
	var m struct {
		SchemaVersion int64 `json:"schemaVersion"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.SchemaVersion != 2 {
		return fmt.Errorf("a %s body that is not a schemaVersion 2 manifest", mt)
	}
	return nil
}

// CheckReference reports whether ref is a well-formed image reference, as the
// container runtime will parse it.
func CheckReference(ref string) error {
	if ref == "" {
		return fmt.Errorf("image reference is empty")
	}
	if strings.TrimSpace(ref) != ref {
		return fmt.Errorf("image reference %q has surrounding spaces", ref)
	}
	if _, err := name.ParseReference(ref, name.StrictValidation); err != nil {
		return fmt.Errorf("image reference %q does not parse: %w", ref, err)
	}
	return nil
}

// CheckDigest reports whether d is a well-formed "sha256:<64 hex>" digest.
func CheckDigest(d string) error {
	if _, err := name.NewDigest("example.invalid/x@"+d, name.StrictValidation); err != nil {
		return fmt.Errorf("digest %q is not of the form sha256:<64 hex digits>: %w", d, err)
	}
	return nil
}

// WithDigest returns the digest reference "<repository>@<digest>" of ref. The
// tag, if any, is dropped: a digest reference names exactly one image.
func WithDigest(ref, digest string) (string, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("image reference %q does not parse: %w", ref, err)
	}
	if err := CheckDigest(digest); err != nil {
		return "", err
	}
	return r.Context().Name() + "@" + digest, nil
}

// HasDigest reports whether ref names its image by digest.
func HasDigest(ref string) bool {
	_, err := name.NewDigest(ref)
	return err == nil
}

// Tag returns the tag ref names explicitly ("0.3.0" in
// "docker.io/llamastack/distribution-starter:0.3.0", also when a digest
// follows it), and false when it names none (a registry port is not a tag).
func Tag(ref string) (string, bool) {
	rest, _, _ := strings.Cut(ref, "@")
	slash, colon := strings.LastIndex(rest, "/"), strings.LastIndex(rest, ":")
	if colon <= slash {
		return "", false
	}
	return rest[colon+1:], true
}
