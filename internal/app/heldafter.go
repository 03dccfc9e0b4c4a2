package app

import (
	"context"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// HeldAfter are the batches of the stream key (a form's state key) that
// its table holds with windows that end after from: the rows a reset of
// the stream from then on would have the next pass write a second time.
// cut is where the first of them starts (from, when none starts before
// it). An error is the sink's, as is: the caller says what it read the
// table's batches for. A stream whose sink cannot list its batches (sink.Inventory), or
// another source's, holds none that are known: the list is empty.
func (a *App) HeldAfter(ctx context.Context, key string, from time.Time) (table string, after []sink.Held, cut time.Time, err error) {
	ns, id := tablepkg.SplitStreamKey(key)
	var acct *Account
	for _, ac := range a.Accounts {
		if ac.Cfg.Namespace() == ns {
			acct = ac
		}
	}
	if acct == nil || acct.Sink == nil || strings.Contains(id, "/") {
		return "", nil, from, nil
	}
	inv, ok := acct.Sink.(sink.Inventory)
	if !ok {
		return "", nil, from, nil
	}
	s, err := acct.Stream(acct.Job(id))
	if err != nil {
		return "", nil, from, nil // no source of the account has it: none known
	}
	table = s.Table()
	held, err := inv.DescribeBatches(ctx, table)
	if err != nil {
		return table, nil, from, err // the caller says why it asked
	}
	cut = from
	for _, h := range held {
		if (h.Stream == key || h.Stream == id) && h.WindowEnd.After(from) {
			after = append(after, h)
			if !h.WindowStart.IsZero() && h.WindowStart.Before(cut) {
				cut = h.WindowStart
			}
		}
	}
	return table, after, cut, nil
}
