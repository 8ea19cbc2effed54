package release

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Matrix is the compatibility of the releases' operators with the releases'
// CRD packages: which InferenceStack version each operator reads, which
// versions each CRD package serves and stores, and which releases are the
// heads of their package's channels in the catalog (what an install or an
// upgrade of a channel gets).
type Matrix struct {
	// Releases by version, lowest first.
	Releases []Input
	// OperatorHeads and CRDHeads map a release version to the channels of
	// the operator package and the CRD package it heads.
	OperatorHeads, CRDHeads map[string][]string
	// CRDEdges are the CRD package's upgrade edges (from, to versions).
	CRDEdges [][2]string
}

// LoadMatrix reads every release input in dir; heads maps a package's
// channels to their heads' versions (fbc.Heads), crdEdges are the CRD
// package's edges.
func LoadMatrix(dir string, operatorHeads, crdHeads map[string]string, crdEdges [][2]string) (Matrix, error) {
	versions, err := Versions(dir)
	if err != nil {
		return Matrix{}, err
	}
	m := Matrix{OperatorHeads: byHead(operatorHeads), CRDHeads: byHead(crdHeads), CRDEdges: crdEdges}
	for _, v := range versions {
		in, err := LoadInput(filepath.Join(dir, v.String()+".yaml"))
		if err != nil {
			return Matrix{}, err
		}
		m.Releases = append(m.Releases, in)
	}
	return m, nil
}

func byHead(heads map[string]string) map[string][]string {
	out := map[string][]string{}
	for ch, v := range heads {
		out[v] = append(out[v], ch)
	}
	for _, chs := range out {
		slices.Sort(chs)
	}
	return out
}

func (m Matrix) release(version string) (Input, bool) {
	i := slices.IndexFunc(m.Releases, func(in Input) bool { return in.Version == version })
	if i < 0 {
		return Input{}, false
	}
	return m.Releases[i], true
}

// Check refuses a catalog that strands a supported operator (the head of
// an operator channel) or stored objects:
//
//   - a CRD package channel head that does not serve the version a head
//     operator reads, and from which no chain of the CRD package's upgrade
//     edges leads to a release serving every version a head operator reads:
//     a cluster installed from that CRD channel can never run the operator
//     (a head CRD package that does not serve it but upgrades to one that
//     does is a "no" cell of the matrix with a way out: upgrade the CRD
//     package; so installing the newest CRD package never breaks a
//     supported operator);
//   - a CRD upgrade edge whose target no longer serves the version its
//     source stores (objects stored in it could not be read; OLM v1's
//     preflight refuses such an upgrade on a cluster whose
//     status.storedVersions lists it).
func (m Matrix) Check() error {
	var errs []error
	var read []string // every version a head operator reads
	for _, o := range slices.Sorted(maps.Keys(m.OperatorHeads)) {
		if op, ok := m.release(o); ok && !slices.Contains(read, op.API.Reads) {
			read = append(read, op.API.Reads)
		}
	}
	slices.Sort(read)
	for _, o := range slices.Sorted(maps.Keys(m.OperatorHeads)) {
		op, ok := m.release(o)
		if !ok {
			errs = append(errs, fmt.Errorf("operator %s heads channels %s but has no release input", o, strings.Join(m.OperatorHeads[o], ", ")))
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(m.CRDHeads)) {
			crd, ok := m.release(c)
			if !ok {
				errs = append(errs, fmt.Errorf("CRD package %s heads channels %s but has no release input", c, strings.Join(m.CRDHeads[c], ", ")))
				continue
			}
			if slices.Contains(crd.API.Served, op.API.Reads) || m.upgradesToServing(c, read) {
				continue
			}
			errs = append(errs, fmt.Errorf("operator %s (head of %s) reads InferenceStack %s (%s: api.reads), but CRD package %s (head of %s) serves only %s (%s: api.served), "+
				"and no upgrade edge of the CRD package leads from %s to a release that serves %s: a cluster installed from that CRD channel strands the operator. "+
				"Way out: add a bridge from %s to a CRD package release that serves %s (bridges in channels/inferencestack-crds.release.yaml, docs/catalog.md), "+
				"serve %s in %s, or leave operator %s out of the channels until the CRD package reaches it",
				o, strings.Join(m.OperatorHeads[o], ", "), op.API.Reads, op.Path, c, strings.Join(m.CRDHeads[c], ", "),
				strings.Join(crd.API.Served, ", "), crd.Path, c, strings.Join(read, " and "), c, strings.Join(read, " and "), op.API.Reads, c, o))
		}
	}
	for _, e := range m.CRDEdges {
		from, ok1 := m.release(e[0])
		to, ok2 := m.release(e[1])
		if !ok1 || !ok2 {
			continue // a bundle without a release input: bundle --check reports it
		}
		if !slices.Contains(to.API.Served, from.API.Storage) {
			errs = append(errs, fmt.Errorf("CRD package upgrade %s -> %s: %s stores InferenceStack %s, which %s does not serve (%s: api.served): objects stored in it would be unreadable, "+
				"and OLM v1 refuses the upgrade while status.storedVersions lists it; serve %s in %s, move storage first, and migrate (docs/api-versions.md)",
				e[0], e[1], e[0], from.API.Storage, e[1], to.Path, from.API.Storage, e[1]))
		}
	}
	return errors.Join(errs...)
}

// upgradesToServing says whether a chain of CRD upgrade edges leads from
// CRD package release from to one that serves every version of versions.
func (m Matrix) upgradesToServing(from string, versions []string) bool {
	seen := map[string]bool{from: true}
	next := []string{from}
	for len(next) > 0 {
		v := next[0]
		next = next[1:]
		for _, e := range m.CRDEdges {
			if e[0] != v || seen[e[1]] {
				continue
			}
			seen[e[1]] = true
			next = append(next, e[1])
			if to, ok := m.release(e[1]); ok && !slices.ContainsFunc(versions, func(r string) bool { return !slices.Contains(to.API.Served, r) }) {
				return true
			}
		}
	}
	return false
}

// Markdown is the matrix as a Markdown table: a row per operator release, a
// column per CRD package release, "yes" where the CRD package serves the
// version the operator reads.
func (m Matrix) Markdown() []byte {
	var b strings.Builder
	b.WriteString("<!-- Generated by `bundlegen matrix` from channels/releases and catalog/; do not edit (make release). -->\n")
	b.WriteString("# Compatibility of the operator and CRD package releases\n\n")
	b.WriteString("A row per operator release (the InferenceStack version it reads), a column per CRD package release\n")
	b.WriteString("(the versions it serves; the stored one in bold). \"yes\": the operator works with that CRD package.\n")
	b.WriteString("\"no\": that CRD package does not serve the version the operator reads; the operator waits, without\n")
	b.WriteString("crash-looping, until the CRD package is upgraded to one that does. Channel heads are named:\n")
	b.WriteString("`bundlegen catalog` refuses a catalog where a head operator's version is not served by a head CRD\n")
	b.WriteString("package from which no upgrade edge leads to a release that serves it. See docs/api-versions.md.\n\n")
	b.WriteString("| operator \\ CRD package |")
	for _, c := range m.Releases {
		var served []string
		for _, v := range c.API.Served {
			if v == c.API.Storage {
				v = "**" + v + "**"
			}
			served = append(served, v)
		}
		fmt.Fprintf(&b, " %s: %s%s |", c.Version, strings.Join(served, ", "), heads(m.CRDHeads[c.Version]))
	}
	b.WriteString("\n|---|")
	for range m.Releases {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, o := range m.Releases {
		fmt.Fprintf(&b, "| %s reads %s%s |", o.Version, o.API.Reads, heads(m.OperatorHeads[o.Version]))
		for _, c := range m.Releases {
			cell := "no"
			if slices.Contains(c.API.Served, o.API.Reads) {
				cell = "yes"
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	m.operandsMarkdown(&b)
	return []byte(b.String())
}

// operandsMarkdown writes what each operator release deploys: its Llama
// Stack (OGX from 0.8.0) release, the operand images of its pin, and the
// stacks it takes (docs/lines/ has a page per Llama Stack release).
func (m Matrix) operandsMarkdown(b *strings.Builder) {
	b.WriteString("\n## What each operator release deploys\n\n")
	b.WriteString("A row per operator release: the Llama Stack release of its operands (llamaStackVersion; the line's\n")
	b.WriteString("page under docs/lines/ says what changed for users and how a stack moves to the next major), the\n")
	b.WriteString("operand images of its pin by distribution (only those upstream publishes at that release; a stack\n")
	b.WriteString("naming another distribution is refused by that operator), and the InferenceStacks it reconciles\n")
	b.WriteString("(label inferencestack.io/operator-major).\n\n")
	b.WriteString("| operator | Llama Stack | operands | reconciles |\n|---|---|---|---|\n")
	for _, o := range m.Releases {
		var ops []string
		for _, d := range slices.Sorted(maps.Keys(o.Operands)) {
			ops = append(ops, fmt.Sprintf("%s: `%s`", d, o.Operands[d]))
		}
		stacks := fmt.Sprintf("labelled %q", strconv.FormatUint(o.SemVer().Major, 10))
		if o.TakesUnlabeled() {
			stacks += " and unlabelled"
		}
		fmt.Fprintf(b, "| %s | [%s](lines/%s.md) | %s | %s |\n", o.Version, o.LlamaStackVersion, o.LlamaStackVersion, strings.Join(ops, "<br>"), stacks)
	}
}

func heads(channels []string) string {
	if len(channels) == 0 {
		return ""
	}
	return " (head of " + strings.Join(channels, ", ") + ")"
}
