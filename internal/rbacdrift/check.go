package rbacdrift

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/inferencestack/inferencestack/internal/csv"
	"github.com/inferencestack/inferencestack/internal/manifests"
	"github.com/inferencestack/inferencestack/internal/release"
	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/operator/componentrbac"
)

// Check runs the three checks on the operator's RBAC.
type Check struct {
	// RBACDir holds role.yaml and the other RBAC manifests.
	RBACDir string
	// ServiceAccount is the operator's ServiceAccount: its bindings say what
	// the operator holds.
	ServiceAccount string
	// SourceDir is where controller-gen reads the +kubebuilder:rbac markers.
	SourceDir string
	// AppliedKinds is the apply package's kinds.go (the kinds the operator applies).
	AppliedKinds string
	// ReleasesDir holds channels/releases/<version>.yaml.
	ReleasesDir string
	// BundleDir is the bundle/ root.
	BundleDir string
	// Version selects the release whose bundles must be fresh; empty means
	// the highest in ReleasesDir.
	Version string
	// RequireBundle makes a missing bundle of the release a failure rather
	// than a note.
	RequireBundle bool
	// Objects are the component RBAC objects; nil renders them with
	// componentrbac for componentrbac.Fixture().
	Objects []componentrbac.Object
}

// Report is the outcome of a Check.
type Report struct {
	// RoleFiles are the RBAC manifests the operator's ClusterRoles came from.
	RoleFiles []string `json:"roleFiles"`
	// Objects says, for each component object, whether the operator may create it.
	Objects []ObjectResult `json:"objects"`
	// Missing are the rules the operator lacks (failures).
	Missing []Missing `json:"missing"`
	// Markers are the +kubebuilder:rbac markers that add the missing rules.
	Markers []string `json:"markers"`
	// Version is the release whose bundles were compared.
	Version string `json:"version"`
	// Bundles are the bundle directories of Version that were compared
	// (when Frozen: found, not compared).
	Bundles []string `json:"bundles"`
	// Frozen says Version is published: its bundles are frozen and were not
	// compared with the RBAC manifests, which move on with later releases.
	Frozen bool `json:"frozen"`
	// Stale are bundles whose CSV permissions differ from the RBAC manifests (failures).
	Stale []Stale `json:"stale"`
	// Unexplained are rules nothing needs or explains (a report, not a failure).
	Unexplained []Unexplained `json:"unexplained"`
	// Explained says why each other rule is there.
	Explained []Explained `json:"explained"`
	// Notes are things the check could not do.
	Notes []string `json:"notes"`
}

// Stale is a bundle whose CSV does not carry the current permissions.
type Stale struct {
	// File is the CSV.
	File string `json:"file"`
	// Field is the CSV field that differs.
	Field string `json:"field"`
	// Message says what differs and what to do.
	Message string `json:"message"`
}

// Failed reports whether the check failed: missing rules or stale bundles.
func (r Report) Failed() bool { return len(r.Missing) > 0 || len(r.Stale) > 0 }

// Run runs the checks. The error is for failures to run them; the findings
// are in the report.
func (c Check) Run(_ context.Context) (Report, error) {
	r := Report{Objects: []ObjectResult{}, Missing: []Missing{}, Markers: []string{}, Bundles: []string{},
		Stale: []Stale{}, Unexplained: []Unexplained{}, Explained: []Explained{}, Notes: []string{}}
	owner, files, err := c.owner()
	if err != nil {
		return r, err
	}
	r.RoleFiles = files
	objs := c.Objects
	if objs == nil {
		if objs, err = componentrbac.Objects(componentrbac.Fixture()); err != nil {
			return r, err
		}
	}
	results, missing, err := Coverage(owner, objs)
	if err != nil {
		return r, err
	}
	r.Objects, r.Missing = append(r.Objects, results...), append(r.Missing, missing...)
	var lacking []rbacv1.PolicyRule
	for _, m := range missing {
		lacking = append(lacking, m.Rule)
	}
	for _, rule := range Compact(lacking) {
		r.Markers = append(r.Markers, Marker(rule))
	}

	if err := c.freshness(&r); err != nil {
		return r, err
	}

	markers, err := ReadMarkers(c.SourceDir)
	if err != nil {
		return r, err
	}
	applied, err := AppliedResources(c.AppliedKinds)
	if err != nil {
		return r, err
	}
	var needed []rbacv1.PolicyRule
	for _, o := range results {
		needed = append(needed, o.Needs...)
	}
	explained, unexplained := Explain(owner.ClusterRules, needed, applied, markers, strings.Join(files, ","))
	r.Explained = append(r.Explained, explained...)
	r.Unexplained = append(r.Unexplained, unexplained...)
	return r, nil
}

// owner reads what the operator's ServiceAccount holds from the RBAC
// manifests, and the files of their ClusterRoles.
func (c Check) owner() (Owner, []string, error) {
	rbac, err := manifests.LoadRBAC(c.RBACDir)
	if err != nil {
		return Owner{}, nil, err
	}
	cluster, namespaced, err := csv.Permissions(rbac, c.ServiceAccount)
	if err != nil {
		return Owner{}, nil, fmt.Errorf("RBAC in %s: %w", c.RBACDir, err)
	}
	var o Owner
	for _, p := range cluster {
		o.ClusterRules = append(o.ClusterRules, p.Rules...)
	}
	for _, p := range namespaced {
		o.NamespaceRules = append(o.NamespaceRules, p.Rules...)
	}
	var files []string
	for _, b := range rbac.ClusterRoleBindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == c.ServiceAccount {
				o.Namespace = s.Namespace
			}
		}
	}
	docs, err := manifests.ReadDocuments(c.RBACDir)
	if err != nil {
		return Owner{}, nil, err
	}
	for _, d := range docs {
		if d.Kind == "ClusterRole" && !slices.Contains(files, d.File) {
			files = append(files, d.File)
		}
	}
	return o, files, nil
}

// freshness compares the CSV permissions of the release's bundles with the
// RBAC manifests, through validate.Permissions (what `validate bundle --rbac` checks).
func (c Check) freshness(r *Report) error {
	version := c.Version
	if version == "" {
		latest, err := release.Latest(c.ReleasesDir)
		if err != nil {
			return err
		}
		version = strings.TrimSuffix(filepath.Base(latest), ".yaml")
	} else if err := c.checkVersion(); err != nil {
		return err
	}
	r.Version = version
	// Every release input must read: a malformed one would otherwise pass
	// this check unseen (bundle --check reads them all as well).
	versions, err := release.Versions(c.ReleasesDir)
	if err != nil {
		return err
	}
	published := false
	for _, v := range versions {
		in, err := release.LoadInput(filepath.Join(c.ReleasesDir, v.String()+".yaml"))
		if err != nil {
			return err
		}
		published = published || (v.String() == version && in.Published)
	}
	if st, err := os.Stat(c.BundleDir); err != nil || !st.IsDir() {
		return fmt.Errorf("--bundles %s: not a folder (%v): give the root of the bundle tree (default bundle/, written by `bundlegen bundle`)", c.BundleDir, statCause(st, err))
	}
	dirs, err := filepath.Glob(filepath.Join(c.BundleDir, "*", version))
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		msg := fmt.Sprintf("no bundle for release %s under %s: freshness not checked (run `make bundle` to generate it)", version, c.BundleDir)
		// A release named with --version must be checked: a note would let
		// the check pass without comparing anything.
		if c.RequireBundle || c.Version != "" {
			r.Stale = append(r.Stale, Stale{File: filepath.Join(c.BundleDir, "*", version), Message: msg})
		} else {
			r.Notes = append(r.Notes, msg)
		}
		return nil
	}
	if published {
		// A published release is frozen: its bundles ship the RBAC of its
		// day, and operator/config moves on with later releases
		// (docs/release.md, "Published releases are frozen").
		r.Notes = append(r.Notes, fmt.Sprintf("release %s is published (%s: published: true): its bundles are frozen as channels/published.sum records them "+
			"(`bundlegen bundle --check` checks that) and are not compared with %s, which moves on with later releases; "+
			"a change to the operator's RBAC ships in a new release", version, filepath.Join(c.ReleasesDir, version+".yaml"), c.RBACDir))
		r.Bundles, r.Frozen = append(r.Bundles, dirs...), true
		return nil
	}
	for _, dir := range dirs {
		findings, err := validate.Permissions(dir, c.RBACDir)
		if err != nil {
			return err
		}
		r.Bundles = append(r.Bundles, dir)
		for _, f := range findings {
			r.Stale = append(r.Stale, Stale{File: filepath.Join(dir, f.File), Field: f.Field, Message: f.Message})
		}
	}
	return nil
}

func statCause(st os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return st.Mode().Type().String() + " file"
}

// checkVersion: the release named by Version has a release input.
func (c Check) checkVersion() error {
	path := filepath.Join(c.ReleasesDir, c.Version+".yaml")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	have, err := release.Versions(c.ReleasesDir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(have))
	for _, v := range have {
		names = append(names, v.String())
	}
	return fmt.Errorf("--version %s: no release input %s; releases in %s: %s (give one of them, or add the release input, see docs/release.md)",
		c.Version, path, c.ReleasesDir, strings.Join(names, ", "))
}

// Print writes the report as text: failures first, each naming the file
// and the rule, then the markers to add, then the least-privilege report.
func (r Report) Print(w io.Writer) {
	roles := strings.Join(r.RoleFiles, ",")
	for _, m := range r.Missing {
		fmt.Fprintf(w, "error: %s: missing %s: needed to %s %s (%s)", roles, String(m.Rule), verb(m.Need), m.Object, m.Builder)
		if m.Alternative != nil {
			fmt.Fprintf(w, "; or hold %s", String(*m.Alternative))
		}
		fmt.Fprintln(w)
	}
	if len(r.Markers) > 0 {
		fmt.Fprintln(w, "add to the controller's RBAC markers, then run `make manifests`:")
		for _, m := range r.Markers {
			fmt.Fprintln(w, "  "+m)
		}
	}
	for _, s := range r.Stale {
		field := ""
		if s.Field != "" {
			field = " " + s.Field
		}
		fmt.Fprintf(w, "error: %s%s: stale: %s\n", s.File, field, s.Message)
	}
	for _, u := range r.Unexplained {
		fmt.Fprintf(w, "report: %s: %s: no component needs it and no marker explains it", u.File, String(u.Rule))
		if len(u.Markers) > 0 {
			fmt.Fprintf(w, " (marker %s; add a `// %s <why>` line above it, or drop it)", strings.Join(u.Markers, ", "), ReasonPrefix)
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	for _, o := range r.Objects {
		state := "refused"
		if o.Covered {
			state = "ok (" + o.Via + ")"
		}
		fmt.Fprintf(w, "%s: %s (%s)\n", state, o.Object, o.Builder)
	}
	for _, b := range r.Bundles {
		fmt.Fprintf(w, "compared: %s\n", b)
	}
}

func verb(need string) string {
	switch need {
	case NeedWrite:
		return "write"
	case NeedBind:
		return "bind the role of"
	default:
		return "grant the rules of"
	}
}
