package app

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
)

// BackfillForm loads [start, end) of one stream of the account's jobs
// source (a form),
// concurrency windows at once (below 1: sync.concurrency), telling
// progress how far it has come.
func (acct *Account) BackfillForm(ctx context.Context, formID string, start, end time.Time, concurrency int, progress func(poller.Progress)) poller.Result {
	if concurrency < 1 {
		concurrency = acct.app.Cfg.Sync.Concurrency
	}
	s, err := acct.Stream(acct.Job(formID))
	if err != nil {
		return poller.Result{Account: acct.Name, Stream: formID, Err: err}
	}
	r := acct.Poller.Backfill(ctx, s, start, end, concurrency, progress)
	r.Account = acct.Name
	return r
}

// Backfill loads [start, end) of the streams of every open account
// (Account.Backfill): accounts at once, each account's forms one after
// the other with concurrency windows at once (below 1:
// sync.concurrency), as they share its key.
func (a *App) Backfill(ctx context.Context, start, end time.Time, concurrency int) []poller.Result {
	if concurrency < 1 {
		concurrency = a.Cfg.Sync.Concurrency
	}
	return ForEach(a.Accounts, func(acct *Account) []poller.Result {
		return acct.Backfill(ctx, start, end, concurrency, nil)
	})
}
