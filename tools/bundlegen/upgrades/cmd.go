// Package upgrades is the `bundlegen upgrades` command: it prints the
// upgrade path OLM v1 would take from an installed version.
package upgrades

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/fbc"
	"github.com/inferencestack/inferencestack/internal/olmgraph"
	"github.com/inferencestack/inferencestack/internal/upgrades"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

// defaultPackage is the package users install; inferencestack-crds follows it.
const defaultPackage = "inferencestack-operator"

type options struct {
	catalog, pkg, from, versionRange, output string
	channels                                 []string
}

// NewCmd returns the upgrades command.
func NewCmd() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "upgrades --from VERSION [--package P] [--channel C]... [--version-range R]",
		Short: "Print the upgrade path OLM v1 would take from an installed version",
		Long: `Print the path OLM v1 (operator-controller) would take from an installed bundle
version to the newest one it can reach, one resolution at a time, following only
catalog edges (replaces, skips, skipRange in any channel), preferring non-deprecated,
then higher versions. --channel and --version-range act like a ClusterExtension's
spec.source.catalog.channels and .version (Masterminds/semver constraints).
Newer bundles that are not reached are listed with the reason. A --from version
the catalog lacks moves on only through a skipRange that holds it (OLM v1 matches
replaces and skips by the installed bundle's name); versions that differ only in
build metadata are ordered as OLM v1.11 orders them (the build metadata is a
release: 1.0.0+2 after 1.0.0+1 after 1.0.0), with a note where older OLM v1
versions would see a tie.
Exit status: 0 with a path (possibly empty), 1 when --from is neither in the
catalog nor held by a skipRange, or on bad input.`,
		Example: `  bundlegen upgrades --from 1.0.0
  bundlegen upgrades --package inferencestack-operator --from 1.0.0 --version-range 1.x -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output %q: use text or json", o.output)
			}
			if err := repopath.Resolve(cmd, "catalog"); err != nil {
				return err
			}
			pkgs, err := fbc.Load(cmd.Context(), o.catalog)
			if err != nil {
				return err
			}
			p, err := pick(pkgs, o.pkg, cmd.Flags().Changed("package"))
			if err != nil {
				return fmt.Errorf("catalog %s: %w", o.catalog, err)
			}
			if cmd.Flags().Changed("channel") && len(o.channels) == 0 {
				return fmt.Errorf("--channel \"\": an empty channel name; give a channel of the package, or leave --channel out for all")
			}
			res, err := upgrades.Upgrades{Package: p, From: o.from, Channels: o.channels, VersionRange: o.versionRange}.Run(cmd.Context())
			if err != nil {
				return err
			}
			if o.output == "json" {
				return jsonout.Write(cmd.OutOrStdout(), res)
			}
			printText(cmd.OutOrStdout(), p, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.catalog, "catalog", "catalog", "catalog directory to read")
	cmd.Flags().StringVar(&o.pkg, "package", defaultPackage, "package name (a single-package catalog needs none)")
	cmd.Flags().StringVar(&o.from, "from", "", "installed bundle version, e.g. 1.0.0")
	cmd.Flags().StringSliceVar(&o.channels, "channel", nil, "only consider bundles in these channels")
	cmd.Flags().StringVar(&o.versionRange, "version-range", "", `version constraint, e.g. "1.x" or ">=1.0.0 <2.0.0"`)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// pick finds the package; without --package a single-package catalog needs
// no name, else the default (the operator package) applies.
func pick(pkgs []olmgraph.Package, name string, explicit bool) (olmgraph.Package, error) {
	var names []string
	for _, p := range pkgs {
		names = append(names, p.Name)
	}
	if len(pkgs) == 0 {
		return olmgraph.Package{}, fmt.Errorf("no package (olm.package): give the catalog's root directory with --catalog (catalog/, written by `bundlegen catalog`)")
	}
	if !explicit && len(pkgs) == 1 {
		return pkgs[0], nil
	}
	i := slices.IndexFunc(pkgs, func(p olmgraph.Package) bool { return p.Name == name })
	if i < 0 {
		return olmgraph.Package{}, fmt.Errorf("no package %q; choose one of %v with --package", name, names)
	}
	return pkgs[i], nil
}

func printText(w io.Writer, p olmgraph.Package, res upgrades.Result) {
	ver := func(name string) string {
		if b, ok := p.Bundle(name); ok {
			return b.Version.String()
		}
		return name
	}
	installed := "not in the catalog"
	if res.Installed != "" {
		installed = res.Installed
	}
	fmt.Fprintf(w, "package %s, installed %s (%s)\n", res.Package, res.FromVersion, installed)
	if len(res.Path) == 0 {
		fmt.Fprintln(w, "no upgrade: nothing newer is reachable")
	}
	for _, s := range res.Path {
		dep := ""
		if s.Deprecated {
			dep = " [deprecated]"
		}
		from := res.FromVersion
		if s.From != "" {
			from = ver(s.From)
		}
		fmt.Fprintf(w, "  %s -> %s  via %s%s\n", from, s.Version, s.Edge, dep)
	}
	fmt.Fprintf(w, "newest reachable: %s (%s)\n", ver(res.Final), res.Final)
	if len(res.Unreachable) > 0 {
		fmt.Fprintln(w, "not reachable:")
		for _, u := range res.Unreachable {
			fmt.Fprintf(w, "  %s: %s\n", u.Version, u.Reason)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
