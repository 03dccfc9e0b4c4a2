package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/poller"
)

// newStateAdoptCmd is `syncd state adopt`: the state rebuilt from the
// output, as Litestream restores a database from its replica.
func newStateAdoptCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "adopt [STREAM]...",
		Short:   "Rebuild the state of forms (and the bookings) from what the output holds",
		Long:    help("state-adopt.long"),
		Example: help("state-adopt.example"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ctx := cmd.Context()
			// A mistyped id is refused before the state and the output are
			// opened (which creates them): a refused command writes nothing.
			if err := g.checkAdoptArgs(ctx, args); err != nil {
				return err
			}
			a, err := g.openApp(ctx, false)
			if err != nil {
				return err
			}
			defer a.Close()
			accounts := a.Accounts
			if len(args) > 0 {
				// Streams named on the command line are of one account.
				acct, err := only(a)
				if err != nil {
					return err
				}
				accounts = []*app.Account{acct}
			}
			results := []poller.AdoptResult{} // -o json prints [] when there is nothing to adopt
			failed := 0
			for _, acct := range accounts {
				if err := acct.CanAdopt(); err != nil {
					return withCode(exitUsage, err)
				}
				forms, bookings := app.AdoptArgs(acct.Cfg, args)
				jobs, err := selectAdoptJobs(ctx, g, acct, forms, len(args) == 0)
				if err != nil {
					return err
				}
				adopted, failures, err := acct.Adopt(ctx, jobs, bookings)
				if err != nil {
					return err
				}
				for _, err := range failures {
					failed++
					fmt.Fprintf(g.stderr, "syncd: %v\n", err)
				}
				results = append(results, adopted...)
			}
			if err := g.emit(format, results, func(w io.Writer) error { return app.WriteAdoptResults(w, results) }); err != nil {
				return err
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

// selectAdoptJobs are the jobs of the form ids named (exit 2 for an id the
// account does not have), or every configured form when all is set.
func selectAdoptJobs(ctx context.Context, g *globals, a *app.Account, ids []string, all bool) ([]poller.Job, error) {
	if all {
		jobs, err := a.Jobs(ctx)
		if err != nil {
			return nil, withCode(exitFailed, err)
		}
		return jobs, nil
	}
	jobs := make([]poller.Job, 0, len(ids))
	for _, id := range ids {
		if err := g.checkForm(ctx, id); err != nil {
			return nil, err
		}
		jobs = append(jobs, a.Job(id))
	}
	return jobs, nil
}

// checkAdoptArgs refuses (exit 2) a STREAM of adopt that is neither a form
// of the account nor its bookings stream, before anything is opened.
func (g *globals) checkAdoptArgs(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return nil
	}
	cfg, log, err := g.load()
	if err != nil {
		return err
	}
	acct, err := g.account(cfg)
	if err != nil {
		return err
	}
	forms, _ := app.AdoptArgs(acct, args)
	if len(forms) == 0 {
		return nil
	}
	sel, err := app.FormsSelector(ctx, cfg, acct, log)
	if err != nil {
		return withCode(exitUsage, err)
	}
	err = sel.Check(ctx, forms)
	if app.IsBadID(err) {
		return withCode(exitUsage, err)
	}
	return withCode(exitFailed, err)
}
