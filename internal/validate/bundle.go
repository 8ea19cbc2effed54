// Package validate checks release artifacts with the upstream validators
// (operator-framework/api, operator-registry) plus this project's own rules.
package validate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	apimanifests "github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apivalidation "github.com/operator-framework/api/pkg/validation"
	apierrs "github.com/operator-framework/api/pkg/validation/errors"
	registrybundle "github.com/operator-framework/operator-registry/pkg/lib/bundle"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/inferencestack/inferencestack/internal/atomicfs"
	"github.com/inferencestack/inferencestack/internal/csv"
	"github.com/inferencestack/inferencestack/internal/manifests"
)

// Severity of a finding.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is one problem found in a bundle.
type Finding struct {
	// Severity is error or warning.
	Severity Severity `json:"severity"`
	// Source names the check: operator-framework/api, operator-registry or bundlegen.
	Source string `json:"source"`
	// File is the file the finding is about, relative to the bundle.
	File string `json:"file,omitempty"`
	// Field is the YAML path of the field, when known.
	Field string `json:"field,omitempty"`
	// Subject is what the finding is about when the file and field do not
	// say it: the API, object or value the validator named (for example the
	// group/version/kind of an owned API that has no example).
	Subject string `json:"subject,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
}

func (f Finding) String() string {
	loc := f.File
	if f.Field != "" {
		loc += " " + f.Field
	}
	if loc != "" {
		loc = " " + strings.TrimSpace(loc) + ":"
	}
	subject := ""
	if f.Subject != "" {
		subject = " [" + f.Subject + "]"
	}
	return fmt.Sprintf("%s [%s]%s %s%s", f.Severity, f.Source, loc, f.Message, subject)
}

// Report is the outcome of validating one bundle.
type Report struct {
	// Dir is the bundle directory.
	Dir string `json:"dir"`
	// Findings, errors first.
	Findings []Finding `json:"findings"`
}

// HasErrors reports whether any finding is an error.
func (r Report) HasErrors() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == SeverityError })
}

// Errors returns the number of errors.
func (r Report) Errors() int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == SeverityError {
			n++
		}
	}
	return n
}

// Print writes one line per finding.
func (r Report) Print(w io.Writer) {
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%s: %s\n", r.Dir, f)
	}
}

// Bundle validates a registry+v1 bundle directory.
type Bundle struct {
	// Dir holds manifests/ and metadata/.
	Dir string
	// RBACDir, when set, holds the operator's current RBAC manifests
	// (role.yaml and bindings): the CSV's permissions must equal them.
	RBACDir string
	// KubeVersion is passed to the validators that check removed APIs.
	KubeVersion string
	// RequireDigests makes an image named by tag an error (the publish
	// gate) rather than a warning.
	RequireDigests bool
}

// Run validates the bundle. The error is for failures to run the checks; the
// findings are in the report.
func (b Bundle) Run(_ context.Context) (Report, error) {
	r := Report{Dir: b.Dir}
	// The libraries below open every file themselves: no link out of the
	// folder, nothing that blocks when opened (a named pipe), and no tree a
	// bundlegen write is changing (its journal).
	if err := atomicfs.CheckInput(b.Dir); err != nil {
		return r, fmt.Errorf("%s is not a readable registry+v1 bundle directory (it must hold manifests/ and metadata/annotations.yaml, as `bundlegen bundle` writes them): %w", b.Dir, err)
	}
	files, err := manifestFiles(filepath.Join(b.Dir, "manifests"))
	if err != nil {
		return r, fmt.Errorf("%s is not a readable registry+v1 bundle directory (it must hold manifests/ and metadata/annotations.yaml, as `bundlegen bundle` writes them): %w", b.Dir, err)
	}

	// operator-registry: bundle format (directories, annotations) and content.
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	v := registrybundle.NewImageValidator(nil, logrus.NewEntry(logger))
	if err := v.ValidateBundleFormat(b.Dir); err != nil {
		r.add(registryFindings(err, "metadata/annotations.yaml", nil)...)
	}
	if err := v.ValidateBundleContent(filepath.Join(b.Dir, "manifests")); err != nil {
		r.add(registryFindings(err, "manifests/", files)...)
	}

	// operator-framework/api: default bundle validators, operatorhub and good practices.
	bundle, err := apimanifests.GetBundleFromDir(b.Dir)
	if err != nil {
		r.add(Finding{Severity: SeverityError, Source: "operator-framework/api", File: "manifests/", Message: err.Error()})
		r.sort()
		return r, nil
	}
	objs := bundle.ObjectsToValidate()
	if b.KubeVersion != "" {
		objs = append(objs, map[string]string{"k8s-version": b.KubeVersion})
	}
	validators := apivalidation.DefaultBundleValidators.WithValidators(
		apivalidation.OperatorHubV2Validator,
		apivalidation.StandardCapabilitiesValidator,
		apivalidation.StandardCategoriesValidator,
		apivalidation.GoodPracticesValidator,
	)
	for _, res := range validators.Validate(objs...) {
		for _, e := range append(slices.Clone(res.Errors), res.Warnings...) {
			r.add(apiFinding(e, res.Name, files))
		}
	}

	// bundlegen's own rules.
	if bundle.CSV != nil {
		csvFile := files[fileKey{"ClusterServiceVersion", bundle.CSV.Name}]
		r.add(checkRelatedImages(bundle.CSV, csvFile)...)
		r.add(checkPin(bundle, files, csvFile)...)
		r.add(checkDigests(bundle.CSV, csvFile, b.RequireDigests)...)
		r.add(installFindings(bundle.Objects, files)...)
		if b.RBACDir != "" {
			r.add(checkPermissions(bundle.CSV, csvFile, b.RBACDir)...)
		}
	}
	r.sort()
	return r, nil
}

func (r *Report) add(f ...Finding) { r.Findings = append(r.Findings, f...) }

// dedupe drops operator-registry findings that repeat an operator-framework/api
// one: operator-registry runs some of the same validators.
func (r *Report) dedupe() {
	type key struct {
		sev                     Severity
		field, subject, message string
	}
	api := map[key]bool{}
	for _, f := range r.Findings {
		if f.Source == "operator-framework/api" {
			api[key{f.Severity, f.Field, f.Subject, f.Message}] = true
		}
	}
	r.Findings = slices.DeleteFunc(r.Findings, func(f Finding) bool {
		return f.Source == "operator-registry" && api[key{f.Severity, f.Field, f.Subject, f.Message}]
	})
}

func (r *Report) sort() {
	r.dedupe()
	rank := func(s Severity) int {
		if s == SeverityError {
			return 0
		}
		return 1
	}
	// Findings equal in every field are one finding; findings about
	// different subjects (four APIs without an example) stay apart.
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(rank(a.Severity), rank(b.Severity)), cmp.Compare(a.File, b.File),
			cmp.Compare(a.Field, b.Field), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Message, b.Message),
			cmp.Compare(a.Source, b.Source))
	})
	r.Findings = slices.Compact(r.Findings)
}

type fileKey struct{ kind, name string }

// manifestFiles maps each object of the manifests directory to its file.
func manifestFiles(dir string) (map[fileKey]string, error) {
	docs, err := manifests.ReadDocuments(dir)
	if err != nil {
		return nil, err
	}
	out := map[fileKey]string{}
	for _, d := range docs {
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(d.Data, &meta); err == nil {
			out[fileKey{d.Kind, meta.Metadata.Name}] = "manifests/" + filepath.Base(d.File)
		}
	}
	return out, nil
}

func registryFindings(err error, file string, files map[fileKey]string) []Finding {
	var errs []error
	if ve := (registrybundle.ValidationError{}); errors.As(err, &ve) {
		errs = ve.Errors
	} else {
		errs = []error{err}
	}
	var out []Finding
	for _, e := range errs {
		f := Finding{Severity: SeverityError, Source: "operator-registry", File: file, Message: e.Error()}
		if ae := (apierrs.Error{}); errors.As(e, &ae) {
			f = apiFinding(ae, "", files)
			f.Source = "operator-registry"
			if f.File == "" {
				f.File = file
			}
		}
		out = append(out, f)
	}
	return out
}

func apiFinding(e apierrs.Error, name string, files map[fileKey]string) Finding {
	f := Finding{Severity: SeverityError, Source: "operator-framework/api", Field: e.Field, Subject: subject(e.BadValue), Message: e.Detail}
	if e.Level == apierrs.LevelWarn {
		f.Severity = SeverityWarning
	}
	if f.Message == "" {
		f.Message = e.Error()
	}
	for k, file := range files {
		if k.name == name || fmt.Sprint(e.BadValue) == k.name {
			if f.File == "" || k.kind == "ClusterServiceVersion" {
				f.File = file
			}
		}
	}
	return f
}

// maxSubject bounds a subject rendered from a whole object.
const maxSubject = 160

// subject renders the value an upstream finding is about (its BadValue):
// a name, an API's group/version/kind, an error, or a short rendering of an
// object.
func subject(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case schema.GroupVersionKind:
		return fmt.Sprintf("%s %s", v.Kind, v.GroupVersion())
	case error:
		s = v.Error()
	case interface{ GetName() string }:
		s = v.GetName()
	case fmt.Stringer:
		s = v.String()
	default:
		data, err := json.Marshal(v)
		if err != nil {
			data = []byte(fmt.Sprint(v))
		}
		s = string(data)
	}
	if r := []rune(s); len(r) > maxSubject {
		s = string(r[:maxSubject]) + "..."
	}
	return s
}

// checkRelatedImages: every image the CSV runs or names is in relatedImages.
func checkRelatedImages(c *v1alpha1.ClusterServiceVersion, file string) []Finding {
	related := map[string]bool{}
	for _, ri := range c.Spec.RelatedImages {
		related[ri.Image] = true
	}
	var out []Finding
	missing := func(field, img string) {
		if img != "" && !related[img] {
			out = append(out, Finding{Severity: SeverityError, Source: "bundlegen", File: file, Field: field,
				Message: fmt.Sprintf("image %s is not listed in spec.relatedImages: regenerate the bundle with bundlegen bundle", img)})
		}
	}
	missing("metadata.annotations.containerImage", c.Annotations[csv.AnnotationContainerImage])
	for i, d := range c.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		pod := d.Spec.Template.Spec
		for j, ct := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			kind, idx := "containers", j-len(pod.InitContainers)
			if j < len(pod.InitContainers) {
				kind, idx = "initContainers", j
			}
			base := fmt.Sprintf("spec.install.spec.deployments[%d].spec.template.spec.%s[%d]", i, kind, idx)
			missing(base+".image", ct.Image)
			for k, e := range ct.Env {
				if strings.HasPrefix(e.Name, "RELATED_IMAGE_") {
					missing(fmt.Sprintf("%s.env[%d].value", base, k), e.Value)
				}
			}
		}
	}
	return out
}

// checkPermissions: the CSV's permissions equal those of the RBAC manifests.
func checkPermissions(c *v1alpha1.ClusterServiceVersion, file, rbacDir string) []Finding {
	spec := c.Spec.InstallStrategy.StrategySpec
	op := operatorDeployment(spec.DeploymentSpecs)
	if op < 0 {
		// The CRD package runs nothing, or only its conversion webhook, whose
		// rights come from internal/bundle/conversion.go (bundle --check
		// holds them to the generator byte for byte), not from rbacDir.
		return nil
	}
	rbac, err := manifests.LoadRBAC(rbacDir)
	if err != nil {
		return []Finding{{Severity: SeverityError, Source: "bundlegen", File: rbacDir, Message: err.Error()}}
	}
	// The bundle names the ServiceAccount per major (csv.MajorServiceAccount);
	// the RBAC manifests bind the plain name.
	sa := spec.DeploymentSpecs[op].Spec.Template.Spec.ServiceAccountName
	source := strings.TrimSuffix(sa, csv.MajorServiceAccount("", c.Spec.Version.Major))
	cluster, namespaced, err := csv.Permissions(rbac, source)
	if err != nil {
		return []Finding{{Severity: SeverityError, Source: "bundlegen", File: rbacDir, Message: err.Error()}}
	}
	cluster, namespaced = csv.WithServiceAccount(cluster, sa), csv.WithServiceAccount(namespaced, sa)
	var out []Finding
	if !equality.Semantic.DeepEqual(cluster, spec.ClusterPermissions) {
		out = append(out, Finding{Severity: SeverityError, Source: "bundlegen", File: file, Field: "spec.install.spec.clusterPermissions",
			Message: fmt.Sprintf("differ from the ClusterRoles bound to %s in %s (%s): regenerate the bundle for a new version", sa, rbacDir, permissionDiff(cluster, spec.ClusterPermissions))})
	}
	if !equality.Semantic.DeepEqual(namespaced, spec.Permissions) {
		out = append(out, Finding{Severity: SeverityError, Source: "bundlegen", File: file, Field: "spec.install.spec.permissions",
			Message: fmt.Sprintf("differ from the Roles bound to %s in %s (%s): regenerate the bundle for a new version", sa, rbacDir, permissionDiff(namespaced, spec.Permissions))})
	}
	return out
}

// Permissions checks only that the CSV of the bundle in dir carries exactly
// the permissions of the RBAC manifests in rbacDir (what Bundle.Run does with
// RBACDir, without the other validators). Findings name the CSV file
// relative to the bundle; a bundle without a CSV is an error.
func Permissions(dir, rbacDir string) ([]Finding, error) {
	c, file, err := bundleCSV(dir)
	if err != nil {
		return nil, err
	}
	return checkPermissions(c, file, rbacDir), nil
}

// bundleCSV reads the ClusterServiceVersion of the bundle in dir and names
// its file relative to the bundle.
func bundleCSV(dir string) (*v1alpha1.ClusterServiceVersion, string, error) {
	docs, err := manifests.ReadDocuments(filepath.Join(dir, "manifests"))
	if err != nil {
		return nil, "", fmt.Errorf("bundle %s: %w", dir, err)
	}
	for _, d := range docs {
		if d.Kind != "ClusterServiceVersion" {
			continue
		}
		var c v1alpha1.ClusterServiceVersion
		if err := json.Unmarshal(d.Data, &c); err != nil {
			return nil, "", fmt.Errorf("%s: %w", d.File, err)
		}
		return &c, "manifests/" + filepath.Base(d.File), nil
	}
	return nil, "", fmt.Errorf("bundle %s: no ClusterServiceVersion in manifests/", dir)
}
