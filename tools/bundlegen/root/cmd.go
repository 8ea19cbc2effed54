// Package root assembles the bundlegen command from one package per verb.
package root

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferencestack/inferencestack/tools/bundlegen/bundle"
	"github.com/inferencestack/inferencestack/tools/bundlegen/catalog"
	"github.com/inferencestack/inferencestack/tools/bundlegen/documents"
	"github.com/inferencestack/inferencestack/tools/bundlegen/graph"
	"github.com/inferencestack/inferencestack/tools/bundlegen/image"
	"github.com/inferencestack/inferencestack/tools/bundlegen/matrix"
	"github.com/inferencestack/inferencestack/tools/bundlegen/pin"
	"github.com/inferencestack/inferencestack/tools/bundlegen/rbac"
	"github.com/inferencestack/inferencestack/tools/bundlegen/sign"
	"github.com/inferencestack/inferencestack/tools/bundlegen/upgrades"
	"github.com/inferencestack/inferencestack/tools/bundlegen/validate"
	"github.com/inferencestack/inferencestack/tools/bundlegen/verify"
)

// Main runs bundlegen with args (without the program name) and returns its
// exit code: 0 on success, 1 on any error, printed to stderr. SIGINT or
// SIGTERM cancels the context every verb runs with (a write past its commit
// point still finishes, see internal/atomicfs); a second one ends the
// process at once.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	cmd := NewCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

// NewCmd returns the bundlegen root command.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "bundlegen",
		Short:         "Cut Inference Stack operator releases: OLM bundles, catalog, images",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(bundle.NewCmd())
	cmd.AddCommand(pin.NewCmd())
	cmd.AddCommand(validate.NewCmd())
	cmd.AddCommand(catalog.NewCmd())
	cmd.AddCommand(graph.NewCmd())
	cmd.AddCommand(upgrades.NewCmd())
	cmd.AddCommand(matrix.NewCmd())
	cmd.AddCommand(image.NewCmd())
	cmd.AddCommand(rbac.NewCmd())
	cmd.AddCommand(documents.NewCmd())
	cmd.AddCommand(sign.NewCmd())
	cmd.AddCommand(verify.NewCmd())
	for _, c := range cmd.Commands() {
		requireSubcommand(c)
	}
	return cmd
}

// requireSubcommand makes every group verb below the root (a command that
// only holds subcommands, such as `validate` or `rbac`) fail when it is run
// without a subcommand or with one it does not know. Cobra checks unknown
// subcommands only at the root; below it, it prints the help and exits 0, so
// `bundlegen rbac chek` in a CI step would pass.
func requireSubcommand(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommand(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		choices := strings.Join(names, ", ")
		if len(args) == 0 {
			return fmt.Errorf("%s needs a subcommand: one of %s (see %s --help)", c.CommandPath(), choices, c.CommandPath())
		}
		hint := ""
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only for the root
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return fmt.Errorf("%s: unknown subcommand %q%s: use one of %s", c.CommandPath(), args[0], hint, choices)
	}
}
