// Package bundle generates the registry+v1 bundles of a release: one for the
// inferencestack-crds package (the CRDs) and one for inferencestack-operator
// (the controller and its operand pin), and writes them atomically under
// bundle/<package>/<version>/, refusing to change a released bundle.
package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/inferencestack/inferencestack/operator/pin"
	"github.com/inferencestack/inferencestack/tools/internal/csv"
	"github.com/inferencestack/inferencestack/tools/internal/release"
	"github.com/inferencestack/inferencestack/tools/internal/validate"
)

// Package names.
const (
	PackageCRDs     = "inferencestack-crds"
	PackageOperator = "inferencestack-operator"
	// ManagerContainer is the operator's container in the manager Deployment.
	ManagerContainer = "manager"
	// TakeUnlabeledFlag is the operator flag a release's takesUnlabeledStacks sets.
	TakeUnlabeledFlag = "--take-unlabeled-stacks"
)

// Generate makes the bundles of one release.
type Generate struct {
	// ReleasesDir holds channels/releases/<version>.yaml.
	ReleasesDir string
	// LockPath is the image digest lock.
	LockPath string
	// Version selects the release; empty means the highest in ReleasesDir.
	Version string
	// CRDDir holds the generated CRDs.
	CRDDir string
	// RBACDir holds role.yaml and the bindings.
	RBACDir string
	// ManagerPath is the manager Deployment manifest.
	ManagerPath string
	// SamplesDir holds the samples for alm-examples.
	SamplesDir string
	// BasesDir holds the base CSVs, <package>.clusterserviceversion.yaml.
	BasesDir string
	// OutputDir is the bundle/ root.
	OutputDir string
	// AllowTags lets images without a digest through, with a warning.
	AllowTags bool
	// Check compares instead of writing: it fails when bundle/ is missing a
	// bundle of the release or differs from what would be generated.
	Check bool
	// Warnings receives warnings (tags, validator warnings); nil discards.
	Warnings io.Writer
}

// Result says what happened to each package's bundle.
type Result struct {
	// Version is the release.
	Version string
	// Bundles are the bundle directories, by package.
	Bundles map[string]string
	// Written lists the packages whose bundle was written now; the others
	// already existed with identical content.
	Written []string
	// Reports are the validation reports.
	Reports []validate.Report
}

// Files is a bundle's content: path relative to the bundle directory -> bytes.
type Files map[string][]byte

// Run generates, validates and writes the bundles.
func (g Generate) Run(ctx context.Context) (Result, error) {
	warn := g.warnings()
	in, images, err := g.release()
	if err != nil {
		return Result{}, err
	}
	for _, w := range images.Warnings {
		fmt.Fprintln(warn, w)
	}
	bundles, err := g.Build(in, images)
	if err != nil {
		return Result{}, err
	}
	res := Result{Version: in.Version, Bundles: map[string]string{}}
	var toWrite []string
	for _, pkg := range slices.Sorted(maps.Keys(bundles)) {
		dir := filepath.Join(g.OutputDir, pkg, in.Version)
		res.Bundles[pkg] = dir
		same, exists, diff, err := compare(dir, bundles[pkg])
		if err != nil {
			return Result{}, err
		}
		switch {
		case same:
			continue
		case exists:
			return Result{}, fmt.Errorf("%s already exists with different content (%s): released bundles are never rewritten; "+
				"add channels/releases/<next version>.yaml for the change (see docs/release.md), or, if %s was never published, delete %s",
				dir, diff, in.Version, dir)
		case g.Check:
			return Result{}, fmt.Errorf("%s does not exist: run `make bundle` to generate release %s", dir, in.Version)
		}
		toWrite = append(toWrite, pkg)
	}

	tmp, err := os.MkdirTemp(mkdirAll(g.OutputDir), ".bundlegen-")
	if err != nil {
		return Result{}, fmt.Errorf("creating a temporary directory in %s: %w", g.OutputDir, err)
	}
	defer os.RemoveAll(tmp)
	for _, pkg := range slices.Sorted(maps.Keys(bundles)) {
		dir := filepath.Join(tmp, pkg)
		if err := write(dir, bundles[pkg]); err != nil {
			return Result{}, err
		}
		rbac := ""
		if pkg == PackageOperator {
			rbac = g.RBACDir
		}
		rep, err := validate.Bundle{Dir: dir, RBACDir: rbac, KubeVersion: in.MinKubeVersion}.Run(ctx)
		if err != nil {
			return Result{}, err
		}
		rep.Dir = filepath.Join(g.OutputDir, pkg, in.Version)
		res.Reports = append(res.Reports, rep)
		if rep.HasErrors() {
			var b strings.Builder
			rep.Print(&b)
			return res, fmt.Errorf("the generated %s bundle does not validate; bundle/ is unchanged:\n%s", pkg, b.String())
		}
	}
	if g.Check {
		return res, nil
	}
	for _, pkg := range toWrite {
		dst := res.Bundles[pkg]
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Result{}, err
		}
		if err := os.Rename(filepath.Join(tmp, pkg), dst); err != nil {
			return Result{}, fmt.Errorf("moving the %s bundle into place: %w", pkg, err)
		}
		res.Written = append(res.Written, pkg)
	}
	return res, nil
}

func (g Generate) warnings() io.Writer {
	if g.Warnings == nil {
		return io.Discard
	}
	return g.Warnings
}

func mkdirAll(dir string) string {
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

func (g Generate) release() (release.Input, release.Images, error) {
	path := filepath.Join(g.ReleasesDir, g.Version+".yaml")
	if g.Version == "" {
		var err error
		if path, err = release.Latest(g.ReleasesDir); err != nil {
			return release.Input{}, release.Images{}, err
		}
	} else if _, err := os.Stat(path); err != nil {
		return release.Input{}, release.Images{}, fmt.Errorf("release %s: %s does not exist: create it (see docs/release.md)", g.Version, path)
	}
	in, err := release.LoadInput(path)
	if err != nil {
		return release.Input{}, release.Images{}, err
	}
	if err := release.CheckUnlabeledOwner(g.ReleasesDir); err != nil {
		return release.Input{}, release.Images{}, err
	}
	lock, err := release.LoadLock(g.LockPath)
	if err != nil {
		return release.Input{}, release.Images{}, err
	}
	images, err := release.PinImages(in, lock, g.AllowTags)
	return in, images, err
}

// Build returns the files of both bundles of a release.
func (g Generate) Build(in release.Input, images release.Images) (map[string]Files, error) {
	crds, err := g.crds()
	if err != nil {
		return nil, err
	}
	crdBundle, err := g.crdBundle(in, crds)
	if err != nil {
		return nil, err
	}
	opBundle, err := g.operatorBundle(in, images)
	if err != nil {
		return nil, err
	}
	header := []byte("# Generated by bundlegen from channels/releases/" + in.Version + ".yaml; do not edit (see docs/release.md).\n")
	for _, files := range []Files{crdBundle, opBundle} {
		for name, data := range files {
			if strings.HasSuffix(name, ".yaml") {
				files[name] = append(slices.Clip(header), data...)
			}
		}
	}
	return map[string]Files{PackageCRDs: crdBundle, PackageOperator: opBundle}, nil
}

type crdFile struct {
	name string
	crd  apiextensionsv1.CustomResourceDefinition
}

func (g Generate) crds() ([]crdFile, error) {
	docs, err := csv.ReadDocuments(g.CRDDir)
	if err != nil {
		return nil, fmt.Errorf("CRDs: %w: run `make manifests` to generate them", err)
	}
	var out []crdFile
	for _, d := range docs {
		if d.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: a %s in the CRD directory %s, which must hold only CustomResourceDefinitions "+
				"(written by `make manifests`): move the file out of it", d.File, d.Kind, g.CRDDir)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := d.Decode(&crd); err != nil {
			return nil, err
		}
		out = append(out, crdFile{name: filepath.Base(d.File), crd: crd})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CRDs: no CustomResourceDefinition in %s: run `make manifests`", g.CRDDir)
	}
	return out, nil
}

func (g Generate) base(pkg string) (*v1alpha1.ClusterServiceVersion, error) {
	return csv.LoadBase(filepath.Join(g.BasesDir, pkg+".clusterserviceversion.yaml"))
}

func (g Generate) crdBundle(in release.Input, crds []crdFile) (Files, error) {
	base, err := g.base(PackageCRDs)
	if err != nil {
		return nil, err
	}
	examples, err := g.samples(g.warnings())
	if err != nil {
		return nil, err
	}
	gen := csv.Generator{
		Package:        PackageCRDs,
		Version:        in.SemVer(),
		CreatedAt:      in.Created(),
		MinKubeVersion: in.MinKubeVersion,
		Examples:       examples,
	}
	files := Files{}
	for _, c := range crds {
		gen.OwnedCRDs = append(gen.OwnedCRDs, c.crd)
		data, err := csv.MarshalObject(c.crd, "status")
		if err != nil {
			return nil, err
		}
		files["manifests/"+c.name] = data
	}
	out, err := gen.Generate(base)
	if err != nil {
		return nil, err
	}
	if err := addCSV(files, PackageCRDs, out); err != nil {
		return nil, err
	}
	addMetadata(files, PackageCRDs, in)
	return files, nil
}

func (g Generate) samples(warn io.Writer) ([]map[string]any, error) {
	docs, err := csv.ReadDocuments(g.SamplesDir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(warn, "warning: samples directory %s does not exist: alm-examples will be empty; add an InferenceStack sample there\n", g.SamplesDir)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	var out []map[string]any
	for _, d := range docs {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			return nil, err
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "namespace")
		}
		out = append(out, m)
	}
	return out, nil
}

func (g Generate) operatorBundle(in release.Input, images release.Images) (Files, error) {
	base, err := g.base(PackageOperator)
	if err != nil {
		return nil, err
	}
	dep, err := g.deployment(in, images)
	if err != nil {
		return nil, err
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		return nil, fmt.Errorf("%s: Deployment %s: spec.template.spec.serviceAccountName is empty: set it to the operator's ServiceAccount", g.ManagerPath, dep.Name)
	}
	rbac, err := csv.LoadRBAC(g.RBACDir)
	if err != nil {
		return nil, err
	}
	cluster, namespaced, err := rbac.Permissions(sa)
	if err != nil {
		return nil, fmt.Errorf("RBAC in %s: %w", g.RBACDir, err)
	}
	// The bundle's ServiceAccount is named per major, so that two majors can
	// be installed side by side (see csv.MajorServiceAccount).
	bundleSA := csv.MajorServiceAccount(sa, in.SemVer().Major)
	dep.Spec.Template.Spec.ServiceAccountName = bundleSA
	cluster, namespaced = csv.WithServiceAccount(cluster, bundleSA), csv.WithServiceAccount(namespaced, bundleSA)
	related := []v1alpha1.RelatedImage{{Name: "manager", Image: images.Operator}}
	for _, d := range slices.Sorted(maps.Keys(images.Operands)) {
		related = append(related, v1alpha1.RelatedImage{Name: "operand-" + d, Image: images.Operands[d]})
	}
	if images.Cache != "" {
		related = append(related, v1alpha1.RelatedImage{Name: "cache", Image: images.Cache})
	}
	gen := csv.Generator{
		Package:            PackageOperator,
		Version:            in.SemVer(),
		CreatedAt:          in.Created(),
		MinKubeVersion:     in.MinKubeVersion,
		ContainerImage:     images.Operator,
		RelatedImages:      related,
		Deployments:        []v1alpha1.StrategyDeploymentSpec{{Name: dep.Name, Spec: dep.Spec, Label: dep.Labels}},
		ClusterPermissions: cluster,
		Permissions:        namespaced,
	}
	out, err := gen.Generate(base)
	if err != nil {
		return nil, err
	}
	files := Files{}
	if err := addCSV(files, PackageOperator, out); err != nil {
		return nil, err
	}
	pinData, err := images.Pin(in.Version).Marshal()
	if err != nil {
		return nil, err
	}
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: validate.PinConfigMapName, Labels: map[string]string{"app.kubernetes.io/name": PackageOperator, "app.kubernetes.io/version": in.Version}},
		Data:       map[string]string{validate.PinKey: string(pinData)},
	}
	data, err := csv.MarshalObject(cm)
	if err != nil {
		return nil, err
	}
	files["manifests/"+validate.PinConfigMapName+"_v1_configmap.yaml"] = data
	addMetadata(files, PackageOperator, in)
	return files, nil
}

// deployment reads the manager Deployment and sets the operator image, the
// RELATED_IMAGE_ variables of the operand images, and whether the release
// takes unlabelled InferenceStacks.
func (g Generate) deployment(in release.Input, images release.Images) (appsv1.Deployment, error) {
	docs, err := csv.ReadFileDocuments(g.ManagerPath)
	if err != nil {
		return appsv1.Deployment{}, fmt.Errorf("manager Deployment: %w", err)
	}
	var deps []appsv1.Deployment
	for _, d := range docs {
		if d.Kind != "Deployment" {
			continue
		}
		var dep appsv1.Deployment
		if err := d.Decode(&dep); err != nil {
			return appsv1.Deployment{}, err
		}
		deps = append(deps, dep)
	}
	if len(deps) != 1 {
		return appsv1.Deployment{}, fmt.Errorf("%s: found %d Deployments, want exactly one (the operator's)", g.ManagerPath, len(deps))
	}
	dep := deps[0]
	containers := dep.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == ManagerContainer })
	if i < 0 {
		return appsv1.Deployment{}, fmt.Errorf("%s: Deployment %s: spec.template.spec.containers has no container named %q: "+
			"name the operator's container %q", g.ManagerPath, dep.Name, ManagerContainer, ManagerContainer)
	}
	c := &containers[i]
	c.Image = images.Operator
	env := slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "RELATED_IMAGE_") })
	for _, d := range slices.Sorted(maps.Keys(images.Operands)) {
		env = append(env, corev1.EnvVar{Name: release.EnvName(d), Value: images.Operands[d]})
	}
	if images.Cache != "" {
		env = append(env, corev1.EnvVar{Name: pin.CacheImageEnv, Value: images.Cache})
	}
	c.Env = env
	if !in.TakesUnlabeled() {
		c.Args = append(slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, TakeUnlabeledFlag) }), TakeUnlabeledFlag+"=false")
	}
	return dep, nil
}

func addCSV(files Files, pkg string, c *v1alpha1.ClusterServiceVersion) error {
	data, err := csv.Marshal(c)
	if err != nil {
		return err
	}
	files["manifests/"+pkg+".clusterserviceversion.yaml"] = data
	return nil
}

// Annotations returns the bundle's metadata/annotations.yaml keys.
func Annotations(pkg string, in release.Input) map[string]string {
	channel := fmt.Sprintf("stable-v%d", in.SemVer().Major)
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         pkg,
		"operators.operatorframework.io.bundle.channels.v1":        channel,
		"operators.operatorframework.io.bundle.channel.default.v1": channel,
	}
}

func addMetadata(files Files, pkg string, in release.Input) {
	ann := Annotations(pkg, in)
	data, _ := yaml.Marshal(map[string]any{"annotations": ann})
	files["metadata/annotations.yaml"] = data
	var b bytes.Buffer
	b.WriteString("# Generated by bundlegen from channels/releases/" + in.Version + ".yaml; do not edit (see docs/release.md).\nFROM scratch\n\n")
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, ann[k])
	}
	b.WriteString("\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n")
	files["bundle.Dockerfile"] = b.Bytes()
}

func write(dir string, files Files) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compare reports whether dir holds exactly files; when it exists and does
// not, diff names the first differences.
func compare(dir string, files Files) (same, exists bool, diff string, err error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, false, "", nil
	}
	have := Files{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		have[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		return false, true, "", err
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if h, ok := have[name]; !ok {
			diffs = append(diffs, name+" missing")
		} else if !bytes.Equal(h, files[name]) {
			diffs = append(diffs, name+" changed")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := files[name]; !ok {
			diffs = append(diffs, name+" extra")
		}
	}
	return len(diffs) == 0, true, strings.Join(diffs, ", "), nil
}
