package main

// The commands' side of a running daemon's control endpoint
// (internal/control): the exit codes and the printing of a backfill or a
// sign-out that the daemon does for them.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
)

// forgetSignIn deletes the sign-in of acct (source: scheduling or forms)
// with del when the state opens for writing, or through the running syncd
// that holds it. how is "" or says the daemon did it.
func forgetSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, del func(state.Store) error) (how string, err error) {
	store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
	if held, ok := control.HeldByDaemon(err); ok {
		c, cerr := control.Connect(ctx, cfg, held)
		if cerr != nil {
			return "", withCode(exitState, cerr)
		}
		if err := c.SignOut(ctx, acct.Name, source); err != nil {
			return "", withCode(exitFailed, err)
		}
		return fmt.Sprintf(" (by the running syncd, pid %d)", c.PID()), nil
	}
	if err != nil {
		return "", withCode(exitState, err)
	}
	defer store.Close()
	if err := del(store); err != nil {
		return "", withCode(exitFailed, err)
	}
	return "", nil
}

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
	report := newProgressReporter(g.stderr, log, orDash(req.Form))
	started := time.Now()
	done, err := c.Backfill(ctx, req, func(s string) { fmt.Fprintln(g.stderr, "syncd:", s) }, report.update)
	_, stopped := g.interruption()
	report.finish(poller.Result{Err: err, Interrupted: stopped || done == nil || done.Code != exitOK})
	if code, stopped := g.interruption(); stopped {
		out := g.stdout
		if format == formatJSON {
			out = g.stderr // stdout is for JSON alone
		}
		fmt.Fprintln(out, "INTERRUPTED: the daemon's backfill was cancelled with this command; what it committed stays committed")
		return withCode(code, errors.New("interrupted: run the backfill again to load the rest"))
	}
	if err != nil {
		var refused *control.Refusal
		if errors.As(err, &refused) && refused.Status < 500 && refused.Status != http.StatusUnauthorized {
			return withCode(exitUsage, err)
		}
		return withCode(exitFailed, err)
	}
	if done.Results == nil {
		if done.Code == exitOK {
			done.Code = exitFailed
		}
		return withCode(done.Code, errors.New(done.Error))
	}
	took := time.Duration(done.Seconds * float64(time.Second))
	if took == 0 {
		took = time.Since(started)
	}
	if err := g.finishPass(resultsOf(done.Results), took, summaryPath, format); err != nil && done.Code == exitOK {
		return err
	}
	if done.Code != exitOK {
		return withCode(done.Code, errReported)
	}
	return nil
}

// resultsOf are the results a daemon's summary describes, for printing as
// the command alone prints them.
func resultsOf(entries []status.StreamResult) []poller.Result {
	out := make([]poller.Result, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Result())
	}
	return out
}
