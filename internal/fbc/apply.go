package fbc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/blang/semver/v4"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/pkg/image"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// Apply adds the catalog extras to a rendered single-package catalog: the
// default channel override, cross-major bridges (skipRange on channel
// entries) and an olm.deprecations blob. Every name it refers to must exist.
func (r CatalogExtras) Apply(cfg *declcfg.DeclarativeConfig) error {
	if len(cfg.Packages) != 1 {
		return fmt.Errorf("want exactly one olm.package, found %d", len(cfg.Packages))
	}
	pkg := &cfg.Packages[0]
	channelNames := make([]string, 0, len(cfg.Channels))
	for _, ch := range cfg.Channels {
		channelNames = append(channelNames, ch.Name)
	}
	byVersion := map[string]string{} // version -> bundle name
	for _, b := range cfg.Bundles {
		v, err := olmgraph.BundleVersion(b)
		if err != nil {
			return err
		}
		byVersion[v.String()] = b.Name
	}
	bundleName := func(field, v string) (string, error) {
		name, ok := byVersion[v]
		if !ok {
			return "", fmt.Errorf("%s: package %q has no bundle with version %q; known versions: %v", field, pkg.Name, v, slices.Sorted(maps.Keys(byVersion)))
		}
		return name, nil
	}

	for _, v := range slices.Sorted(maps.Keys(r.Images)) {
		if _, err := bundleName("images", v); err != nil {
			return err
		}
	}

	if r.DefaultChannel != "" {
		if !slices.Contains(channelNames, r.DefaultChannel) {
			return fmt.Errorf("defaultChannel: package %q has no channel %q; channels: %v", pkg.Name, r.DefaultChannel, channelNames)
		}
		pkg.DefaultChannel = r.DefaultChannel
	}

	for i, br := range r.Bridges {
		field := fmt.Sprintf("bridges[%d]", i)
		name, err := bundleName(field+".bundle", br.Bundle)
		if err != nil {
			return err
		}
		if err := checkUpward(field, br, byVersion); err != nil {
			return err
		}
		if err := checkAdmitsOlder(field, pkg.Name, br, byVersion); err != nil {
			return err
		}
		for _, c := range br.Channels {
			if !slices.Contains(channelNames, c) {
				return fmt.Errorf("%s.channels: package %q has no channel %q; channels: %v", field, pkg.Name, c, channelNames)
			}
		}
		applied := 0
		for ci := range cfg.Channels {
			ch := &cfg.Channels[ci]
			if len(br.Channels) > 0 && !slices.Contains(br.Channels, ch.Name) {
				continue
			}
			for ei := range ch.Entries {
				if ch.Entries[ei].Name != name {
					continue
				}
				if ch.Entries[ei].SkipRange != "" && ch.Entries[ei].SkipRange != br.SkipRange {
					return fmt.Errorf("%s: bundle %q in channel %q already has skipRange %q; give one bridge per bundle and channel", field, name, ch.Name, ch.Entries[ei].SkipRange)
				}
				ch.Entries[ei].SkipRange = br.SkipRange
				applied++
			}
		}
		if applied == 0 {
			return fmt.Errorf("%s: bundle %q is in none of the selected channels; add it to the semver template or fix bridges[%d].channels", field, name, i)
		}
	}

	var entries []declcfg.DeprecationEntry
	if msg := r.Deprecations.Package; msg != "" {
		entries = append(entries, declcfg.DeprecationEntry{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaPackage}, Message: msg})
	}
	for _, c := range slices.Sorted(maps.Keys(r.Deprecations.Channels)) {
		if !slices.Contains(channelNames, c) {
			return fmt.Errorf("deprecations.channels: package %q has no channel %q; channels: %v", pkg.Name, c, channelNames)
		}
		entries = append(entries, declcfg.DeprecationEntry{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaChannel, Name: c}, Message: r.Deprecations.Channels[c]})
	}
	bundleEntries := make([]declcfg.DeprecationEntry, 0, len(r.Deprecations.Bundles))
	for _, v := range slices.Sorted(maps.Keys(r.Deprecations.Bundles)) {
		name, err := bundleName("deprecations.bundles", v)
		if err != nil {
			return err
		}
		bundleEntries = append(bundleEntries, declcfg.DeprecationEntry{Reference: declcfg.PackageScopedReference{Schema: declcfg.SchemaBundle, Name: name}, Message: r.Deprecations.Bundles[v]})
	}
	slices.SortFunc(bundleEntries, func(a, b declcfg.DeprecationEntry) int { return cmp.Compare(a.Reference.Name, b.Reference.Name) })
	entries = append(entries, bundleEntries...)
	if len(entries) > 0 {
		cfg.Deprecations = []declcfg.Deprecation{{Schema: declcfg.SchemaDeprecation, Package: pkg.Name, Entries: entries}}
	}
	return nil
}

// checkUpward refuses a bridge whose skipRange admits a version at or above
// its bundle's: OLM would offer the bundle as an "upgrade" from a newer
// version (a downgrade edge). It tries the package's versions from the
// bundle's up and the next patch, minor and major versions and a huge one.
func checkUpward(field string, br Bridge, byVersion map[string]string) error {
	bv, err := semver.Parse(br.Bundle)
	if err != nil {
		return err
	}
	admits, err := semver.ParseRange(br.SkipRange)
	if err != nil {
		return err
	}
	probes := []semver.Version{
		bv,
		{Major: bv.Major, Minor: bv.Minor, Patch: bv.Patch + 1},
		{Major: bv.Major, Minor: bv.Minor + 1},
		{Major: math.MaxInt32},
	}
	// Every later major, as far as versions go in practice: a range such as
	// ">=7.0.0 <8.0.0" on bundle 2.0.0 admits 7.0.0.
	for m := bv.Major + 1; m <= bv.Major+1000; m++ {
		probes = append(probes, semver.Version{Major: m})
	}
	for v := range byVersion {
		if pv, err := semver.Parse(v); err == nil && pv.GTE(bv) {
			probes = append(probes, pv)
		}
	}
	slices.SortFunc(probes, func(a, b semver.Version) int { return a.Compare(b) })
	for _, p := range probes {
		if admits(p) {
			return fmt.Errorf("%s.skipRange (bundle %s, skipRange %q): the range admits %s, which is not below the bundle: OLM would offer %s as an upgrade from %s, a downgrade; "+
				"make the range end below %s, e.g. \"<%s\"", field, br.Bundle, br.SkipRange, p, br.Bundle, p, br.Bundle, br.Bundle)
		}
	}
	return nil
}

// checkAdmitsOlder refuses a bridge whose skipRange admits no version of the
// package below its bundle: it would add no upgrade edge at all (a typo such
// as ">=7.0.0 <8.0.0" for ">=1.0.0 <2.0.0").
func checkAdmitsOlder(field, pkg string, br Bridge, byVersion map[string]string) error {
	bv, err := semver.Parse(br.Bundle)
	if err != nil {
		return err
	}
	admits, err := semver.ParseRange(br.SkipRange)
	if err != nil {
		return err
	}
	var older []string
	for _, v := range slices.SortedFunc(maps.Keys(byVersion), func(a, b string) int { return semver.MustParse(a).Compare(semver.MustParse(b)) }) {
		pv := semver.MustParse(v)
		if pv.LT(bv) {
			if admits(pv) {
				return nil
			}
			older = append(older, v)
		}
	}
	return fmt.Errorf("%s.skipRange: %q admits no version of package %q below the bundle %s (versions below it: %v), so the bridge adds no upgrade edge: "+
		"write the range of the versions that upgrade to %s, e.g. \">=%d.0.0 <%s\"", field, br.SkipRange, pkg, br.Bundle, older, br.Bundle, max(bv.Major, 1)-1, br.Bundle)
}

// noRegistry refuses every image operation: catalogs render from bundle
// directories only, with no registry and no container engine.
type noRegistry struct{}

var errNoRegistry = errors.New("bundle images are not pulled here: reference bundle directories under bundle/")

func (noRegistry) Pull(context.Context, image.Reference) error { return errNoRegistry }
func (noRegistry) Unpack(context.Context, image.Reference, string) error {
	return errNoRegistry
}
func (noRegistry) Labels(context.Context, image.Reference) (map[string]string, error) {
	return nil, errNoRegistry
}
func (noRegistry) Destroy() error { return nil }
