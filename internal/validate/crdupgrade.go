// CRD upgrade safety of a catalog's upgrade edges, checked with
// sigs.k8s.io/crdify configured as OLM v1's preflight configures it.

package validate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/crdify/pkg/config"
	"sigs.k8s.io/crdify/pkg/runner"
	"sigs.k8s.io/crdify/pkg/validations/property"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	opproperty "github.com/operator-framework/operator-registry/alpha/property"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// RuleCRDUpgradeSafety: an upgrade edge changes a CRD in a way OLM v1's CRD
// upgrade safety preflight refuses on the cluster, at upgrade time; or a
// bundle that provides APIs carries no CRD to check.
const RuleCRDUpgradeSafety = "crd-upgrade-safety"

// CRDUpgradeConfig is the crdify configuration of OLM v1's CRD upgrade safety
// preflight (operator-controller
// internal/operator-controller/rukpak/preflights/crdupgradesafety, its
// defaultConfig, the same in v1.5 and v1.11): every default validation as an
// error, unhandled changes as errors, description changes ignored, enum
// values may be added but not removed, and served-version comparisons
// skipped when the CRD has a conversion strategy.
func CRDUpgradeConfig() *config.Config {
	return &config.Config{
		Conversion:           config.ConversionPolicyIgnore,
		UnhandledEnforcement: config.EnforcementPolicyError,
		Validations: []config.ValidationConfig{
			{Name: "description", Enforcement: config.EnforcementPolicyNone},
			{Name: "enum", Enforcement: config.EnforcementPolicyError, Configuration: map[string]any{"additionPolicy": property.AdditionPolicyAllow}},
		},
	}
}

// CRDBreak is one change of a CRD that OLM v1 refuses, as its preflight
// words it.
type CRDBreak struct {
	// CRD is the CRD's name.
	CRD string
	// Version is the CRD version compared (e.g. "v1alpha1", or "v1 -> v2"
	// for served versions); empty for whole-CRD checks.
	Version string
	// Field is the property path (e.g. "^.spec.size"); empty for whole-CRD
	// checks, whose Message names it.
	Field string
	// Check is the crdify validation that failed (e.g. "enum").
	Check string
	// Message is crdify's error.
	Message string
}

// String renders the break as OLM v1's preflight does.
func (b CRDBreak) String() string {
	if b.Version == "" {
		return fmt.Sprintf("CRD %s: %s: %s", b.CRD, b.Check, b.Message)
	}
	return fmt.Sprintf("CRD %s: %s: %s: %s: %s", b.CRD, b.Version, b.Field, b.Check, b.Message)
}

// CRDUpgrade compares the CRDs of two bundles with OLM v1's preflight rules:
// each CRD of newCRDs that oldCRDs also holds (by name) must be a safe
// upgrade of it. A CRD new in newCRDs has nothing to break. The old CRD's
// status.storedVersions is taken to be its storage version, as on a cluster
// that installed the old bundle.
func CRDUpgrade(oldCRDs, newCRDs []apiextensionsv1.CustomResourceDefinition) ([]CRDBreak, error) {
	r, err := runner.New(CRDUpgradeConfig(), runner.DefaultRegistry())
	if err != nil {
		return nil, fmt.Errorf("configuring crdify: %w", err)
	}
	return crdUpgrade(r, oldCRDs, newCRDs), nil
}

func crdUpgrade(r *runner.Runner, oldCRDs, newCRDs []apiextensionsv1.CustomResourceDefinition) []CRDBreak {
	var out []CRDBreak
	for _, newCRD := range newCRDs {
		i := slices.IndexFunc(oldCRDs, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Name == newCRD.Name })
		if i < 0 {
			continue
		}
		oldCRD := oldCRDs[i].DeepCopy()
		if len(oldCRD.Status.StoredVersions) == 0 {
			for _, v := range oldCRD.Spec.Versions {
				if v.Storage {
					oldCRD.Status.StoredVersions = append(oldCRD.Status.StoredVersions, v.Name)
				}
			}
		}
		res := r.Run(oldCRD, newCRD.DeepCopy())
		for _, c := range res.CRDValidation {
			for _, e := range c.Errors {
				out = append(out, CRDBreak{CRD: newCRD.Name, Check: c.Name, Message: e})
			}
		}
		for _, vr := range slices.Concat(res.SameVersionValidation, res.ServedVersionValidation) {
			for _, pc := range vr.PropertyComparisons {
				for _, c := range pc.ComparisonResults {
					for _, e := range c.Errors {
						out = append(out, CRDBreak{CRD: newCRD.Name, Version: vr.Version, Field: pc.Property, Check: c.Name, Message: e})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b CRDBreak) int {
		return cmp.Or(cmp.Compare(a.CRD, b.CRD), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Check, b.Check), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(out)
}

// upgradeEdge is a direct upgrade OLM v1 may take: installed From, resolve To.
type upgradeEdge struct {
	from, to string
	// how says which entries give the edge, e.g. "replaces in stable-v1".
	how []string
	// channels holding the edge.
	channels []string
}

// upgradeEdges lists every direct upgrade of a package (olmgraph.Package.Edges:
// from every channel, as OLM v1 follows edges of all channels), one per pair
// of bundles with every entry that gives it.
func upgradeEdges(g olmgraph.Package) []upgradeEdge {
	edges := map[[2]string]*upgradeEdge{}
	for _, ge := range g.Edges() {
		e := edges[[2]string{ge.From, ge.To}]
		if e == nil {
			e = &upgradeEdge{from: ge.From, to: ge.To}
			edges[[2]string{ge.From, ge.To}] = e
		}
		if h := ge.How + " in " + ge.Channel; !slices.Contains(e.how, h) {
			e.how = append(e.how, h)
		}
		if !slices.Contains(e.channels, ge.Channel) {
			e.channels = append(e.channels, ge.Channel)
		}
	}
	versions := map[string]semver.Version{}
	for _, b := range g.Bundles {
		versions[b.Name] = b.Version
	}
	out := make([]upgradeEdge, 0, len(edges))
	for _, e := range edges {
		slices.Sort(e.channels)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b upgradeEdge) int {
		return cmp.Or(versions[a.to].Compare(versions[b.to]), versions[a.from].Compare(versions[b.from]),
			cmp.Compare(a.to, b.to), cmp.Compare(a.from, b.from))
	})
	return out
}

// bundleObjects is what a catalog bundle carries of its manifests.
type bundleObjects struct {
	// crds are its CustomResourceDefinitions (olm.bundle.object).
	crds []apiextensionsv1.CustomResourceDefinition
	// carried says the bundle has olm.bundle.object properties at all: opm
	// renders bundles with olm.csv.metadata instead, and then the catalog
	// does not say which CRDs they ship.
	carried bool
	// provides says the bundle provides APIs (olm.gvk).
	provides bool
}

// bundleCRDs returns what a catalog bundle carries in its olm.bundle.object
// properties.
func bundleCRDs(b declcfg.Bundle) (bundleObjects, error) {
	props, err := opproperty.Parse(b.Properties)
	if err != nil {
		return bundleObjects{}, err
	}
	out := bundleObjects{carried: len(props.BundleObjects) > 0, provides: len(props.GVKs) > 0}
	for i, o := range props.BundleObjects {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(o.Data, &meta); err != nil {
			return bundleObjects{}, fmt.Errorf("olm.bundle.object %d: %w", i, err)
		}
		if meta.Kind != "CustomResourceDefinition" || meta.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(o.Data, &crd); err != nil {
			return bundleObjects{}, fmt.Errorf("olm.bundle.object %d: CustomResourceDefinition: %w", i, err)
		}
		out.crds = append(out.crds, crd)
	}
	return out, nil
}

// CRDCheckSkipped names the bundles of cfg that carry no objects
// (olm.bundle.object), so the CRD upgrade safety of their edges is not
// checked here: opm renders bundles with olm.csv.metadata, the normal case
// for a production catalog, and OLM v1 then runs the same check on the
// cluster at upgrade time.
func CRDCheckSkipped(cfg declcfg.DeclarativeConfig) []string {
	var out []string
	for _, b := range cfg.Bundles {
		if o, err := bundleCRDs(b); err == nil && !o.carried {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

// crdUpgradeFindings checks every upgrade edge of package p with OLM v1's
// CRD upgrade safety rules: each CRD both bundles ship must be a safe
// upgrade, and no CRD the installed bundle ships may be missing from the
// new one. Edges from or to a bundle that carries no objects are skipped
// (CRDCheckSkipped).
func crdUpgradeFindings(cfg declcfg.DeclarativeConfig, p olmgraph.Package) []CatalogFinding {
	var out []CatalogFinding
	objs := map[string]bundleObjects{}
	for _, b := range cfg.Bundles {
		if b.Package != p.Name {
			continue
		}
		o, err := bundleCRDs(b)
		switch {
		case err != nil:
			out = append(out, CatalogFinding{Package: p.Name, Bundle: b.Name, Rule: RuleCRDUpgradeSafety,
				Message: fmt.Sprintf("cannot read the bundle's objects, so the CRD upgrade safety of its edges is not checked: %v", err)})
			continue
		case o.carried && o.provides && len(o.crds) == 0:
			out = append(out, CatalogFinding{Package: p.Name, Bundle: b.Name, Rule: RuleCRDUpgradeSafety,
				Message: "the bundle provides APIs (olm.gvk) and carries its objects (olm.bundle.object), but none of them is a CRD: a registry+v1 bundle ships the CRDs it owns; " +
					"add them to its manifests/ (bundlegen bundle does) and render the catalog again"})
		}
		objs[b.Name] = o
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(objs)), func(o bundleObjects) bool { return len(o.crds) > 0 }) {
		return out
	}
	r, err := runner.New(CRDUpgradeConfig(), runner.DefaultRegistry())
	if err != nil {
		return append(out, CatalogFinding{Package: p.Name, Rule: RuleCRDUpgradeSafety, Message: fmt.Sprintf("configuring crdify: %v", err)})
	}
	for _, e := range upgradeEdges(p) {
		from, to := objs[e.from], objs[e.to]
		if !from.carried || !to.carried {
			continue
		}
		finding := func(crd, field, msg string) {
			out = append(out, CatalogFinding{
				Package: p.Name, Channel: strings.Join(e.channels, ","), Bundle: e.to, From: e.from, Rule: RuleCRDUpgradeSafety,
				CRD: crd, Field: field, Message: msg,
			})
		}
		for _, old := range from.crds {
			if slices.ContainsFunc(to.crds, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Name == old.Name }) {
				continue
			}
			finding(old.Name, "", fmt.Sprintf("upgrade %s -> %s (%s) removes CRD %s: OLM v1 removes what the new bundle no longer ships, "+
				"so the upgrade would delete the CRD and every %s object on the cluster; keep shipping the CRD in %s (deprecate its versions instead), "+
				"or move it to a package of its own first",
				e.from, e.to, strings.Join(e.how, ", "), old.Name, old.Spec.Names.Kind, e.to))
		}
		for _, b := range crdUpgrade(r, from.crds, to.crds) {
			if b.Check == storedVersionRemoval {
				finding(b.CRD, b.Field, storedVersionAdvice(e, b, from.crds, to.crds))
				continue
			}
			finding(b.CRD, b.Field, fmt.Sprintf("upgrade %s -> %s (%s) breaks %s; OLM v1 refuses this upgrade on the cluster (CRD upgrade safety preflight): "+
				"keep the old schema valid (keep fields and enum values, make new fields optional or give them a default) or serve the change as a new API version",
				e.from, e.to, strings.Join(e.how, ", "), b))
		}
	}
	return out
}

// storedVersionRemoval is crdify's check that a CRD keeps serving every
// version in status.storedVersions.
const storedVersionRemoval = "storedVersionRemoval"

// storedVersionAdvice explains an edge whose target no longer serves the
// version its source stores. The schema is not the cause, so the advice of
// other breaks does not apply: the way out depends on how the edge came to be.
func storedVersionAdvice(e upgradeEdge, b CRDBreak, fromCRDs, toCRDs []apiextensionsv1.CustomResourceDefinition) string {
	stored, storedNext := storageVersion(fromCRDs, b.CRD), storageVersion(toCRDs, b.CRD)
	msg := fmt.Sprintf("upgrade %s -> %s (%s) breaks %s: %s stores %s, which %s no longer serves, so OLM v1 refuses this upgrade on a cluster at %s "+
		"(CRD upgrade safety preflight: status.storedVersions lists %s); ",
		e.from, e.to, strings.Join(e.how, ", "), b, e.from, stored, e.to, e.from, stored)
	onlySkips := !slices.ContainsFunc(e.how, func(h string) bool { return !strings.HasPrefix(h, "skips ") })
	switch {
	case onlySkips:
		return msg + fmt.Sprintf("the release steps may well be the safe path (store %s, migrate, then stop serving %s), but this edge is not one of them: "+
			"the semver template makes the head of a channel skip every lower version of its major, so %s can be reached straight from %s. "+
			"A release that stops serving %s cannot share a major with one that stores it: ship %s as the next major, "+
			"and offer the upgrade with a bridge (channels/<package>.release.yaml bridges:, docs/catalog.md) whose skipRange starts at the first release that stores %s, "+
			"after the storage migration (docs/api-versions.md)", storedNext, stored, e.to, e.from, stored, e.to, storedNext)
	case slices.ContainsFunc(e.how, func(h string) bool { return strings.HasPrefix(h, "skipRange ") }):
		return msg + fmt.Sprintf("narrow the skipRange of %s (channels/<package>.release.yaml bridges:) so that it starts at the first release that stores %s, "+
			"which a cluster reaches, and migrates, before this upgrade (docs/api-versions.md)", e.to, storedNext)
	default:
		return msg + fmt.Sprintf("keep serving %s in %s: a release that stores %s comes first, the storage migration runs, and only a later release stops serving %s (docs/api-versions.md)",
			stored, e.to, storedNext, stored)
	}
}

// storageVersion is the storage version of the CRD named name in crds.
func storageVersion(crds []apiextensionsv1.CustomResourceDefinition, name string) string {
	for _, c := range crds {
		if c.Name != name {
			continue
		}
		for _, v := range c.Spec.Versions {
			if v.Storage {
				return v.Name
			}
		}
	}
	return "(none)"
}
