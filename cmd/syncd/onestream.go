package main

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
)

// oneStream is a command on one form of one account (once --form,
// backfill --form, reconcile, refresh): the App it opened for writing, the
// account (--account, or the only one), and what its end prints. It is
// the preamble those commands shared, written once.
type oneStream struct {
	g       *globals
	app     *app.App
	acct    *app.Account
	started time.Time
	summary string // --summary
	format  string // -o
}

// checkOneForm is what a command that syncs one stream checks before it
// opens anything: -o, the spool folder and the stream id (a form's, as
// once refuses its --form, or another source's stream), exit 2 for each.
// It returns the configuration it loaded.
func (g *globals) checkOneForm(ctx context.Context, format, formID string) (*config.Config, error) {
	if err := checkFormat(format); err != nil {
		return nil, err
	}
	if err := g.checkSpool(); err != nil {
		return nil, err
	}
	r, err := g.openReader(ctx, nil)
	if err != nil {
		return nil, err
	}
	return r.Config(), checkError(r.SelectStream(ctx, formID))
}

// openOne opens the App for writing and picks the one account; the caller
// closes it. Its error is openApp's (a *state.LockedError within, when a
// syncd holds the state) or only's.
func (g *globals) openOne(ctx context.Context, summaryPath, format string) (*oneStream, error) {
	a, err := g.openApp(ctx, false)
	if err != nil {
		return nil, err
	}
	acct, err := only(a)
	if err != nil {
		a.Close()
		return nil, err
	}
	return &oneStream{g: g, app: a, acct: acct, started: time.Now(), summary: summaryPath, format: format}, nil
}

// finish prints r, the account's, as a pass of its one stream, and picks
// the exit code (finishPass).
func (o *oneStream) finish(r poller.Result) error {
	r.Account = o.acct.Name
	return o.g.finishPass([]poller.Result{r}, time.Since(o.started), o.summary, o.format)
}

// Close closes the App.
func (o *oneStream) Close() { o.app.Close() }
