package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
)

// refNameAnnotation names an image inside an OCI layout (OCI image spec).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// LayoutMarker is the file bundlegen puts in every OCI layout folder it
// writes: only a folder that holds it (or an empty or missing one) is ever
// replaced by WriteLayout.
const LayoutMarker = ".written-by-bundlegen"

const layoutMarkerText = "This OCI image layout was written by bundlegen image; the next `bundlegen image ... --output` to this folder replaces it.\n"

// CheckLayoutDir refuses a folder WriteLayout must not replace: one that
// holds something and is not an OCI layout bundlegen wrote (LayoutMarker).
func CheckLayoutDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, syscall.ENOTDIR) {
			return fmt.Errorf("--output %s is a file: name a folder for the OCI layout", dir)
		}
		return err
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, LayoutMarker)); err == nil {
		return nil
	}
	names := make([]string, 0, 3)
	for _, e := range entries[:min(3, len(entries))] {
		names = append(names, e.Name())
	}
	return fmt.Errorf("--output %s holds files (%s...) and is not an OCI layout bundlegen wrote (no %s): it replaces only its own layouts; "+
		"name an empty or new folder", dir, strings.Join(names, ", "), LayoutMarker)
}

// WriteLayout writes img as the only image of an OCI layout folder dir, in
// one step (atomicfs.ReplaceDir), marked with LayoutMarker. dir must be
// missing, empty or a layout WriteLayout wrote (CheckLayoutDir); the caller
// checks that it is not an input (atomicfs.CheckOutput). refName (optional,
// for example "1.2.0") is recorded as org.opencontainers.image.ref.name, so
// tools such as skopeo can address it as oci:dir:refName.
func WriteLayout(ctx context.Context, img v1.Image, dir, refName string) error {
	if err := CheckLayoutDir(dir); err != nil {
		return err
	}
	return atomicfs.ReplaceDir(ctx, dir, func(tmp string) error {
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
		return os.WriteFile(filepath.Join(tmp, LayoutMarker), []byte(layoutMarkerText), 0o644)
	})
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
	if err := remote.Write(r, img, remoteOptions(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", r, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}
