// Package rbac is the `bundlegen rbac` command and its subcommands.
package rbac

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/rbacdrift"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/repopath"
)

// NewCmd returns `bundlegen rbac`.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Check the operator's RBAC",
	}
	cmd.AddCommand(newCheckCmd())
	return cmd
}

type checkOptions struct {
	check  rbacdrift.Check
	output string
}

func newCheckCmd() *cobra.Command {
	o := checkOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Fail when the operator's RBAC cannot create its components' RBAC, or a bundle's permissions are stale",
		Long: `Check the operator's RBAC (role.yaml and its bindings) the way the API server will:

  coverage         the operator may create every RBAC object it creates for its components
                   (rendered by the component builders for a fixture stack), following the API
                   server's escalation prevention: create and patch on the object, and every rule
                   a role grants unless it holds escalate on the role, or bind on a binding's role;
  freshness        each bundle of the current release (bundle/*/<version>) carries exactly the
                   permissions of the RBAC manifests;
  least privilege  a report, never a failure: rules no component needs, that are not on a kind
                   the operator applies or its own API, and whose marker gives no reason
                   (a "// rbac: <why>" comment line right above the marker).

For each missing rule it prints the +kubebuilder:rbac marker that adds it.
Exit status: 0 when covered and fresh (unexplained rules, and a missing bundle of the highest
release when --version is not given, are reported only), 1 when a rule is missing or malformed,
a bundle is stale, the release named by --version has no release input or no bundle, or the
check cannot run.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "text" && o.output != "json" {
				return fmt.Errorf("--output %q: use text or json", o.output)
			}
			if err := repopath.Resolve(cmd, "rbac", "source", "applied-kinds", "releases", "bundles"); err != nil {
				return err
			}
			r, err := o.check.Run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.output == "json" {
				if err := jsonout.Write(out, r); err != nil {
					return err
				}
			} else {
				r.Print(out)
			}
			if r.Failed() {
				return fmt.Errorf("rbac check: %d missing rule(s), %d stale bundle field(s)", len(r.Missing), len(r.Stale))
			}
			if o.output == "text" {
				fresh := fmt.Sprintf("release %s's bundles are fresh", r.Version)
				switch {
				case r.Frozen:
					fresh = fmt.Sprintf("release %s is published: its bundles are frozen, not compared", r.Version)
				case len(r.Bundles) == 0:
					fresh = fmt.Sprintf("release %s has no bundle to compare", r.Version)
				}
				fmt.Fprintf(out, "rbac check: the operator's RBAC covers its components; %s\n", fresh)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.check.RBACDir, "rbac", "operator/config/rbac", "directory of role.yaml and its bindings")
	f.StringVar(&o.check.ServiceAccount, "service-account", "inferencestack-operator", "the operator's ServiceAccount")
	f.StringVar(&o.check.SourceDir, "source", "operator/internal", "Go sources holding the +kubebuilder:rbac markers")
	f.StringVar(&o.check.AppliedKinds, "applied-kinds", "operator/apply/kinds.go", "the apply package's list of the kinds the operator applies")
	f.StringVar(&o.check.ReleasesDir, "releases", "channels/releases", "directory of the <version>.yaml release inputs")
	f.StringVar(&o.check.BundleDir, "bundles", "bundle", "root of the bundle tree")
	f.StringVar(&o.check.Version, "version", "", "release whose bundles must exist and be fresh (default: the highest in --releases, whose bundles may be missing)")
	f.BoolVar(&o.check.RequireBundle, "require-bundle", false, "fail, rather than note, when the release has no bundle")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}
