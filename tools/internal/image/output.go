package image

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation names an image inside an OCI layout (OCI image spec).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes img as the only image of an OCI layout folder dir,
// replacing what dir held. refName (optional, for example "1.2.0") is recorded
// as org.opencontainers.image.ref.name, so tools such as skopeo can address it
// as oci:dir:refName. The folder is written beside dir and renamed into place.
func WriteLayout(img v1.Image, dir, refName string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if refName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refNameAnnotation: refName}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replacing %s: %w", dir, err)
	}
	return os.Rename(tmp, dir)
}

// ParseReference parses an image reference. Registries on a loopback address
// (127.0.0.1, ::1, localhost) are reached over plain HTTP; every other
// registry needs HTTPS.
func ParseReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		r, err = name.ParseReference(ref)
	}
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if isLoopback(r.Context().RegistryStr()) {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Push pushes img to ref with the credentials of the default keychain
// (~/.docker/config.json, $DOCKER_CONFIG) and returns the pushed reference by
// digest.
func Push(ctx context.Context, img v1.Image, ref string) (name.Digest, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", r, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}
