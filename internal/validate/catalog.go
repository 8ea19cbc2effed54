// Catalog checks: operator-registry model validation plus the upgrade-graph
// checks it misses and the CRD upgrade safety of every edge; each
// CatalogFinding names package, channel and bundle.

package validate

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/blang/semver/v4"

	"github.com/operator-framework/operator-registry/alpha/declcfg"

	"github.com/inferencestack/inferencestack/internal/olmgraph"
)

// Rules a CatalogFinding can report.
const (
	// RuleModel is operator-registry's own model validation (one head per
	// channel, no cycles, no stranded bundles, consistent references).
	RuleModel = "model"
	// RuleSkippedInReplacesChain: a skipped bundle also replaces another; OLM
	// drops a skipped bundle's replaces edge (operator-registry#1762).
	RuleSkippedInReplacesChain = "skipped-in-replaces-chain"
	// RuleHeadNotHighest: the channel head is not its highest version.
	RuleHeadNotHighest = "head-not-highest"
	// RuleUnreachableFromPreviousHead: no upgrade path leads from the
	// previous head (second-highest version) to the highest version.
	RuleUnreachableFromPreviousHead = "unreachable-from-previous-head"
	// RuleDefaultChannelMissing: the package's default channel does not exist.
	RuleDefaultChannelMissing = "default-channel-missing"
	// RuleImageNotDigest: a bundle image is referenced by tag, not digest.
	RuleImageNotDigest = "image-not-digest"
)

// CatalogFinding is one problem in a catalog.
type CatalogFinding struct {
	Package string `json:"package"`
	Channel string `json:"channel,omitempty"`
	Bundle  string `json:"bundle,omitempty"`
	// From is the installed bundle of an upgrade edge to Bundle, for
	// findings about the edge (crd-upgrade-safety).
	From string `json:"from,omitempty"`
	// CRD and Field name the CRD and the schema property a
	// crd-upgrade-safety finding is about (Field empty for whole-CRD checks).
	CRD     string `json:"crd,omitempty"`
	Field   string `json:"field,omitempty"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// String renders the finding on one line: where, what, and the rule.
func (f CatalogFinding) String() string {
	where := []string{fmt.Sprintf("package %q", f.Package)}
	if f.Channel != "" {
		where = append(where, fmt.Sprintf("channel %q", f.Channel))
	}
	if f.Bundle != "" {
		where = append(where, fmt.Sprintf("bundle %q", f.Bundle))
	}
	return fmt.Sprintf("%s: %s [%s]", strings.Join(where, ", "), f.Message, f.Rule)
}

// Catalog validates the file-based catalog in a directory (e.g. catalog/).
type Catalog struct {
	// Dir is the catalog root; every package below it is checked.
	Dir string
	// RequireDigests reports bundle and related images that are not pinned
	// by digest (the publish gate).
	RequireDigests bool
	// Warnings, when set and RequireDigests is not, receives one line per
	// image named by tag.
	Warnings io.Writer
}

// Run loads the catalog and returns its findings, sorted. The error is only
// for a catalog that cannot be read or parsed at all.
func (c Catalog) Run(ctx context.Context) ([]CatalogFinding, error) {
	cfg, err := LoadCatalog(ctx, c.Dir)
	if err != nil {
		return nil, err
	}
	if len(cfg.Packages)+len(cfg.Channels)+len(cfg.Bundles)+len(cfg.Deprecations)+len(cfg.Others) == 0 {
		return nil, fmt.Errorf("catalog %s holds no file-based catalog objects (olm.package, olm.channel, olm.bundle): "+
			"give the catalog's root directory (catalog/, written by `bundlegen catalog`)", c.Dir)
	}
	if skipped := CRDCheckSkipped(*cfg); len(skipped) > 0 && c.Warnings != nil {
		fmt.Fprintf(c.Warnings, "note: catalog %s: %d bundle(s) carry no objects (olm.bundle.object; opm renders olm.csv.metadata instead), "+
			"so the CRD upgrade-safety check (crdify) was skipped for their upgrade edges (OLM v1 runs it on the cluster at upgrade time): %s\n",
			c.Dir, len(skipped), strings.Join(skipped, ", "))
	}
	if c.Warnings != nil && !c.RequireDigests {
		for _, f := range CatalogConfig(*cfg, true) {
			if f.Rule == RuleImageNotDigest {
				fmt.Fprintf(c.Warnings, "warning: %s\n", f)
			}
		}
	}
	return CatalogConfig(*cfg, c.RequireDigests), nil
}

// CatalogConfig validates an in-memory catalog; see Catalog.
func CatalogConfig(cfg declcfg.DeclarativeConfig, requireDigests bool) []CatalogFinding {
	findings := modelFindings(cfg)
	// A bundle whose version cannot be read is left out of the graphs; the
	// model findings name it.
	graphs, _ := olmgraph.Graphs(cfg)
	for _, p := range cfg.Packages {
		findings = append(findings, packageFindings(cfg, graphs, p, requireDigests)...)
		findings = append(findings, catalogInstallFindings(cfg, p.Name)...)
	}
	slices.SortFunc(findings, func(a, b CatalogFinding) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Channel, b.Channel),
			cmp.Compare(a.Bundle, b.Bundle), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.From, b.From),
			cmp.Compare(a.CRD, b.CRD), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(findings)
}

var (
	quotedPkg   = regexp.MustCompile(`package "([^"]+)"`)
	nodeLine    = regexp.MustCompile(`^invalid (index|package|channel|bundle)(?: "([^"]+)")?:$`)
	listedNames = regexp.MustCompile(`(?:stranded bundles|multiple channel heads found in graph|detected cycle in replaces chain of upgrade graph): ([^ ,]+)`)
)

// modelFindings runs operator-registry's conversion, which ends with model
// validation, and turns each leaf of its error tree into a finding that
// names the package, channel and bundle the leaf sits under.
func modelFindings(cfg declcfg.DeclarativeConfig) []CatalogFinding {
	_, err := declcfg.ConvertToModel(cfg)
	if err == nil {
		return nil
	}
	type node struct {
		depth      int
		kind, name string
	}
	var (
		out   []CatalogFinding
		stack []node
	)
	for _, line := range strings.Split(err.Error(), "\n") {
		text := strings.TrimLeft(line, "│├└─ ")
		if text == "" {
			continue
		}
		depth := utf8.RuneCountInString(line) - utf8.RuneCountInString(text)
		for len(stack) > 0 && stack[len(stack)-1].depth >= depth {
			stack = stack[:len(stack)-1]
		}
		if m := nodeLine.FindStringSubmatch(text); m != nil {
			stack = append(stack, node{depth: depth, kind: m[1], name: m[2]})
			continue
		}
		f := CatalogFinding{Rule: RuleModel, Message: text}
		for _, n := range stack {
			switch n.kind {
			case "package":
				f.Package = n.name
			case "channel":
				f.Channel = n.name
			case "bundle":
				f.Bundle = n.name
			}
		}
		if f.Package == "" {
			if m := quotedPkg.FindStringSubmatch(text); m != nil {
				f.Package = m[1]
			}
		}
		if f.Bundle == "" {
			if m := listedNames.FindStringSubmatch(text); m != nil {
				f.Bundle = m[1]
			}
		}
		out = append(out, f)
	}
	return out
}

func packageFindings(cfg declcfg.DeclarativeConfig, graphs []olmgraph.Package, p declcfg.Package, requireDigests bool) []CatalogFinding {
	var out []CatalogFinding
	var g olmgraph.Package
	if i := slices.IndexFunc(graphs, func(g olmgraph.Package) bool { return g.Name == p.Name }); i >= 0 {
		g = graphs[i]
	}
	channelNames := make([]string, 0, len(g.Channels))
	for _, ch := range g.Channels {
		channelNames = append(channelNames, ch.Name)
	}

	if p.DefaultChannel != "" && !slices.Contains(channelNames, p.DefaultChannel) {
		out = append(out, CatalogFinding{Package: p.Name, Channel: p.DefaultChannel, Rule: RuleDefaultChannelMissing,
			Message: fmt.Sprintf("default channel %q does not exist; set defaultChannel to one of %v", p.DefaultChannel, channelNames)})
	}

	for _, ch := range g.Channels {
		out = append(out, channelFindings(g, ch)...)
	}
	out = append(out, crdUpgradeFindings(cfg, g)...)

	if requireDigests {
		out = append(out, catalogDigests(cfg, p, func(bundle string) string {
			var in []string
			for _, ch := range g.Channels {
				if slices.ContainsFunc(ch.Entries, func(e olmgraph.Entry) bool { return e.Name == bundle }) {
					in = append(in, ch.Name)
				}
			}
			return strings.Join(in, ",")
		})...)
	}
	return out
}

func channelFindings(g olmgraph.Package, ch olmgraph.Channel) []CatalogFinding {
	var out []CatalogFinding
	versions := map[string]semver.Version{}
	for _, b := range g.Bundles {
		versions[b.Name] = b.Version
	}
	finding := func(bundle, rule, format string, args ...any) {
		out = append(out, CatalogFinding{Package: g.Name, Channel: ch.Name, Bundle: bundle, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	inChannel := map[string]bool{}
	skippedBy := map[string][]string{}
	incoming := map[string]bool{}
	for _, e := range ch.Entries {
		inChannel[e.Name] = true
		for _, s := range e.Skips {
			skippedBy[s] = append(skippedBy[s], e.Name)
			incoming[s] = true
		}
		if e.Replaces != "" {
			incoming[e.Replaces] = true
		}
	}

	// operator-registry#1762: a skipped bundle leaves the replaces chain, so
	// its own replaces edge is never followed.
	for _, e := range ch.Entries {
		by, skipped := skippedBy[e.Name]
		if !skipped || e.Replaces == "" || !inChannel[e.Replaces] {
			continue
		}
		// The replaced bundle depends on this edge unless something skips it
		// or a bundle that is not skipped replaces it.
		if _, ok := skippedBy[e.Replaces]; ok || replacedByUnskipped(ch, skippedBy, e.Replaces) {
			continue
		}
		{
			finding(e.Name, RuleSkippedInReplacesChain,
				"bundle %q is skipped by %s but also replaces %q: a skipped bundle leaves the replaces chain, so the upgrade edge from %q through %q is ignored (operator-registry#1762); drop %q from the skips or let %s replace %q",
				e.Name, strings.Join(by, ", "), e.Replaces, e.Replaces, e.Name, e.Name, by[0], e.Replaces)
		}
	}

	// Entries with a known version, highest first.
	var ordered []olmgraph.Entry
	for _, e := range ch.Entries {
		if _, ok := versions[e.Name]; ok {
			ordered = append(ordered, e)
		}
	}
	slices.SortFunc(ordered, func(a, b olmgraph.Entry) int { return versions[b.Name].Compare(versions[a.Name]) })
	if len(ordered) == 0 {
		return out
	}
	highest := ordered[0]

	var heads []string
	for _, e := range ch.Entries {
		if !incoming[e.Name] {
			heads = append(heads, e.Name)
		}
	}
	if len(heads) == 1 && heads[0] != highest.Name {
		if hv, ok := versions[heads[0]]; ok {
			finding(heads[0], RuleHeadNotHighest,
				"channel head %q (%s) is not the highest version: %q (%s) is higher, so OLM v0 would stop at the head; make %q replace or skip %q",
				heads[0], hv, highest.Name, versions[highest.Name], highest.Name, heads[0])
		}
	}

	if len(ordered) > 1 {
		prev := ordered[1]
		if !reachable(ch, versions, prev.Name, highest.Name) {
			finding(highest.Name, RuleUnreachableFromPreviousHead,
				"bundle %q is unreachable from the previous head %q: no replaces, skips or skipRange path leads from %s to %s, so installs of %q never upgrade to it; add %q to its replaces or skips, or a skipRange covering %s",
				highest.Name, prev.Name, versions[prev.Name], versions[highest.Name], prev.Name, prev.Name, versions[prev.Name])
		}
	}
	return out
}

func replacedByUnskipped(ch olmgraph.Channel, skippedBy map[string][]string, name string) bool {
	return slices.ContainsFunc(ch.Entries, func(e olmgraph.Entry) bool {
		_, skipped := skippedBy[e.Name]
		return e.Replaces == name && !skipped
	})
}

// reachable reports whether to can be reached from from by following the
// edges OLM v1 follows in this channel: a bundle's successors are the
// entries that accept an upgrade from it (olmgraph.Entry.Accepts).
func reachable(ch olmgraph.Channel, versions map[string]semver.Version, from, to string) bool {
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			return true
		}
		var version *semver.Version
		if v, ok := versions[cur]; ok {
			version = &v
		}
		for _, e := range ch.Entries {
			if seen[e.Name] || len(e.Accepts(cur, version)) == 0 {
				continue
			}
			seen[e.Name] = true
			queue = append(queue, e.Name)
		}
	}
	return false
}
