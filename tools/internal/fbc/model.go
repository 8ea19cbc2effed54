package fbc

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/blang/semver/v4"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
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
	// Entries are sorted by bundle version, lowest first.
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

// Load reads a catalog directory (e.g. catalog/) with operator-registry's
// loader and returns the upgrade graph of every package in it.
func Load(ctx context.Context, dir string) ([]Package, error) {
	cfg, err := declcfg.LoadFS(ctx, os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("load catalog %s: %w", dir, err)
	}
	return Graphs(*cfg)
}

// Graphs reduces a catalog to the upgrade graph of each package, sorted by name.
func Graphs(cfg declcfg.DeclarativeConfig) ([]Package, error) {
	var out []Package
	for _, p := range cfg.Packages {
		out = append(out, Package{Name: p.Name, DefaultChannel: p.DefaultChannel})
	}
	slices.SortFunc(out, func(a, b Package) int { return cmpString(a.Name, b.Name) })
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
			return nil, fmt.Errorf("bundle %q: %w", b.Name, err)
		}
		v, err := bundleVersion(b)
		if err != nil {
			return nil, fmt.Errorf("package %q: %w", b.Package, err)
		}
		p.Bundles = append(p.Bundles, Bundle{Name: b.Name, Image: b.Image, Version: v})
	}
	for i := range out {
		slices.SortFunc(out[i].Bundles, func(a, b Bundle) int { return a.Version.Compare(b.Version) })
	}
	for _, c := range cfg.Channels {
		p, err := find(c.Package)
		if err != nil {
			return nil, fmt.Errorf("channel %q: %w", c.Name, err)
		}
		ch := Channel{Name: c.Name}
		for _, e := range c.Entries {
			ch.Entries = append(ch.Entries, Entry{Name: e.Name, Replaces: e.Replaces, Skips: slices.Clone(e.Skips), SkipRange: e.SkipRange})
		}
		order := func(name string) int {
			return slices.IndexFunc(p.Bundles, func(b Bundle) bool { return b.Name == name })
		}
		slices.SortStableFunc(ch.Entries, func(a, b Entry) int { return order(a.Name) - order(b.Name) })
		p.Channels = append(p.Channels, ch)
	}
	for i := range out {
		slices.SortFunc(out[i].Channels, func(a, b Channel) int { return cmpString(a.Name, b.Name) })
	}
	for _, d := range cfg.Deprecations {
		p, err := find(d.Package)
		if err != nil {
			return nil, fmt.Errorf("olm.deprecations: %w", err)
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
	return out, nil
}
