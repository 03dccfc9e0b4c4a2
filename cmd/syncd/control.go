package main

// The commands' side of a running daemon's control endpoint
// (internal/control): the exit codes and the printing of a backfill that
// the daemon does for them.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/progress"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// backfillInDaemon has the running syncd that holds the state (held) do
// the backfill, through its control endpoint: its progress and notes on
// stderr, then the summary and the exit code the command alone would have
// printed and had. Interrupting the command cancels the daemon's backfill
// (its request ends): what it committed stays committed, and the batches in
// flight are resolved by the next pass, as after a second signal.
func (g *globals) backfillInDaemon(ctx context.Context, cfg *config.Config, held *state.LockedError, req control.BackfillRequest, summaryPath, format string) error {
	c, err := control.Connect(ctx, cfg, held)
	if err != nil {
		return withCode(exitState, err)
	}
	fmt.Fprintf(g.stderr, "syncd: the state is in use by the running syncd (pid %d): the backfill runs in it\n", c.PID())
	_, log, err := g.load()
	if err != nil {
		return err
	}
	report := progress.NewReporter(g.stderr, log, textfmt.OrDash(req.Form), isTerminal(g.stderr))
	started := time.Now()
	done, err := c.Backfill(ctx, req, func(s string) { fmt.Fprintln(g.stderr, "syncd:", s) }, report.Update)
	_, stopped := g.Interruption()
	report.Finish(poller.Result{Err: err, Interrupted: stopped || done == nil || done.Code != exitOK})
	if code, stopped := g.Interruption(); stopped {
		fmt.Fprintln(g.progressOut(format), "INTERRUPTED: the daemon's backfill was cancelled with this command; what it committed stays committed")
		return withCode(code, errors.New("interrupted: run the backfill again to load the rest"))
	}
	if control.BadRequest(err) {
		return withCode(exitUsage, err)
	}
	if err != nil {
		return withCode(exitFailed, err)
	}
	if done.Results == nil {
		return withCode(done.Failure())
	}
	if err := g.finishPass(done.PassResults(), done.Took(started), summaryPath, format); err != nil && done.Code == exitOK {
		return err
	}
	if done.Code != exitOK {
		return withCode(done.Code, errReported)
	}
	return nil
}
