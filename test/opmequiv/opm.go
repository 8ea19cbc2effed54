package opmequiv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"go.podman.io/image/v5/types"

	"github.com/operator-framework/operator-registry/alpha/action"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	alphatemplate "github.com/operator-framework/operator-registry/alpha/template"
	orimage "github.com/operator-framework/operator-registry/pkg/image"
	"github.com/operator-framework/operator-registry/pkg/image/containersimageregistry"
)

// acceptAnything is a containers/image signature policy that accepts any
// image; the loopback registry of a test serves unsigned images.
const acceptAnything = `{"default":[{"type":"insecureAcceptAnything"}]}`

// WriteContainersConfig writes, under home, what containers/image (used by
// opm) needs to pull from the plain-HTTP registry host: a signature policy
// and a registries.conf marking host insecure, at the paths it reads for a
// user whose HOME is home. Each of mirrored (a registry such as quay.io) is
// rewritten to host, so that references to it are pulled from host under
// their own names. It returns the two file paths.
func WriteContainersConfig(home, host string, mirrored ...string) (policy, registries string, err error) {
	dir := filepath.Join(home, ".config", "containers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	policy = filepath.Join(dir, "policy.json")
	registries = filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(policy, []byte(acceptAnything), 0o644); err != nil {
		return "", "", err
	}
	conf := fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", host)
	for _, m := range mirrored {
		conf += fmt.Sprintf("\n[[registry]]\nprefix = %q\nlocation = %q\ninsecure = true\n", m, host)
	}
	if err := os.WriteFile(registries, []byte(conf), 0o644); err != nil {
		return "", "", err
	}
	return policy, registries, nil
}

// NewRegistry returns the image registry client opm builds for
// `--use-http` (containers/image, TLS verification off, so plain HTTP is
// tried), configured from home (see WriteContainersConfig) to pull from the
// loopback registry host. Destroy it when done.
func NewRegistry(home, host string, mirrored ...string) (orimage.Registry, error) {
	policy, registries, err := WriteContainersConfig(home, host, mirrored...)
	if err != nil {
		return nil, err
	}
	// A system context of our own rather than opm's shared default, which
	// WithInsecureSkipTLSVerify would modify.
	sys := &types.SystemContext{
		OSChoice:                 "linux",
		SignaturePolicyPath:      policy,
		SystemRegistriesConfPath: registries,
	}
	reg, err := containersimageregistry.New(sys,
		containersimageregistry.WithInsecureSkipTLSVerify(true),
		containersimageregistry.WithTemporaryImageCache())
	if err != nil {
		return nil, fmt.Errorf("creating containers/image registry: %w", err)
	}
	return reg, nil
}

// RenderWithOPM renders a semver template the way
// `opm alpha render-template semver --use-http` does
// (cmd/opm/alpha/template/render.go): operator-registry's template registry,
// a containers/image registry with TLS verification off, and action.Render
// limited to bundle images. home holds the containers configuration written
// by WriteContainersConfig; references to the mirrored registries are pulled
// from host.
func RenderWithOPM(ctx context.Context, template []byte, home, host string, mirrored ...string) (*declcfg.DeclarativeConfig, error) {
	reg, err := NewRegistry(home, host, mirrored...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = reg.Destroy() }()
	// As opm does: the bundle loader logs on the happy path.
	logrus.SetOutput(io.Discard)

	renderBundle := alphatemplate.BundleRenderer(func(ctx context.Context, image string) (*declcfg.DeclarativeConfig, error) {
		return action.Render{
			Refs:           []string{image},
			Registry:       reg,
			AllowedRefMask: action.RefBundleImage,
		}.Run(ctx)
	})
	tmpl, err := alphatemplate.NewRegistry().CreateTemplateByType("semver", renderBundle)
	if err != nil {
		return nil, err
	}
	return tmpl.Render(ctx, bytes.NewReader(template))
}
