package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/state"
)

// formsReader loads the configuration and opens the account's forms for
// the commands that only read the API (exit 2 when it has no key).
func (g *globals) formsReader(ctx context.Context) (*config.Config, *app.FormsReader, error) {
	cfg, log, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	acct, err := g.account(cfg)
	if err != nil {
		return nil, nil, err
	}
	r, err := app.ReadForms(ctx, cfg, acct, log)
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	return cfg, r, nil
}

// formJSON is one form of `syncd forms -o json`.
type formJSON = app.FormRow

func newFormsCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "forms",
		Short:   "List the account's forms",
		Example: help("forms.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			_, r, err := g.formsReader(cmd.Context())
			if err != nil {
				return err
			}
			out, err := r.List(cmd.Context())
			if err != nil {
				return withCode(exitFailed, err)
			}
			return g.emit(format, map[string]any{"forms": out}, func(w io.Writer) error { return app.WriteForms(w, out) })
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func newSchemaCmd(g *globals) *cobra.Command {
	var format, formFlag string
	cmd := &cobra.Command{
		Use:     "schema FORM|--form ID",
		Short:   "Show the table a form maps to: column, type, source",
		Example: help("schema.example"),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			formID, err := formOrFlag(cmd, args, formFlag, true)
			if err != nil {
				return err
			}
			args = []string{formID}
			if strings.TrimSpace(args[0]) == "" {
				return withCode(exitUsage, errors.New("FORM is empty: give a form id (`syncd forms` lists the account's)"))
			}
			ctx := cmd.Context()
			cfg, r, err := g.formsReader(ctx)
			if err != nil {
				return err
			}
			form, err := r.Form(ctx, args[0])
			if app.IsBadID(err) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitFailed, err)
			}
			// The pinned schema, when a sync has run, is what the output holds:
			// read without the writer's lock, or from the running daemon.
			v, err := readState(ctx, cfg, "?schema=1&form="+url.QueryEscape(form.Key()))
			if err != nil {
				fmt.Fprintf(g.stderr, "syncd: warning: %v; showing the mapping of today's questions, which may differ from the output's columns\n", err)
			}
			out, err := r.Schema(form, v.Forms)
			if err != nil {
				return withCode(exitFailed, err)
			}
			return g.emit(format, out, func(w io.Writer) error { return app.WriteSchema(w, out, cfg) })
		},
	}
	addOutputFlag(cmd, &format)
	cmd.Flags().StringVar(&formFlag, "form", "", "the form (or give it as an argument)")
	return cmd
}

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Inspect or reset the sync state"}
	var format, showForm, resetForm string
	show := &cobra.Command{
		Use:     "show [FORM]",
		Short:   "Show committed windows, open batches and counters",
		Long:    help("state-show.long"),
		Example: help("state-show.example"),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			formID, err := formOrFlag(cmd, args, showForm, false)
			if err != nil {
				return err
			}
			v, err := g.readAccountsView(cmd.Context(), format, "")
			if err != nil {
				return err
			}
			if v.Forms == nil { // a daemon's /status without forms
				v.Forms = []formView{}
			}
			if len(g.accounts) > 0 {
				v.Forms = app.KeepAccountStreams(v.Forms, g.accounts)
			}
			if formID != "" {
				f, err := app.FindView(v.Forms, g.streamKey(formID))
				if err != nil {
					return withCode(exitUsage, err)
				}
				v.Forms = []formView{f}
			}
			return g.emit(format, v, noErr(v.WriteText))
		},
	}
	addOutputFlag(show, &format)
	show.Flags().StringVar(&showForm, "form", "", "only this form (or give it as an argument)")
	var yes, keepOutput bool
	var fromDate string
	reset := &cobra.Command{
		Use:     "reset FORM [--from DATE]",
		Short:   "Forget what was synced of a form (all of it, or from a date on), so the next pass fetches it again",
		Long:    help("state-reset.long"),
		Example: help("state-reset.example"),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			formID, err := formOrFlag(cmd, args, resetForm, true)
			if err != nil {
				return err
			}
			from, err := app.ResetFrom(fromDate, cmd.Flags().Changed("from"), formID)
			if err != nil {
				return withCode(exitUsage, err)
			}
			warning := app.ResetWarning(formID, from)
			a, err := g.openApp(ctx, false)
			if err != nil {
				return err
			}
			defer a.Close()
			if err := a.CheckReset(ctx, formID, from, keepOutput); err != nil {
				return resetError(err)
			}
			if yes {
				fmt.Fprintln(g.stderr, "syncd: "+strings.TrimPrefix(warning, "Forget "))
			} else if err := confirm(g, warning, formID); err != nil {
				return err
			}
			if err := a.ResetStream(ctx, formID, from); err != nil {
				return withCode(exitFailed, err)
			}
			fmt.Fprintf(g.stdout, "state of form %s reset\n", formID)
			return nil
		},
	}
	reset.Flags().StringVar(&fromDate, "from", "", "forget only from this date on: 2024-01-31 or RFC 3339")
	reset.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	reset.Flags().StringVar(&resetForm, "form", "", "the form (or give it as an argument)")
	reset.Flags().BoolVar(&keepOutput, "keep-output", false, "with --from: reset even though the output holds batches from that date on, whose rows the next pass then writes a second time")
	cmd.AddCommand(show, reset, newStateForgetCmd(g), newStateAdoptCmd(g), newStateBackupCmd(g), newStateRestoreCmd(g))
	return cmd
}

// findState is the state of formID among list (app.FindStream), or an
// exit-2 error naming the ids the state holds that are closest to it.
func findState(list []state.StreamState, formID string) (state.StreamState, error) {
	st, err := app.FindStream(list, formID)
	return st, withCode(exitUsage, err)
}

// resetError gives an error of app.CheckReset its exit code: 2 for a
// reset refused, 1 for a failure to read the state or the output.
func resetError(err error) error {
	var refused *app.ResetRefusedError
	if errors.As(err, &refused) {
		return withCode(exitUsage, err)
	}
	return withCode(exitFailed, err)
}
