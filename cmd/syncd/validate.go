package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/oauth"
)

func newValidateCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "validate",
		Short:   "Check the config, the API key, the forms, the output (a probe write) and the state store",
		Long:    help("validate.long"),
		Example: help("validate.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			// Each check's line is printed as it ends; under -o json, it is
			// collected, and printed as JSON at the end.
			var lines strings.Builder
			report := func(c app.Check) { fmt.Fprintln(g.stdout, c.Line()) }
			if format == formatJSON {
				report = func(c app.Check) { fmt.Fprintln(&lines, c.Line()) }
			}
			failed, err := validate(cmd.Context(), g, report)
			if err != nil {
				return err
			}
			if format == formatJSON {
				if err := printJSON(g.stdout, app.ChecksJSON(lines.String())); err != nil {
					return err
				}
			}
			if failed > 0 {
				return withCode(exitFailed, errReported)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// validate loads the configuration and runs app's checks of it; failed
// counts those that failed.
func validate(ctx context.Context, g *globals, report func(app.Check)) (failed int, err error) {
	cfg, log, err := g.load()
	if err != nil {
		return 0, err
	}
	report(app.Check{Status: app.CheckOK, Text: "config"})
	v := app.Validation{
		Config:   cfg,
		Accounts: g.accounts,
		Log:      log,
		State:    func(ctx context.Context) (stateView, error) { return readState(ctx, cfg, "") },
		SignIn: func(ctx context.Context, namespace string) (oauth.Token, bool, error) {
			return control.SignInStatus(ctx, cfg, namespace, log)
		},
	}
	if failed, err = v.Validate(ctx, report); err != nil {
		return 0, withCode(exitUsage, err)
	}
	return failed, nil
}
