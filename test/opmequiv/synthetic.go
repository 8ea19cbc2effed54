package opmequiv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/blang/semver/v4"

	"github.com/inferencestack/inferencestack/internal/fbc"
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

// Layout is a generated repository: bundle directories, the semver template
// that lists them and the catalog extras file that names their images.
type Layout struct {
	// Root is the repository root.
	Root string
	// Dirs are the bundle directories (absolute), in version order.
	Dirs []string
	// Refs are the bundle image references, in the same order.
	Refs []string
	// Template is channels/<package>.semver.yaml, listing bundle directories
	// relative to Root, as bundlegen reads it.
	Template string
}

// Write lays out the package under root the way the repository does:
// bundle/<package>/<version>/{manifests,metadata}, channels/<package>.semver.yaml
// (stable channel, major and minor channels) and the catalog extras
// channels/<package>.release.yaml, whose imageRefTemplate is imageRefTemplate
// (a Go template over .Package and .Version, e.g.
// "127.0.0.1:5000/{{.Package}}-bundle:v{{.Version}}").
func (s Synthetic) Write(root, imageRefTemplate string) (Layout, error) {
	refTmpl, err := template.New("ref").Option("missingkey=error").Parse(imageRefTemplate)
	if err != nil {
		return Layout{}, fmt.Errorf("image reference template: %w", err)
	}
	l := Layout{Root: root, Template: filepath.Join(root, "channels", s.Package+".semver.yaml")}
	var tmpl strings.Builder
	tmpl.WriteString("schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: true\nstable:\n  bundles:\n")
	for _, v := range s.Versions() {
		rel := filepath.Join("bundle", s.Package, v.String())
		dir := filepath.Join(root, rel)
		files := map[string]string{
			filepath.Join("manifests", s.Package+".clusterserviceversion.yaml"): s.csv(v),
			filepath.Join("manifests", "widgets.example.com.crd.yaml"):          crd,
			filepath.Join("metadata", "annotations.yaml"):                       s.annotations(v),
		}
		if err := writeFiles(dir, files); err != nil {
			return Layout{}, err
		}
		var ref strings.Builder
		if err := refTmpl.Execute(&ref, struct{ Package, Name, Version string }{s.Package, s.Package + ".v" + v.String(), v.String()}); err != nil {
			return Layout{}, err
		}
		l.Dirs = append(l.Dirs, dir)
		l.Refs = append(l.Refs, ref.String())
		fmt.Fprintf(&tmpl, "  - image: %s\n", filepath.ToSlash(rel))
	}
	release := fmt.Sprintf("imageRefTemplate: %q\n", imageRefTemplate)
	err = writeFiles(root, map[string]string{
		filepath.Join("channels", s.Package+".semver.yaml"):  tmpl.String(),
		filepath.Join("channels", s.Package+".release.yaml"): release,
	})
	return l, err
}

// ImageTemplate returns the semver template with every bundle directory
// replaced by its image reference: the input `opm alpha render-template
// semver` takes.
func (l Layout) ImageTemplate() ([]byte, error) {
	data, err := os.ReadFile(l.Template)
	if err != nil {
		return nil, err
	}
	t, err := fbc.ParseTemplate(data)
	if err != nil {
		return nil, err
	}
	byDir := map[string]string{}
	for i, d := range l.Dirs {
		rel, err := filepath.Rel(l.Root, d)
		if err != nil {
			return nil, err
		}
		byDir[filepath.ToSlash(rel)] = l.Refs[i]
	}
	t, err = t.MapRefs(func(dir string) (string, error) {
		ref, ok := byDir[dir]
		if !ok {
			return "", fmt.Errorf("%s lists %s, which was not generated", l.Template, dir)
		}
		return ref, nil
	})
	if err != nil {
		return nil, err
	}
	return t.Marshal()
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
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
