// Package upgrades computes the upgrade path OLM v1 (operator-controller)
// would take from an installed bundle version, by the same rules as its
// resolver: a candidate must be a successor of the installed bundle by a
// catalog edge (replaces, skips or skipRange, in any channel of the package)
// or the installed version itself; it must sit in one of the requested
// channels and inside the requested version range (Masterminds/semver
// constraints, as in ClusterExtension spec.source.catalog.version);
// candidates are ordered non-deprecated first, then highest version first,
// and the first one wins. Repeating that step until nothing changes gives the
// path, one hop per resolution.
//
// Versions are ordered as OLM v1.11 orders registry+v1 bundles: by semver
// precedence, then by the release that build metadata holds (1.0.0+2 is
// after 1.0.0+1, which is after 1.0.0); OLM v1.5 to v1.10 ignore build
// metadata, so Result.Notes names the bundles they would tie. An installed
// version missing from the catalog moves on only through a skipRange that
// holds it, as in OLM v1: replaces and skips name the installed bundle, whose
// name the catalog does not know.
package upgrades

import (
	"context"
	"fmt"
	"slices"
	"strings"

	mmsemver "github.com/Masterminds/semver/v3"
	"github.com/blang/semver/v4"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// Upgrades asks for the path from one installed version.
type Upgrades struct {
	// Package is the package's upgrade graph (see fbc.Load).
	Package olmgraph.Package
	// From is the installed bundle version, e.g. "1.0.0".
	From string
	// Channels restricts candidates to bundles in these channels, like
	// ClusterExtension spec.source.catalog.channels. Empty means all.
	Channels []string
	// VersionRange restricts candidates like spec.source.catalog.version,
	// e.g. "1.x" or ">=1.0.0 <2.0.0". Empty means any.
	VersionRange string
}

// Step is one resolution: the bundle OLM v1 moves to and the edge it uses.
type Step struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Version string `json:"version"`
	// Edge says how To is a successor of From, e.g. `replaces in stable-v1`.
	Edge       string `json:"edge"`
	Deprecated bool   `json:"deprecated,omitempty"`
}

// Unreachable is a newer bundle the path does not reach, and why.
type Unreachable struct {
	Bundle  string `json:"bundle"`
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// Result is the path and what it cannot reach.
type Result struct {
	Package string `json:"package"`
	// FromVersion is the installed version.
	FromVersion string `json:"fromVersion"`
	// Installed is the starting bundle name; empty when the catalog has no
	// bundle of FromVersion.
	Installed string `json:"installed"`
	Path      []Step `json:"path"`
	// Final is the bundle the path ends on: the newest one reachable (the
	// installed one when nothing newer is).
	Final       string        `json:"final"`
	Unreachable []Unreachable `json:"unreachable,omitempty"`
	// Notes are facts about the answer that differ between OLM v1 versions.
	Notes []string `json:"notes,omitempty"`
}

// Run computes the path.
func (u Upgrades) Run(_ context.Context) (Result, error) {
	p := u.Package
	from, err := semver.Parse(strings.TrimPrefix(u.From, "v"))
	if err != nil {
		return Result{}, fmt.Errorf("--from %q is not a semver version: %w", u.From, err)
	}
	for _, c := range u.Channels {
		if c == "" {
			return Result{}, fmt.Errorf("--channel \"\": an empty channel name; give one of the channels of package %q: %s, or leave --channel out for all", p.Name, channelNames(p))
		}
		if _, ok := p.Channel(c); !ok {
			return Result{}, fmt.Errorf("package %q has no channel %q; channels: %s", p.Name, c, channelNames(p))
		}
	}
	var constraint *mmsemver.Constraints
	if u.VersionRange != "" {
		constraint, err = mmsemver.NewConstraint(u.VersionRange)
		if err != nil {
			return Result{}, fmt.Errorf("--version-range %q is not a valid range (e.g. \"1.x\", \">=1.0.0 <2.0.0\"): %w", u.VersionRange, err)
		}
	}
	if constraint != nil && len(p.Bundles) > 0 && !slices.ContainsFunc(p.Bundles, func(b olmgraph.Bundle) bool { return u.inChannels(b) && inRange(b, constraint) }) {
		where := "of the package"
		if len(u.Channels) > 0 {
			where = fmt.Sprintf("in the channels %s", strings.Join(u.Channels, ", "))
		}
		return Result{}, fmt.Errorf("--version-range %q admits no bundle %s (versions: %s): OLM v1 would find nothing to resolve; "+
			"give a range that holds one of them, e.g. \"%d.x\"", u.VersionRange, where, versions(u.candidates()), u.candidates()[len(u.candidates())-1].Version.Major)
	}

	res := Result{Package: p.Name, FromVersion: from.String(), Notes: ties(p)}
	// The installed bundle: the catalog's bundle of that version and
	// release, or one the catalog does not hold (no name).
	cur := olmgraph.Bundle{Version: from}
	if idx := slices.IndexFunc(p.Bundles, func(b olmgraph.Bundle) bool { return compareVersions(b.Version, from) == 0 }); idx >= 0 {
		cur = p.Bundles[idx]
	}
	res.Installed = cur.Name
	for range len(p.Bundles) {
		next, edge := u.resolve(cur, constraint)
		if next.Name == cur.Name {
			break
		}
		res.Path = append(res.Path, Step{From: cur.Name, To: next.Name, Version: next.Version.String(), Edge: edge, Deprecated: next.Deprecated != ""})
		cur = next
	}
	if res.Installed == "" {
		if len(res.Path) == 0 {
			if held := u.heldBy(from, constraint); held != "" {
				return Result{}, fmt.Errorf("package %q has no bundle with version %s; %s: OLM v1 keeps %s installed; widen --channel or --version-range", p.Name, from, held, from)
			}
			return Result{}, fmt.Errorf("package %q has no bundle with version %s, and no skipRange in its channels holds %s: "+
				"OLM v1 cannot resolve an upgrade from it (replaces and skips name the installed bundle, which the catalog lacks) and keeps it installed; versions: %s",
				p.Name, from, from, versions(p.Bundles))
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s is not in the catalog: only a skipRange that holds it leads on from it (OLM v1 matches replaces and skips by the installed bundle's name)", from))
	}
	res.Final = cur.Name

	for _, b := range p.Bundles {
		if compareVersions(b.Version, cur.Version) <= 0 {
			continue
		}
		res.Unreachable = append(res.Unreachable, Unreachable{Bundle: b.Name, Version: b.Version.String(), Reason: u.why(cur, b, constraint)})
	}
	return res, nil
}

// resolve is one OLM v1 resolution from installed; it returns installed
// itself when no successor qualifies.
func (u Upgrades) resolve(installed olmgraph.Bundle, constraint *mmsemver.Constraints) (olmgraph.Bundle, string) {
	var candidates []olmgraph.Bundle
	edges := map[string]string{}
	for _, b := range u.Package.Bundles {
		if !u.inChannels(b) || !inRange(b, constraint) {
			continue
		}
		// OLM v1 keeps the installed version and release among the candidates.
		if b.Name == installed.Name || compareVersions(b.Version, installed.Version) == 0 {
			candidates = append(candidates, b)
			continue
		}
		if edge := successorEdge(u.Package, installed, b); edge != "" {
			candidates = append(candidates, b)
			edges[b.Name] = edge
		}
	}
	if len(candidates) == 0 {
		return installed, ""
	}
	slices.SortStableFunc(candidates, func(a, b olmgraph.Bundle) int {
		if ad, bd := a.Deprecated != "", b.Deprecated != ""; ad != bd {
			if ad {
				return 1
			}
			return -1
		}
		return compareVersions(b.Version, a.Version)
	})
	return candidates[0], edges[candidates[0].Name]
}

// candidates are the bundles in the requested channels (all when none are
// requested), lowest version first.
func (u Upgrades) candidates() []olmgraph.Bundle {
	var out []olmgraph.Bundle
	for _, b := range u.Package.Bundles {
		if u.inChannels(b) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return u.Package.Bundles
	}
	return out
}

// heldBy says which skipRanges hold version from and what excludes their
// bundles (the requested channels or version range), or "" when none holds it.
func (u Upgrades) heldBy(from semver.Version, constraint *mmsemver.Constraints) string {
	var out []string
	for _, c := range u.Package.Channels {
		for _, e := range c.Entries {
			if !slices.Contains(e.Accepts("", &from), olmgraph.SkipRange) {
				continue
			}
			b, ok := u.Package.Bundle(e.Name)
			if !ok {
				continue
			}
			var why []string
			if !u.inChannels(b) {
				why = append(why, fmt.Sprintf("it is in none of the requested channels %s", strings.Join(u.Channels, ", ")))
			}
			if !inRange(b, constraint) {
				why = append(why, fmt.Sprintf("its version %s is outside --version-range %q", b.Version, u.VersionRange))
			}
			out = append(out, fmt.Sprintf("skipRange %q of bundle %s in channel %s holds %s, but %s", e.SkipRange, b.Name, c.Name, from, strings.Join(why, " and ")))
		}
	}
	return strings.Join(out, "; ")
}

// release is the release OLM v1.11 reads from a registry+v1 bundle version's
// build metadata, nil when it holds none (operator-controller bundleutil
// ParseLegacyVersionRelease, with operator-registry's model.NewRelease rules:
// at most 20 characters of dot-separated pre-release identifiers). Build
// metadata that is no release (01, or too long) is ignored, as semver does.
func release(v semver.Version) []semver.PRVersion {
	build := strings.Join(v.Build, ".")
	if build == "" || len(build) > 20 {
		return nil
	}
	var r []semver.PRVersion
	for _, seg := range v.Build {
		pr, err := semver.NewPRVersion(seg)
		if err != nil {
			return nil
		}
		r = append(r, pr)
	}
	return r
}

// compareVersions orders two bundle versions as OLM v1.11 does: semver
// precedence, then release (none before any, else compared as pre-release
// identifiers: 1.0.0+1 < 1.0.0+2 < 1.0.0+10).
func compareVersions(a, b semver.Version) int {
	if c := a.Compare(b); c != 0 {
		return c
	}
	ra, rb := release(a), release(b)
	switch {
	case len(ra) == 0 && len(rb) == 0:
		return 0
	case len(ra) == 0:
		return -1
	case len(rb) == 0:
		return 1
	}
	return semver.Version{Pre: ra}.Compare(semver.Version{Pre: rb})
}

// ties names the bundles whose versions differ only in build metadata:
// ordered by release here and by OLM v1.11, but equal for OLM v1.5 to v1.10,
// which then pick by catalog order.
func ties(p olmgraph.Package) []string {
	var out []string
	for i, a := range p.Bundles {
		for _, b := range p.Bundles[i+1:] {
			if a.Version.Compare(b.Version) == 0 && compareVersions(a.Version, b.Version) != 0 {
				lo, hi := a, b
				if compareVersions(a.Version, b.Version) > 0 {
					lo, hi = b, a
				}
				out = append(out, fmt.Sprintf("%s (%s) and %s (%s) differ only in build metadata: OLM v1.11 and later read it as a release and rank %s higher, as here; "+
					"OLM v1.5 to v1.10 compare them as equal and take whichever the catalog lists first", hi.Name, hi.Version, lo.Name, lo.Version, hi.Version))
			}
		}
	}
	return out
}

func (u Upgrades) inChannels(b olmgraph.Bundle) bool {
	if len(u.Channels) == 0 {
		return true
	}
	for _, c := range u.Package.Channels {
		if slices.Contains(u.Channels, c.Name) && slices.ContainsFunc(c.Entries, func(e olmgraph.Entry) bool { return e.Name == b.Name }) {
			return true
		}
	}
	return false
}

func inRange(b olmgraph.Bundle, constraint *mmsemver.Constraints) bool {
	if constraint == nil {
		return true
	}
	v, err := mmsemver.NewVersion(b.Version.String())
	return err == nil && constraint.Check(v)
}

// successorEdge returns how candidate succeeds installed (the first kind of
// olmgraph.Entry.Accepts), naming every channel that holds the edge (OLM v1
// reads edges from all channels), or "".
func successorEdge(p olmgraph.Package, installed, candidate olmgraph.Bundle) string {
	var kinds []string
	channels := map[string][]string{}
	for _, c := range p.Channels {
		for _, e := range c.Entries {
			if e.Name != candidate.Name {
				continue
			}
			accepts := e.Accepts(installed.Name, &installed.Version)
			if len(accepts) == 0 {
				continue
			}
			kind := e.How(accepts[0])
			if !slices.Contains(kinds, kind) {
				kinds = append(kinds, kind)
			}
			channels[kind] = append(channels[kind], c.Name)
		}
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, k+" in "+strings.Join(channels[k], ", "))
	}
	return strings.Join(parts, "; ")
}

// why explains why target is not reached from final, the path's end.
func (u Upgrades) why(final, target olmgraph.Bundle, constraint *mmsemver.Constraints) string {
	if !u.inChannels(target) {
		return fmt.Sprintf("not in the requested channels %v", u.Channels)
	}
	if !inRange(target, constraint) {
		return fmt.Sprintf("outside the version range %q", u.VersionRange)
	}
	if edge := successorEdge(u.Package, final, target); edge != "" {
		// A direct edge exists but a better candidate won.
		return fmt.Sprintf("a successor of %s (%s), but OLM v1 prefers non-deprecated and higher versions and ends on %s", final.Name, edge, final.Name)
	}
	var edges []string
	for _, c := range u.Package.Channels {
		for _, e := range c.Entries {
			if e.Name != target.Name {
				continue
			}
			var parts []string
			if e.Replaces != "" {
				parts = append(parts, "replaces "+e.Replaces)
			}
			if len(e.Skips) > 0 {
				parts = append(parts, "skips "+strings.Join(e.Skips, ", "))
			}
			if e.SkipRange != "" {
				parts = append(parts, fmt.Sprintf("skipRange %q", e.SkipRange))
			}
			if len(parts) == 0 {
				parts = append(parts, "no incoming edges")
			}
			edges = append(edges, c.Name+": "+strings.Join(parts, "; "))
		}
	}
	reason := fmt.Sprintf("no replaces, skips or skipRange edge leads from %s (%s) to it (%s)", final.Name, final.Version, strings.Join(edges, " | "))
	if target.Version.Major != final.Version.Major {
		reason += fmt.Sprintf("; the semver template never links major versions: add a bridge (skipRange) to the first %d.x bundle in channels/%s.release.yaml, or use the ClusterExtension's upgradeConstraintPolicy: SelfCertified", target.Version.Major, u.Package.Name)
	}
	return reason
}

func versions(bs []olmgraph.Bundle) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Version.String())
	}
	return strings.Join(out, ", ")
}

func channelNames(p olmgraph.Package) string {
	var out []string
	for _, c := range p.Channels {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}
