package image

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RevisionLabel is the image label naming the commit an image is built
// from; when an image has it, it must be the commit its provenance names.
const RevisionLabel = "org.opencontainers.image.revision"

// emptyJSON is the config blob of OCI 1.1 artifacts; emptyJSONDigest its
// digest.
var (
	emptyJSON       = []byte("{}")
	emptyJSONDigest = v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(emptyJSON))}
)

// registryTimeout bounds how long a registry may take to answer one
// request (its headers) once connected; go-containerregistry's transport
// already bounds the dial (30 s) and the TLS handshake (10 s). A var so
// tests can shorten it.
var registryTimeout = 30 * time.Second

// registryTransport is go-containerregistry's default transport with
// registryTimeout and the size limits of limits.go: a registry that accepts
// a connection and never answers, or answers more than bundlegen reads,
// fails the verb (sign, verify, push, pin --resolve) instead of hanging it
// or filling its memory.
func registryTransport() http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = registryTimeout
	return limitTransport{base: t}
}

// remoteOptions are the options of every registry call: the context, the
// bounded transport and the default keychain (~/.docker/config.json,
// $DOCKER_CONFIG).
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(registryTransport()),
		remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// artifact is an OCI 1.1 artifact manifest: artifactType, the empty config,
// one layer holding data, and a subject. Its bytes depend on data and the
// subject only.
type artifact struct {
	manifest []byte
	layer    v1.Layer
}

func newArtifact(subject v1.Descriptor, artifactType string, data []byte) (*artifact, error) {
	layer := static.NewLayer(data, types.MediaType(artifactType))
	ld, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config: v1.Descriptor{
			MediaType: types.OCIEmptyJSON,
			Size:      int64(len(emptyJSON)),
			Digest:    emptyJSONDigest,
		},
		Layers:  []v1.Descriptor{{MediaType: types.MediaType(artifactType), Size: int64(len(data)), Digest: ld}},
		Subject: &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest},
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &artifact{manifest: b, layer: layer}, nil
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyJSON, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	if h == emptyJSONDigest {
		return static.NewLayer(emptyJSON, types.OCIEmptyJSON), nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}

// Attach pushes data as an OCI 1.1 artifact of artifactType whose subject is
// the manifest d, into d's repository, and returns the artifact's digest.
// Registries without the referrers API get the referrers tag schema
// (the index tagged sha256-<hex> of d), which go-containerregistry keeps.
func Attach(ctx context.Context, d name.Digest, artifactType string, data []byte) (name.Digest, error) {
	desc, err := remote.Head(d, remoteOptions(ctx)...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading %s: %w", d, err)
	}
	return attach(ctx, d, *desc, artifactType, data)
}

// attach is Attach to d, whose descriptor the caller has read.
func attach(ctx context.Context, d name.Digest, desc v1.Descriptor, artifactType string, data []byte) (name.Digest, error) {
	a, err := newArtifact(desc, artifactType, data)
	if err != nil {
		return name.Digest{}, err
	}
	img, err := partial.CompressedToImage(a)
	if err != nil {
		return name.Digest{}, err
	}
	ad, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	ref := d.Context().Digest(ad.String())
	if err := remote.Write(ref, img, remoteOptions(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("attaching %s to %s: %w", artifactType, d, err)
	}
	return ref, nil
}

// SignManifest signs the manifest d as cosign does with a key: it adds a
// layer holding the simple-signing payload of d, the signature in its
// annotations, to the image tagged sha256-<hex>.sig in d's repository (made
// when missing). Signatures already there are kept, as cosign keeps them.
// It returns the signature tag.
func SignManifest(ctx context.Context, d name.Digest, s Signer) (name.Tag, error) {
	tag, err := signatureTag(d)
	if err != nil {
		return name.Tag{}, err
	}
	p, err := signaturePayload(d)
	if err != nil {
		return name.Tag{}, err
	}
	sig, ann, err := s.Sign(ctx, p)
	if err != nil {
		return name.Tag{}, fmt.Errorf("signing %s: %w", d, err)
	}
	annotations := map[string]string{SignatureAnnotation: encodeSig(sig)}
	for k, v := range ann {
		if k != SignatureAnnotation {
			annotations[k] = v
		}
	}
	if err := appendLayer(ctx, tag, p, SimpleSigningMediaType, annotations); err != nil {
		return name.Tag{}, fmt.Errorf("pushing the signature of %s to %s: %w", d, tag, err)
	}
	return tag, nil
}

// appendLayer adds a layer holding data, of mediaType with annotations, to
// the image tag (made when missing, as cosign makes it: an OCI manifest with
// an empty config), keeping its other layers.
func appendLayer(ctx context.Context, tag name.Tag, data []byte, mediaType types.MediaType, annotations map[string]string) error {
	base, err := remote.Image(tag, remoteOptions(ctx)...)
	switch {
	case isNotFound(err):
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	case err != nil:
		return fmt.Errorf("reading %s: %w", tag, err)
	default:
		m, err := base.Manifest()
		if err != nil {
			return fmt.Errorf("reading %s: %w", tag, err)
		}
		if len(m.Layers) >= maxCosignLayers {
			return fmt.Errorf("%s already has %d layers, the most bundlegen reads: remove it from the registry (or the signatures no longer wanted) and sign again", tag, len(m.Layers))
		}
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(data, mediaType),
		MediaType:   mediaType,
		Annotations: annotations,
	})
	if err != nil {
		return err
	}
	return remote.Write(tag, img, remoteOptions(ctx)...)
}

// isNotFound reports whether a registry answered that a manifest does not exist.
func isNotFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

// Sign attaches the SBOM and provenance of an image that is already pushed,
// signs the image and both documents, and attests the image with both
// (cosign's attestations).
type Sign struct {
	// Kind and Input are what the image is built from (as for Build); Labels
	// its extra labels. Sign rebuilds it and refuses an Image that differs,
	// so the documents describe exactly what is signed.
	Kind   Kind
	Input  string
	Labels map[string]string
	// Image is the pushed image (by tag or digest).
	Image string
	// Source is the commit the input comes from.
	Source Source
	// Command is the command that builds the image from Input, recorded in
	// the provenance.
	Command []string
	// Signer signs.
	Signer Signer
}

// Signed says what Sign pushed.
type Signed struct {
	// Image is the signed image by digest.
	Image string `json:"image"`
	// SBOM and Provenance are the attached documents by digest.
	SBOM       string `json:"sbom"`
	Provenance string `json:"provenance"`
	// Signatures are the tags of the signatures of the image, the SBOM and
	// the provenance.
	Signatures []string `json:"signatures"`
	// Attestations is the tag of the image's attestations in cosign's
	// layout: the SBOM (predicate type PredicateSPDX) and the provenance
	// (PredicateSLSAProvenance) as signed in-toto statements.
	Attestations string `json:"attestations"`
}

// Run rebuilds the image, checks it is the pushed one, attaches its SBOM and
// provenance and signs the three, then attests the image with both
// documents in cosign's layout.
func (s Sign) Run(ctx context.Context) (Signed, error) {
	if s.Signer == nil {
		return Signed{}, errors.New("no signing key: give --key FILE or set " + SigningKeyEnv)
	}
	if err := s.Source.Check(); err != nil {
		return Signed{}, err
	}
	if rev := s.Labels[RevisionLabel]; rev != "" && rev != s.Source.Commit {
		return Signed{}, fmt.Errorf("the image's label %s is %q, but the commit is %s: sign an image built from a clean checkout of the commit (make image-operator), or give that commit (--commit)",
			RevisionLabel, rev, s.Source.Commit)
	}
	img, err := buildKind(s.Kind, s.Input, s.Labels)
	if err != nil {
		return Signed{}, err
	}
	built, err := img.Digest()
	if err != nil {
		return Signed{}, err
	}
	ref, err := ParseReference(s.Image)
	if err != nil {
		return Signed{}, err
	}
	desc, err := remote.Head(ref, remoteOptions(ctx)...)
	switch {
	case isNotFound(err):
		return Signed{}, fmt.Errorf("%s does not exist: push it first (bundlegen image %s %s --push %s)", ref, s.Kind, s.Input, ref)
	case err != nil:
		return Signed{}, fmt.Errorf("reading %s: %w", ref, err)
	case desc.Digest != built:
		return Signed{}, fmt.Errorf("%s is %s, but %s builds %s: sign the image built from this input (push it with bundlegen image %s %s --push ...), or give the input it was built from",
			ref, desc.Digest, s.Input, built, s.Kind, s.Input)
	}
	d := ref.Context().Digest(built.String())
	subject := Subject{Name: ref.Context().Name(), Digest: built}
	sbom, err := SBOM(s.Kind, s.Input, subject, s.Source)
	if err != nil {
		return Signed{}, err
	}
	prov, err := Provenance(s.Kind, s.Input, subject, s.Source, s.Command)
	if err != nil {
		return Signed{}, err
	}
	res := Signed{Image: d.String()}
	targets := []name.Digest{d}
	for _, doc := range []struct {
		artifactType string
		data         []byte
		out          *string
	}{{SBOMArtifactType, sbom, &res.SBOM}, {ProvenanceArtifactType, prov, &res.Provenance}} {
		ad, err := attach(ctx, d, *desc, doc.artifactType, doc.data)
		if err != nil {
			return Signed{}, err
		}
		*doc.out = ad.String()
		targets = append(targets, ad)
	}
	for _, target := range targets {
		tag, err := SignManifest(ctx, target, s.Signer)
		if err != nil {
			return Signed{}, err
		}
		res.Signatures = append(res.Signatures, tag.String())
	}
	sbomStatement, err := SBOMStatement(sbom, subject)
	if err != nil {
		return Signed{}, err
	}
	for _, att := range []struct {
		statement     []byte
		predicateType string
	}{{sbomStatement, PredicateSPDX}, {prov, PredicateSLSAProvenance}} {
		tag, err := Attest(ctx, d, att.statement, att.predicateType, s.Signer)
		if err != nil {
			return Signed{}, err
		}
		res.Attestations = tag.String()
	}
	return res, nil
}
