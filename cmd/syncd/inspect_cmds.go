package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/suggest"
)

// loadClient loads the configuration and builds the Forms API client, for
// the commands that only read the API.
func (g *globals) loadClient() (*config.Config, *zap.Logger, *forms.Client, error) {
	cfg, log, err := g.load()
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := app.NewClient(cfg, log, nil)
	if err != nil {
		return nil, nil, nil, withCode(exitUsage, err)
	}
	return cfg, log, client, nil
}

func newFormsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "forms",
		Short: "List the account's forms",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, _, client, err := g.loadClient()
			if err != nil {
				return err
			}
			list, err := client.ListForms(cmd.Context())
			if err != nil {
				return withCode(exitFailed, err)
			}
			rows := make([][]string, 0, len(list))
			for _, f := range list {
				rows = append(rows, []string{f.FormID, f.Name, strings.Join(f.Tags, ",")})
			}
			return tabular(g.stdout, []string{"ID", "NAME", "TAGS"}, rows)
		},
	}
}

func newSchemaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema FORM",
		Short: "Show the table a form maps to: column, type, source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, _, client, err := g.loadClient()
			if err != nil {
				return err
			}
			form, err := client.GetForm(ctx, args[0])
			if err != nil {
				return withCode(exitFailed, err)
			}
			// The pinned schema, when a sync has run, is what the output holds;
			// read it without taking the writer's lock.
			var pinned *schema.Table
			if st, err := app.OpenStore(ctx, cfg, true); err == nil {
				fs, gerr := st.Get(ctx, form.ID)
				st.Close()
				if gerr == nil && len(fs.Schema) > 0 {
					pinned, _ = schema.Unmarshal(fs.Schema)
				}
			}
			var table *schema.Table
			if pinned != nil {
				table, _, err = pinned.Evolve(form)
			} else {
				table, _, err = schema.New(form, schema.Options{IncludeEditLink: cfg.Sync.IncludeEditLink})
			}
			if err != nil {
				return withCode(exitFailed, fmt.Errorf("map form %s: %w", form.ID, err))
			}
			rows := make([][]string, 0, len(table.Columns))
			for _, c := range table.Columns {
				src := string(c.Kind)
				if c.SourceID != "" {
					src += " " + c.SourceID
				}
				if c.SourceType != "" {
					src += " (" + c.SourceType + ")"
				}
				req := "NULLABLE"
				if c.Required {
					req = "REQUIRED"
				}
				rows = append(rows, []string{c.Name, string(c.Type), req, src, c.SourceName})
			}
			fmt.Fprintf(g.stdout, "form %s (%s): %d columns\n", form.ID, form.Name, len(table.Columns))
			if hidden := passwordQuestions(form); len(hidden) > 0 {
				fmt.Fprintf(g.stdout, "not exported (Password questions): %s\n", strings.Join(hidden, ", "))
			}
			return tabular(g.stdout, []string{"COLUMN", "TYPE", "MODE", "SOURCE", "NAME"}, rows)
		},
	}
}

func passwordQuestions(f *forms.Form) []string {
	var out []string
	for _, q := range f.Questions {
		if q.Type == "Password" {
			out = append(out, q.Name)
		}
	}
	return out
}

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Inspect or reset the sync state"}
	show := &cobra.Command{
		Use:   "show [FORM]",
		Short: "Show committed windows, open batches and counters",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := g.openApp(ctx, true)
			if err != nil {
				return err
			}
			defer a.Close()
			list, err := a.Store.List(ctx)
			if err != nil {
				return withCode(exitFailed, err)
			}
			if len(args) == 1 {
				st, err := findState(list, args[0])
				if err != nil {
					return err
				}
				list = []state.FormState{st}
			}
			now := time.Now()
			for _, st := range list {
				fmt.Fprintf(g.stdout, "form %s: %d rows in %d batches", st.FormID, st.Rows, st.Batches)
				if !st.LastSuccess.IsZero() {
					fmt.Fprintf(g.stdout, ", last success %s", st.LastSuccess.Format(time.RFC3339))
				}
				fmt.Fprintln(g.stdout)
				for _, iv := range st.Committed {
					fmt.Fprintf(g.stdout, "  committed [%s, %s)\n", fmtTime(iv.Start), fmtTime(iv.End))
				}
				for id, in := range st.Intents {
					fmt.Fprintf(g.stdout, "  open batch %s [%s, %s) since %s\n", id, fmtTime(in.Start), fmtTime(in.End), in.CreatedAt.Format(time.RFC3339))
				}
				if st.Refresh != nil {
					fmt.Fprintf(g.stdout, "  refresh of table %s under way since %s: the next pass finishes it\n", st.Refresh.Table, st.Refresh.RequestedAt.Format(time.RFC3339))
				}
				if end := st.Committed.End(); end.After(now) {
					fmt.Fprintf(g.stdout, "  DAMAGED: %v\n", &poller.FutureCommitError{FormID: st.FormID, End: end, LastSuccess: st.LastSuccess})
				}
				if st.LastError != "" {
					fmt.Fprintf(g.stdout, "  last error: %s\n", st.LastError)
				}
			}
			if len(list) == 0 {
				fmt.Fprintln(g.stdout, "no form has been synced yet")
			}
			return nil
		},
	}
	var yes bool
	var fromDate string
	reset := &cobra.Command{
		Use:   "reset FORM [--from DATE]",
		Short: "Forget what was synced of a form (all of it, or from a date on), so the next pass fetches it again",
		Long: "Forget a form's committed windows (with --from, only from that date on) so that the\n" +
			"next pass fetches them again. The output is not touched: the rows come a second time\n" +
			"beside the ones already written, so queries must take the latest row per submission.\n" +
			"To replace a form's table instead, use `syncd refresh --form FORM`.",
		Example: "  syncd state reset vLp2aX --yes\n  syncd state reset vLp2aX --from 2026-11-01 --yes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			formID := args[0]
			from, err := config.ParseDate(fromDate)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--from: %w", err))
			}
			what := "everything synced of form " + formID
			if !from.IsZero() {
				what = fmt.Sprintf("what was synced of form %s from %s on", formID, from.Format(time.RFC3339))
			}
			warning := fmt.Sprintf("Forget %s? The next pass fetches it again and writes those rows a second time beside the ones already in the output (`syncd refresh --form %s` replaces the table instead).", what, formID)
			a, err := g.openApp(ctx, false)
			if err != nil {
				return err
			}
			defer a.Close()
			list, err := a.Store.List(ctx)
			if err != nil {
				return withCode(exitFailed, err)
			}
			if _, err := findState(list, formID); err != nil {
				return err
			}
			if yes {
				fmt.Fprintln(g.stderr, "syncd: "+strings.TrimPrefix(warning, "Forget "))
			} else if err := confirm(g, warning, formID); err != nil {
				return err
			}
			if from.IsZero() {
				err = a.Store.Reset(ctx, formID)
			} else {
				err = a.Store.Uncommit(ctx, formID, from)
			}
			if err != nil {
				return withCode(exitFailed, err)
			}
			fmt.Fprintf(g.stdout, "state of form %s reset\n", formID)
			return nil
		},
	}
	reset.Flags().StringVar(&fromDate, "from", "", "forget only from this date on: 2024-01-31 or RFC 3339")
	reset.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(show, reset)
	return cmd
}

// findState is the state of formID among list, or an exit-2 error naming
// the ids the state holds that are closest to it.
func findState(list []state.FormState, formID string) (state.FormState, error) {
	known := make([]string, 0, len(list))
	for _, st := range list {
		if st.FormID == formID {
			return st, nil
		}
		known = append(known, st.FormID)
	}
	msg := fmt.Sprintf("the state holds no form %s", formID)
	if p := suggest.Phrase(formID, known); p != "" {
		msg += " (" + p + ")"
	}
	return state.FormState{}, withCode(exitUsage, errors.New(msg+": `syncd state show` lists the forms it holds; nothing was changed"))
}

func fmtTime(t time.Time) string {
	if t.Equal(time.Unix(0, 0)) {
		return "beginning"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func newValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the config, the API key, the forms, the sink and the state store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := g.stdout
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			fmt.Fprintln(out, "ok   config")
			for _, w := range cfg.QuotaWarnings(time.Now()) {
				fmt.Fprintf(out, "WARN quota: %s\n", w)
			}
			client, err := app.NewClient(cfg, log, nil)
			if err != nil {
				return withCode(exitUsage, err)
			}
			list, err := client.ListForms(ctx)
			if err != nil {
				fmt.Fprintf(out, "FAIL api key: %v\n", err)
				return withCode(exitFailed, errReported)
			}
			fmt.Fprintf(out, "ok   api key: %d forms visible at %s\n", len(list), cfg.Source.BaseURL)
			bad := 0
			for _, f := range cfg.Forms {
				if _, err := client.GetForm(ctx, f.ID); err != nil {
					fmt.Fprintf(out, "FAIL form %s: %v\n", f.ID, err)
					bad++
					continue
				}
				fmt.Fprintf(out, "ok   form %s\n", f.ID)
			}
			snk, err := app.NewSink(cfg, version, log)
			if err != nil {
				fmt.Fprintf(out, "FAIL sink: %v\n", err)
				bad++
			} else {
				// A bucket is only reached when it is listed.
				if c, ok := snk.(interface{ Check(context.Context) error }); ok {
					err = c.Check(ctx)
				}
				snk.Close()
				if err != nil {
					fmt.Fprintf(out, "FAIL sink: %v\n", err)
					bad++
				} else {
					fmt.Fprintf(out, "ok   sink %s\n", cfg.Sink.Type)
				}
			}
			st, err := app.OpenStore(ctx, cfg, false)
			if err != nil {
				fmt.Fprintf(out, "FAIL state: %v\n", err)
				bad++
			} else {
				list, err := st.List(ctx)
				st.Close()
				damaged := 0
				for _, fs := range list {
					if end := fs.Committed.End(); end.After(time.Now()) {
						fmt.Fprintf(out, "FAIL state: %v\n", &poller.FutureCommitError{FormID: fs.FormID, End: end, LastSuccess: fs.LastSuccess})
						damaged++
					}
				}
				switch {
				case err != nil:
					fmt.Fprintf(out, "FAIL state: %v\n", err)
					bad++
				case damaged > 0:
					bad++
				default:
					fmt.Fprintf(out, "ok   state %s\n", app.StateWhere(cfg))
				}
			}
			if bad > 0 {
				return withCode(exitFailed, errReported)
			}
			return nil
		},
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return json.NewEncoder(g.stdout).Encode(map[string]string{"version": version})
			}
			fmt.Fprintln(g.stdout, "syncd "+version)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
