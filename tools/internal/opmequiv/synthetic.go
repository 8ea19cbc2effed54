package opmequiv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blang/semver/v4"
)

// Synthetic describes a generated package: Majors major versions spread over
// Minors minor versions in all, each with Patches patch versions.
type Synthetic struct {
	// Package is the package name.
	Package string
	// Majors, Minors and Patches size the package (Minors counts all minors
	// over all majors).
	Majors, Minors, Patches int
}

// Versions lists the bundle versions: the minors are spread evenly over the
// majors (the first majors take the remainder), patches 0..Patches-1.
func (s Synthetic) Versions() []semver.Version {
	var vs []semver.Version
	for m := range s.Majors {
		minors := s.Minors / s.Majors
		if m < s.Minors%s.Majors {
			minors++
		}
		for n := range minors {
			for p := range s.Patches {
				vs = append(vs, semver.Version{Major: uint64(m + 1), Minor: uint64(n), Patch: uint64(p)})
			}
		}
	}
	return vs
}

// Write writes one bundle directory per version under root, as
// root/<package>/<version>/{manifests,metadata}, and returns their paths in
// version order.
func (s Synthetic) Write(root string) ([]string, error) {
	var dirs []string
	for _, v := range s.Versions() {
		dir := filepath.Join(root, s.Package, v.String())
		files := map[string]string{
			filepath.Join("manifests", s.Package+".clusterserviceversion.yaml"): s.csv(v),
			filepath.Join("manifests", "widgets.example.com.crd.yaml"):          crd,
			filepath.Join("metadata", "annotations.yaml"):                       s.annotations(v),
		}
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				return nil, err
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// Template returns the semver template (olm.semver) listing every bundle in
// the stable channel under its image reference, with major and minor
// channels. imageRef maps a version to the bundle image reference.
func (s Synthetic) Template(imageRef func(semver.Version) string) []byte {
	var b strings.Builder
	b.WriteString("schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: true\nstable:\n  bundles:\n")
	for _, v := range s.Versions() {
		fmt.Fprintf(&b, "  - image: %s\n", imageRef(v))
	}
	return []byte(b.String())
}

func (s Synthetic) annotations(v semver.Version) string {
	channels := fmt.Sprintf("stable-v%d,stable-v%d.%d", v.Major, v.Major, v.Minor)
	return `annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: ` + s.Package + `
  operators.operatorframework.io.bundle.channels.v1: ` + channels + `
  operators.operatorframework.io.bundle.channel.default.v1: stable-v` + fmt.Sprint(v.Major) + `
`
}

func (s Synthetic) csv(v semver.Version) string {
	return `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: ` + s.Package + `.v` + v.String() + `
  annotations:
    capabilities: Basic Install
    containerImage: quay.io/example/` + s.Package + `:v` + v.String() + `
spec:
  displayName: Synthetic ` + s.Package + `
  description: A synthetic package for the catalog benchmark.
  version: ` + v.String() + `
  minKubeVersion: 1.28.0
  maturity: stable
  provider:
    name: Example
  maintainers:
  - name: Example
    email: maintainers@example.com
  links:
  - name: Source
    url: https://example.com/` + s.Package + `
  keywords: [synthetic]
  installModes:
  - type: OwnNamespace
    supported: false
  - type: SingleNamespace
    supported: false
  - type: MultiNamespace
    supported: false
  - type: AllNamespaces
    supported: true
  customresourcedefinitions:
    owned:
    - name: widgets.example.com
      group: example.com
      version: v1
      kind: Widget
      displayName: Widget
      description: A widget.
  install:
    strategy: deployment
    spec:
      deployments: []
`
}

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
