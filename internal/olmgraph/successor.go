package olmgraph

import (
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
)

// Kind is the kind of an upgrade edge: how a channel entry names the bundles
// it upgrades.
type Kind string

// The edge kinds, in the order an entry's edges are listed.
const (
	Replaces  Kind = "replaces"
	Skips     Kind = "skips"
	SkipRange Kind = "skipRange"
)

// Accepts lists how entry e accepts an upgrade from the installed bundle
// named name at version: e replaces it, skips it, or its skipRange holds
// the version. This is OLM's successor rule (OLM v1 applies it to the
// entries of every channel of the package; it reads skipRange with
// blang/semver, as OLM v0 did). name is empty for a bundle the catalog does
// not hold, which only a skipRange can accept (replaces and skips name
// bundles); version is nil when unknown, which no skipRange holds. The kinds
// come in the order replaces, skips, skipRange; none means no edge.
func (e Entry) Accepts(name string, version *semver.Version) []Kind {
	var kinds []Kind
	if name != "" && e.Replaces == name {
		kinds = append(kinds, Replaces)
	}
	if name != "" && slices.Contains(e.Skips, name) {
		kinds = append(kinds, Skips)
	}
	if version != nil && e.SkipRange != "" {
		if r, err := semver.ParseRange(e.SkipRange); err == nil && r(*version) {
			kinds = append(kinds, SkipRange)
		}
	}
	return kinds
}

// How names an edge of kind k into e as users read it: replaces, skips, or
// skipRange with its range (skipRange ">=1.0.0 <2.0.0").
func (e Entry) How(k Kind) string {
	if k == SkipRange {
		return fmt.Sprintf("%s %q", k, e.SkipRange)
	}
	return string(k)
}

// Edge is a direct upgrade: an installed bundle From may move to To, whose
// entry in Channel accepts it by Kind.
type Edge struct {
	Channel  string
	From, To string
	Kind     Kind
	// How is Kind as users read it (To's entry's How).
	How string
}

// Edges lists every direct upgrade edge of the package: from each bundle of
// the package to each channel entry that accepts it (Entry.Accepts), once
// per kind that holds, never from a bundle to itself. A bundle is the source
// of an edge in any channel, not only in those that hold it, as in OLM v1.
// The order is stable: by channel and entry, then the entry's replaces, its
// skips in their order, and the bundles its skipRange holds, by version.
func (p Package) Edges() []Edge {
	var out []Edge
	for _, c := range p.Channels {
		for _, e := range c.Entries {
			add := func(from Bundle, k Kind) {
				if from.Name != e.Name && slices.Contains(e.Accepts(from.Name, &from.Version), k) {
					out = append(out, Edge{Channel: c.Name, From: from.Name, To: e.Name, Kind: k, How: e.How(k)})
				}
			}
			if b, ok := p.Bundle(e.Replaces); ok && e.Replaces != "" {
				add(b, Replaces)
			}
			for _, s := range e.Skips {
				if b, ok := p.Bundle(s); ok {
					add(b, Skips)
				}
			}
			for _, b := range p.Bundles {
				add(b, SkipRange)
			}
		}
	}
	return out
}
