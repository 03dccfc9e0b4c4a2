package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/progress"
	"github.com/syncd-dev/syncd/internal/status"
)

// openApp opens the configured parts, mapping failures to exit codes.
func (g *globals) openApp(ctx context.Context, readOnly bool) (*app.App, error) {
	return g.openAppShared(ctx, readOnly, false)
}

// openAppShared is openApp for `syncd run`, which on a shared state
// (state.shared) opens no account until its coordinator claims some.
func (g *globals) openAppShared(ctx context.Context, readOnly, shared bool) (*app.App, error) {
	cfg, log, err := g.load()
	if err != nil {
		return nil, err
	}
	if g.noConfig && !readOnly {
		return nil, errNoConfig(cfg)
	}
	a, err := app.Open(ctx, cfg, log, app.Options{Version: version, ReadOnly: readOnly, Accounts: g.accounts, Shard: g.shard, Shared: shared && cfg.State.Shared,
		PoisonFreedBuffers: os.Getenv(poisonEnv) == "1"})
	if err != nil {
		var se *app.StateError
		if errors.As(err, &se) {
			return nil, withCode(exitState, err)
		}
		return nil, withCode(exitUsage, err)
	}
	if !readOnly {
		g.OnStop(a.Drain, cfg.Sync.ShutdownGrace.D())
	}
	return a, nil
}

// only is the one account a command for one account works on: --account,
// or the only account of the configuration (exit 2 otherwise).
func only(a *app.App) (*app.Account, error) {
	acct, err := a.Only()
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return acct, nil
}

// account is the configured account a command for one account works on,
// before anything is opened: --account, or the only account.
func (g *globals) account(cfg *config.Config) (config.Account, error) {
	acct, err := app.OneAccount(cfg, g.accounts)
	if err != nil {
		return config.Account{}, withCode(exitUsage, err)
	}
	return acct, nil
}

func newOnceCmd(g *globals) *cobra.Command {
	var summaryPath, format, shardSpec string
	var formIDs []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:     "once [FORM]...",
		Short:   "Sync every configured form once, print a summary line per form, and exit",
		Long:    help("once.long"),
		Example: help("once.example"),
		Args:    formArgs(-1),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkFormat(format); err != nil {
				return err
			}
			if err := g.parseShard(shardSpec, len(formIDs) > 0 || dryRun); err != nil {
				return err
			}
			if !dryRun { // a dry run writes nothing, and spools nothing
				if err := g.checkSpool(); err != nil {
					return err
				}
			}
			if len(formIDs) == 0 && !dryRun {
				// Every account (or those --account or --shard names), each on
				// its own key.
				a, err := g.openApp(ctx, false)
				if err != nil {
					return err
				}
				defer a.Close()
				if g.shard != nil && len(a.Accounts) == 0 {
					return g.emptyShard(format)
				}
				started := time.Now()
				return g.finishPass(a.Pass(ctx), time.Since(started), summaryPath, format)
			}
			r, err := g.openReader(ctx, formIDs)
			if err != nil {
				return err
			}
			if dryRun {
				return g.dryRun(ctx, r, app.DryRun{Command: "once", Others: len(formIDs) == 0}, formIDs, format)
			}
			one, err := g.openOne(ctx, summaryPath, format)
			if err != nil {
				return err
			}
			defer one.Close()
			results := one.acct.Pass(ctx, one.acct.JobsOf(formIDs), false)
			return g.finishPass(results, time.Since(one.started), summaryPath, format)
		},
	}
	cmd.Flags().StringVar(&summaryPath, "summary", "", "also write a JSON summary per form to this file")
	cmd.Flags().StringArrayVar(&formIDs, "form", nil, "sync only this form (repeatable): one the config selects (listed under forms:, or of the account's forms, carrying one of its tags: when it names some; never an excluded one)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan only: print the windows, requests and time the pass would take, write nothing")
	cmd.Flags().StringVar(&shardSpec, "shard", "", "sync only the accounts of shard I of N (I/N; /N takes I from JOB_COMPLETION_INDEX): the pods of an Indexed Job split the accounts")
	addOutputFlag(cmd, &format)
	return cmd
}

// parseShard reads --shard into g.shard; single names what it cannot be
// combined with (one account's form, or a dry run).
func (g *globals) parseShard(spec string, single bool) error {
	if spec == "" {
		return nil
	}
	if single {
		return withCode(exitUsage, errors.New("--shard splits the accounts among processes: it does not go with --form or --dry-run"))
	}
	s, err := app.ParseShard(spec, os.Getenv)
	if err != nil {
		return withCode(exitUsage, err)
	}
	g.shard = &s
	return nil
}

// openReader loads the configuration and the one account, opens its
// sources to read only and checks the stream ids the command line names
// (app.Reader.Select, exit 2 for an id refused): the preamble of the
// commands that pass over streams they name, or plan one.
func (g *globals) openReader(ctx context.Context, ids []string) (*app.Reader, error) {
	cfg, log, err := g.load()
	if err != nil {
		return nil, err
	}
	acct, err := g.account(cfg)
	if err != nil {
		return nil, err
	}
	r, err := app.OpenReader(ctx, cfg, acct, log)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return r, checkError(r.Select(ctx, ids))
}

// checkForm refuses, with exit 2 and before anything is written, a form id
// the account does not have.
func (g *globals) checkForm(ctx context.Context, formID string) error {
	r, err := g.openReader(ctx, nil)
	if err != nil {
		return err
	}
	return checkError(r.Check(ctx, []string{formID}))
}

// checkError gives a stream-id check's error its exit code: 2 for an id
// refused, 1 when the account's streams could not be listed.
func checkError(err error) error {
	switch {
	case err == nil:
		return nil
	case app.IsBadID(err):
		return withCode(exitUsage, err)
	default:
		return withCode(exitFailed, err)
	}
}

// finishPass prints the results, writes the summary and picks the exit
// code: a pass a signal stopped is never a success.
func (g *globals) finishPass(results []poller.Result, took time.Duration, summaryPath, format string) error {
	code, interrupted := g.Interruption()
	if err := g.emit(format, status.Summarize(results, interrupted), noErr(func(w io.Writer) {
		status.WriteResults(w, results, took, interrupted)
	})); err != nil {
		return err
	}
	if summaryPath != "" {
		if err := status.WriteSummary(summaryPath, results, interrupted); err != nil {
			return withCode(exitFailed, err)
		}
	}
	if interrupted {
		return withCode(code, errors.New("interrupted: what was committed stays committed; run again to sync the rest"))
	}
	// A table that holds batches this state never recorded is the
	// operator's to settle (state adopt): exit 2, as for a bad id.
	if status.Foreign(results) {
		return withCode(exitUsage, errReported)
	}
	if status.Failed(results, false) > 0 {
		return withCode(exitFailed, errReported)
	}
	return nil
}

// emptyShard reports a pass of a shard no account hashes to: nothing to
// do, which is a success. Under -o json it is an empty list of streams, so
// that stdout stays JSON alone.
func (g *globals) emptyShard(format string) error {
	line := status.EmptyShard(g.shard)
	if format == formatJSON {
		fmt.Fprintf(g.stderr, "syncd: %s\n", line)
	}
	return g.emit(format, status.Summarize(nil, false), noErr(func(w io.Writer) { fmt.Fprintln(w, line) }))
}

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "run",
		Short:   "Sync on the configured cron schedule until stopped (SIGINT/SIGTERM), serving /metrics, /healthz, /readyz, /status",
		Example: help("run.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := g.checkSpool(); err != nil {
				return err
			}
			a, err := g.openAppShared(ctx, false, true)
			if err != nil {
				return err
			}
			defer a.Close()
			return runDaemon(ctx, a, g)
		},
	}
}

// runDaemon runs the daemon (app.Run) until a signal stops it, mapping
// its configuration errors to exit 2.
func runDaemon(ctx context.Context, a *app.App, g *globals) error {
	err := a.Run(ctx, app.RunOptions{ConfigPath: g.configPath, Stopping: g.Stopping(), Version: version,
		// Commands beside the daemon (backfill, auth login) have it do
		// their work; the endpoint stops before the accounts close.
		Beside: func(ctx context.Context) func() {
			return control.Start(ctx, a, g.Stopping(), a.Cfg.Sync.ShutdownGrace.D()+5*time.Second)
		}})
	var cfgErr *daemon.ConfigError
	switch {
	case errors.As(err, &cfgErr):
		return withCode(exitUsage, err)
	case err != nil:
		return withCode(exitFailed, err)
	}
	fmt.Fprintln(g.stdout, "syncd stopped")
	return nil
}

func newBackfillCmd(g *globals) *cobra.Command {
	var formID, from, to, summaryPath, format, shardSpec string
	var concurrency int
	var dryRun bool
	cmd := &cobra.Command{
		Use:     "backfill [FORM | --form ID] --from DATE [--to DATE]",
		Short:   "Load a time range of one form (or of every form of the accounts), fetching windows in parallel; a rerun resumes",
		Long:    help("backfill.long"),
		Example: help("backfill.example"),
		Args:    formArgs(1),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkFormat(format); err != nil {
				return err
			}
			start, end, err := app.BackfillRange(from, to, cmd.Flags().Changed("to"), time.Now())
			if err != nil {
				return withCode(exitUsage, err)
			}
			oneForm := cmd.Flags().Changed("form")
			if cmd.Flags().Changed("concurrency") && concurrency < 1 {
				return withCode(exitUsage, fmt.Errorf("--concurrency %d: must be at least 1 (windows fetched at once)", concurrency))
			}
			if err := g.parseShard(shardSpec, oneForm || dryRun); err != nil {
				return err
			}
			// Nothing is committed past now - safety_lag: a range starting
			// there is refused before anything is opened, dry run or not.
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			if err := app.FromBeforeHorizon(start, time.Now().Add(-cfg.Sync.SafetyLag.D()), "backfill"); err != nil {
				return withCode(exitUsage, err)
			}
			if !dryRun {
				if g.noConfig {
					return errNoConfig(cfg)
				}
				if err := refuseUnusableSpool(cfg); err != nil {
					return err
				}
			}
			if !oneForm && !dryRun {
				return g.backfillAll(ctx, start, end, to != "", concurrency, summaryPath, format)
			}
			var ids []string // every form of the account, as the backfill would
			if oneForm {
				ids = []string{formID}
			}
			rd, err := g.openReader(ctx, ids)
			if err != nil {
				return err
			}
			if dryRun {
				return g.dryRun(ctx, rd, app.DryRun{Command: "backfill", From: start, To: end}, ids, format)
			}
			one, err := g.openOne(ctx, summaryPath, format)
			if held, ok := control.HeldByDaemon(err); ok {
				req := control.BackfillRequest{Accounts: g.accounts, Form: formID, From: start, To: end, ToAsked: to != "", Concurrency: concurrency}
				return g.backfillInDaemon(ctx, cfg, held, req, summaryPath, format)
			}
			if err != nil {
				return err
			}
			defer one.Close()
			acct := one.acct
			end, note := app.ClipToHorizon(end, acct.Poller.Horizon())
			if note != "" && to != "" { // without --to, now - safety_lag is the end asked for
				fmt.Fprintf(g.stderr, "syncd: %s (later submissions come with the live sync)\n", note)
			}
			report := progress.NewReporter(g.stderr, acct.Log, formID, isTerminal(g.stderr))
			one.started = time.Now()
			r := acct.BackfillForm(ctx, formID, start, end, concurrency, report.Update)
			report.Finish(r)
			return one.finish(r)
		},
	}
	cmd.Flags().StringVar(&formID, "form", "", "form id (default: every form of the accounts)")
	cmd.Flags().StringVar(&shardSpec, "shard", "", "without --form: only the accounts of shard I of N (I/N; /N takes I from JOB_COMPLETION_INDEX)")
	cmd.Flags().StringVar(&from, "from", "", "start of the range, inclusive: 2024-01-31 or RFC 3339 (required)")
	cmd.Flags().StringVar(&to, "to", "", "end of the range, exclusive (default and latest: now - sync.safety_lag)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "windows fetched at once (default: sync.concurrency)")
	cmd.Flags().StringVar(&summaryPath, "summary", "", "also write a JSON summary to this file")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan only: print the windows, requests and time the backfill would take, write nothing")
	addOutputFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// backfillAll backfills [start, end) of every form (and the bookings) of
// every open account: accounts at once, each account's forms one after the
// other with concurrency windows at once (they share its key).
func (g *globals) backfillAll(ctx context.Context, start, end time.Time, endAsked bool, concurrency int, summaryPath, format string) error {
	a, err := g.openApp(ctx, false)
	if held, ok := control.HeldByDaemon(err); ok && g.shard == nil {
		cfg, _, lerr := g.load()
		if lerr != nil {
			return lerr
		}
		req := control.BackfillRequest{Accounts: g.accounts, From: start, To: end, ToAsked: endAsked, Concurrency: concurrency}
		return g.backfillInDaemon(ctx, cfg, held, req, summaryPath, format)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	if g.shard != nil && len(a.Accounts) == 0 {
		return g.emptyShard(format)
	}
	end, note := app.ClipToHorizon(end, a.Accounts[0].Poller.Horizon())
	if note != "" && endAsked {
		fmt.Fprintf(g.stderr, "syncd: %s\n", note)
	}
	started := time.Now()
	return g.finishPass(a.Backfill(ctx, start, end, concurrency), time.Since(started), summaryPath, format)
}

func newReconcileCmd(g *globals) *cobra.Command {
	var formID, from, summaryPath, format string
	cmd := &cobra.Command{
		Use:     "reconcile FORM|--form ID [--from DATE]",
		Short:   "Read a form's committed windows again and write what changed: edits, deletions, late imports",
		Long:    help("reconcile.long"),
		Example: help("reconcile.example"),
		Args:    formArgs(1),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			start, err := app.ReconcileFrom(from, cmd.Flags().Changed("from"))
			if err != nil {
				return withCode(exitUsage, err)
			}
			cfg, err := g.checkOneForm(ctx, format, formID)
			if err != nil {
				return err
			}
			// Refused before the state is opened: the pass would read nothing.
			if !start.IsZero() {
				if err := app.FromBeforeHorizon(start, time.Now().Add(-cfg.Sync.SafetyLag.D()), "reconcile"); err != nil {
					return withCode(exitUsage, err)
				}
			}
			one, err := g.openOne(ctx, summaryPath, format)
			if err != nil {
				return err
			}
			defer one.Close()
			s, err := one.acct.StreamOf(ctx, formID)
			if err != nil {
				return withCode(exitFailed, err)
			}
			r := one.acct.Poller.Reconcile(ctx, s.Stream, start)
			var noIndex *poller.ErrNoIndex
			if errors.As(r.Err, &noIndex) {
				return withCode(exitUsage, r.Err)
			}
			return one.finish(r)
		},
	}
	cmd.Flags().StringVar(&formID, "form", "", "form id (required)")
	cmd.Flags().StringVar(&from, "from", "", "reconcile from this date: 2024-01-31 or RFC 3339 (default: now - sync.lookback; the whole history when it is 0)")
	cmd.Flags().StringVar(&summaryPath, "summary", "", "also write a JSON summary to this file")
	addOutputFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("form")
	return cmd
}

func newRefreshCmd(g *globals) *cobra.Command {
	var formID, summaryPath, format string
	var yes bool
	cmd := &cobra.Command{
		Use:     "refresh FORM|--form ID",
		Example: help("refresh.example"),
		Short:   "Replace a form's table with a fresh sync: remove its output, then sync it all again",
		Long:    help("refresh.long"),
		Args:    formArgs(1),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if _, err := g.checkOneForm(ctx, format, formID); err != nil {
				return err
			}
			if !yes {
				if err := confirm(g, fmt.Sprintf("Remove everything syncd wrote of form %s and sync it again from its start date?", formID), formID); err != nil {
					return err
				}
			}
			one, err := g.openOne(ctx, summaryPath, format)
			if err != nil {
				return err
			}
			defer one.Close()
			acct := one.acct
			s, err := acct.StreamOf(ctx, formID)
			if err != nil {
				return withCode(exitFailed, err)
			}
			if err := acct.Poller.Refresh(ctx, s.Stream); err != nil {
				if _, stopped := g.Interruption(); stopped {
					return g.finishPass([]poller.Result{{Stream: formID, Interrupted: true}}, time.Since(one.started), summaryPath, format)
				}
				return withCode(exitFailed, err)
			}
			fmt.Fprintf(g.progressOut(format), "refresh %s: the old output is removed; syncing again\n", formID)
			if s, err = acct.StreamOf(ctx, formID); err != nil {
				return withCode(exitFailed, err)
			}
			return one.finish(acct.Poller.Sync(ctx, s.Stream, s.Start))
		},
	}
	cmd.Flags().StringVar(&formID, "form", "", "form id (required)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().StringVar(&summaryPath, "summary", "", "also write a JSON summary to this file")
	addOutputFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("form")
	return cmd
}

// confirm asks a person on a terminal to type word; without a terminal it
// is an error that asks for --yes.
func confirm(g *globals, question, word string) error {
	if !isTerminal(os.Stdin) {
		return withCode(exitUsage, errors.New("this needs confirmation: pass --yes when not on a terminal"))
	}
	// The prompt goes to stderr: stdout may be -o json's alone.
	fmt.Fprintf(g.stderr, "%s Type %s to confirm: ", question, word)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != word {
		return withCode(exitUsage, errors.New("not confirmed; nothing changed"))
	}
	return nil
}
