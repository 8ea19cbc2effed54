package validate

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/internal/validate"
	"github.com/inferencestack/inferencestack/tools/bundlegen/internal/jsonout"
)

func newBundleCmd() *cobra.Command {
	var (
		v      validate.Bundle
		output string
	)
	cmd := &cobra.Command{
		Use:   "bundle <dir>...",
		Short: "Validate registry+v1 bundle directories",
		Long: `Run operator-framework/api's default bundle validators, the operatorhub and good-practices
suites, operator-registry's bundle format and content checks, and bundlegen's own rules (every
image in relatedImages, the pin matches the Deployment, permissions match --rbac, each image
named by tag is a warning, an error with --require-digests) on each bundle directory. Prints
one line per finding (severity, source, file, field, and what the finding is about in
brackets); every directory is validated even when an earlier one cannot be read.
Exit status: 0 when no bundle has an error, 1 when any has one or cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			failed := 0
			var reports []validate.Report
			for _, dir := range args {
				v.Dir = dir
				r, err := v.Run(cmd.Context())
				if err != nil {
					// One unreadable folder does not hide the findings of the others.
					r = validate.Report{Dir: dir, Findings: []validate.Finding{{Severity: validate.SeverityError, Source: "bundlegen", Message: err.Error()}}}
				}
				reports = append(reports, r)
				if r.HasErrors() {
					failed++
				}
			}
			switch output {
			case "json":
				if err := jsonout.Write(cmd.OutOrStdout(), reports); err != nil {
					return err
				}
			case "text":
				for _, r := range reports {
					r.Print(cmd.OutOrStdout())
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %d errors, %d findings\n", r.Dir, r.Errors(), len(r.Findings))
				}
			default:
				return fmt.Errorf("--output %q: want text or json", output)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d bundles have errors", failed, len(args))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&v.RBACDir, "rbac", "", "also check the CSV's permissions against the RBAC manifests in this directory")
	cmd.Flags().StringVar(&v.KubeVersion, "kube-version", "", "Kubernetes version for the removed-API checks")
	cmd.Flags().BoolVar(&v.RequireDigests, "require-digests", false, "the publish gate: an image named by tag is an error, not a warning")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
