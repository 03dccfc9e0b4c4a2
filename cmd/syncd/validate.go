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
		Use:   "validate",
		Short: "Check the config, the API key, the forms, the output (a probe write) and the state store",
		Long: "Check everything a sync needs, each on one line (ok, WARN or FAIL), within about 30 s:\n" +
			"the config; the API key and base_url (one answer within 20 s); every configured form;\n" +
			"that the output can be written (a hidden probe file or object is written and deleted;\n" +
			"for BigQuery a dry-run query job checks the dataset and the job permission); that\n" +
			"sync.spool_dir (or the temporary folder) takes a scratch folder; and the\n" +
			"state (beside a running `syncd run`, through its /status). Exit 0 when all is ok, 1 when\n" +
			"a check failed, 2 when the config is invalid.",
		Example: "  syncd validate\n  syncd validate --config /etc/syncd/syncd.yaml\n  syncd validate -o json | jq '.[] | select(.status != \"ok\")'",
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
