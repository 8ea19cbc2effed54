// Package olmgraph is the upgrade graph OLM v1 reads from a file-based
// catalog: each package's channels, their entries with the edges into them
// (replaces, skips, skipRange), its bundles' versions and the deprecations;
// and the one successor rule that the graph drawing (internal/graph),
// the upgrade planner (internal/upgrades) and the catalog validator
// (internal/validate) share.
//
// It takes a catalog operator-registry has already loaded (declcfg) and
// reads it with operator-registry's own property parser; it renders, loads
// and pulls nothing. operator-registry's model (declcfg.ConvertToModel) is
// not the base: it refuses a whole catalog on its first invalid package,
// while the validator must still analyse the edges of such a catalog (a
// second channel head, a stranded bundle) and the graph and upgrade tools
// read catalogs as OLM v1 does, which serves them without that validation.
package olmgraph

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/blang/semver/v4"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
)

// Package is the upgrade graph of one package: what OLM v1 reads from a
// catalog to choose upgrades, without the bundle contents.
type Package struct {
	Name           string
	DefaultChannel string
	// Deprecated is the package's deprecation message, empty if not deprecated.
	Deprecated string
	// Channels are sorted by name.
	Channels []Channel
	// Bundles are sorted by version, lowest first.
	Bundles []Bundle
}

// Channel is one channel's entries and their upgrade edges.
type Channel struct {
	Name       string
	Deprecated string
	// Entries are sorted by bundle version, lowest first (entries without a
	// bundle of known version first).
	Entries []Entry
}

// Entry is a bundle's membership in a channel with its incoming edges.
type Entry struct {
	Name      string
	Replaces  string
	Skips     []string
	SkipRange string
}

// Bundle is a bundle's identity.
type Bundle struct {
	Name       string
	Image      string
	Version    semver.Version
	Deprecated string
}

// Bundle returns the named bundle, or false.
func (p Package) Bundle(name string) (Bundle, bool) {
	i := slices.IndexFunc(p.Bundles, func(b Bundle) bool { return b.Name == name })
	if i < 0 {
		return Bundle{}, false
	}
	return p.Bundles[i], true
}

// Channel returns the named channel, or false.
func (p Package) Channel(name string) (Channel, bool) {
	i := slices.IndexFunc(p.Channels, func(c Channel) bool { return c.Name == name })
	if i < 0 {
		return Channel{}, false
	}
	return p.Channels[i], true
}

// BundleVersion reads a bundle's version from its olm.package property.
func BundleVersion(b declcfg.Bundle) (semver.Version, error) {
	props, err := property.Parse(b.Properties)
	if err != nil {
		return semver.Version{}, fmt.Errorf("bundle %q: %w", b.Name, err)
	}
	if len(props.Packages) != 1 {
		return semver.Version{}, fmt.Errorf("bundle %q: want exactly one olm.package property, found %d", b.Name, len(props.Packages))
	}
	v, err := semver.Parse(props.Packages[0].Version)
	if err != nil {
		return semver.Version{}, fmt.Errorf("bundle %q: version %q: %w", b.Name, props.Packages[0].Version, err)
	}
	return v, nil
}

// Graphs reduces a catalog to the upgrade graph of each package, sorted by
// name. It reads all it can: a bundle whose version cannot be read, and a
// channel, bundle or deprecation of a package the catalog does not declare,
// are left out of the graphs and named in the error, which comes with the
// graphs of everything else.
func Graphs(cfg declcfg.DeclarativeConfig) ([]Package, error) {
	var (
		out  []Package
		errs []error
	)
	for _, p := range cfg.Packages {
		out = append(out, Package{Name: p.Name, DefaultChannel: p.DefaultChannel})
	}
	slices.SortFunc(out, func(a, b Package) int { return cmp.Compare(a.Name, b.Name) })
	find := func(name string) (*Package, error) {
		i := slices.IndexFunc(out, func(p Package) bool { return p.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("package %q is referenced but has no olm.package", name)
		}
		return &out[i], nil
	}
	for _, b := range cfg.Bundles {
		p, err := find(b.Package)
		if err != nil {
			errs = append(errs, fmt.Errorf("bundle %q: %w", b.Name, err))
			continue
		}
		v, err := BundleVersion(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("package %q: %w", b.Package, err))
			continue
		}
		p.Bundles = append(p.Bundles, Bundle{Name: b.Name, Image: b.Image, Version: v})
	}
	for i := range out {
		slices.SortFunc(out[i].Bundles, func(a, b Bundle) int { return a.Version.Compare(b.Version) })
	}
	orders := map[string]map[string]int{}
	for _, c := range cfg.Channels {
		p, err := find(c.Package)
		if err != nil {
			errs = append(errs, fmt.Errorf("channel %q: %w", c.Name, err))
			continue
		}
		ch := Channel{Name: c.Name}
		for _, e := range c.Entries {
			ch.Entries = append(ch.Entries, Entry{Name: e.Name, Replaces: e.Replaces, Skips: slices.Clone(e.Skips), SkipRange: e.SkipRange})
		}
		// The bundles' positions, by name, once per package: a lookup per
		// comparison would make the sort quadratic in a long channel.
		pos, ok := orders[p.Name]
		if !ok {
			pos = make(map[string]int, len(p.Bundles))
			for i, b := range p.Bundles {
				pos[b.Name] = i
			}
			orders[p.Name] = pos
		}
		order := func(name string) int {
			if i, ok := pos[name]; ok {
				return i
			}
			return -1
		}
		slices.SortStableFunc(ch.Entries, func(a, b Entry) int { return order(a.Name) - order(b.Name) })
		p.Channels = append(p.Channels, ch)
	}
	for i := range out {
		slices.SortFunc(out[i].Channels, func(a, b Channel) int { return cmp.Compare(a.Name, b.Name) })
	}
	for _, d := range cfg.Deprecations {
		p, err := find(d.Package)
		if err != nil {
			errs = append(errs, fmt.Errorf("olm.deprecations: %w", err))
			continue
		}
		for _, e := range d.Entries {
			switch e.Reference.Schema {
			case declcfg.SchemaPackage:
				p.Deprecated = e.Message
			case declcfg.SchemaChannel:
				for ci := range p.Channels {
					if p.Channels[ci].Name == e.Reference.Name {
						p.Channels[ci].Deprecated = e.Message
					}
				}
			case declcfg.SchemaBundle:
				for bi := range p.Bundles {
					if p.Bundles[bi].Name == e.Reference.Name {
						p.Bundles[bi].Deprecated = e.Message
					}
				}
			}
		}
	}
	return out, errors.Join(errs...)
}
