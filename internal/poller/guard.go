package poller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// FutureCommitError means a form's state says submissions are synced up to
// an instant that has not come yet. No pass of this syncd commits past now
// - safety lag; an older one's backfill with a future --to did, and every
// submission made since that backfill ran was then skipped, silently. The
// form's passes fail with this until the record is cut back.
type FutureCommitError struct {
	Stream      string
	End         time.Time // where the committed windows end
	LastSuccess time.Time // when the form last committed a batch
}

func (e *FutureCommitError) Error() string {
	from := "the date that backfill ran"
	if !e.LastSuccess.IsZero() {
		from = e.LastSuccess.UTC().Format("2006-01-02")
	}
	return fmt.Sprintf("form %s: the state says it is synced up to %s, which is in the future (a backfill with a future --to by an older syncd), so submissions made since then were never synced: "+
		"run `syncd state reset %s --from %s --yes` to fetch them (the day its last batch was committed; rows of that day may come a second time), then `syncd once`",
		e.Stream, e.End.UTC().Format(time.RFC3339), e.Stream, from)
}

// HorizonError is a window that would be committed past now - safety lag.
// The planner never makes one; this is the last guard.
type HorizonError struct {
	Stream  string
	End     time.Time
	Horizon time.Time
}

func (e *HorizonError) Error() string {
	return fmt.Sprintf("form %s: refusing to commit a window ending %s, past now - sync.safety_lag (%s): submissions may still arrive there",
		e.Stream, e.End.UTC().Format(time.RFC3339Nano), e.Horizon.UTC().Format(time.RFC3339Nano))
}

// checkHorizon refuses a window that ends past now - safety lag.
func (p *Poller) checkHorizon(formID string, end time.Time) error {
	if h := p.Horizon(); end.After(h) {
		return &HorizonError{Stream: formID, End: end, Horizon: h}
	}
	return nil
}

// Refresh replaces a form's table with a fresh sync: it marks the refresh
// in the state, removes the table's output, then resets the form (its next
// generation) in the transaction that clears the mark. A stop at any point
// leaves the mark, and the form's next pass, of any command, finishes the
// removal before it writes: the old rows are never mixed with the new. The
// caller then runs a pass to fetch everything again.
func (p *Poller) Refresh(ctx context.Context, s Stream) error {
	key, table := s.Key(), s.Table()
	lock := p.formLock(key)
	if !lock.TryLock() {
		return fmt.Errorf("refresh %s: %w", key, ErrBusy)
	}
	defer lock.Unlock()
	if _, ok := p.sink.(sink.Purger); !ok {
		return fmt.Errorf("refresh %s: this sink cannot remove a table's output", key)
	}
	st, err := p.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("refresh %s: read state: %w", key, err)
	}
	if len(st.Intents) > 0 {
		// Batches a stopped run left open are resolved first: Committed
		// waits for a load job still running, so one that would land in the
		// fresh table is settled before the table goes. One the sink does
		// not hold is dropped: the refresh fetches its window again anyway.
		f := &streamRun{p: p, s: s, key: key, table: table, gen: st.Generation, log: p.opts.Logger.With(zap.String(logkey.Stream, key))}
		redo, err := f.recoverIntents(ctx, st)
		if err != nil {
			return fmt.Errorf("refresh %s: %w", key, err)
		}
		for _, w := range redo {
			b := f.batchFor(w)
			if err := p.store.DropIntent(ctx, key, b.ID); err != nil {
				return fmt.Errorf("refresh %s: %w", key, err)
			}
		}
		if st, err = p.store.Get(ctx, key); err != nil {
			return fmt.Errorf("refresh %s: read state: %w", key, err)
		}
	}
	if st.Refresh == nil {
		if err := p.store.BeginRefresh(ctx, key, state.Refresh{Table: table, RequestedAt: p.opts.Now()}); err != nil {
			return fmt.Errorf("refresh %s: %w", key, err)
		}
		st.Refresh = &state.Refresh{Table: table}
	}
	if _, err := p.finishRefresh(ctx, key, st); err != nil {
		return err
	}
	return nil
}

// finishRefresh removes the output of a refresh under way and resets the
// form, returning its new state.
func (p *Poller) finishRefresh(ctx context.Context, formID string, st state.StreamState) (state.StreamState, error) {
	pg, ok := p.sink.(sink.Purger)
	if !ok {
		return st, fmt.Errorf("form %s: a refresh of table %s is under way, but this sink cannot remove a table's output: finish it with the sink it was started with", formID, st.Refresh.Table)
	}
	if err := pg.Purge(ctx, st.Refresh.Table); err != nil {
		return st, fmt.Errorf("refresh form %s: remove the output of table %s: %w", formID, st.Refresh.Table, err)
	}
	if err := p.store.FinishRefresh(ctx, formID); err != nil {
		return st, fmt.Errorf("refresh form %s: %w", formID, err)
	}
	p.opts.Logger.Info("refresh: the table's output is removed; the form is synced again from its start", zap.String(logkey.Stream, formID), zap.String(logkey.Table, st.Refresh.Table))
	st, err := p.store.Get(ctx, formID)
	if err != nil {
		return st, fmt.Errorf("read state of form %s: %w", formID, err)
	}
	return st, nil
}

// PlannedWindow is a window a pass would fetch.
type PlannedWindow struct {
	Start, End time.Time
	Rows       int  // as the service counted them; -1 when planning did not need the count
	FirstRead  bool // planning already read the window's first page
	Empty      bool // the service says it holds nothing: committed without a read
}

// Plan cuts gaps of one stream into the windows a pass would fetch, the
// way a pass plans them, reading only: it makes the requests planning makes
// and writes nothing. parted says the sink writes a file per partition (a
// sink.Partitioner), in layout, the table's ("": a new table's, chosen as
// its first pass would choose it, or opts.Layout). It returns the windows
// and that layout. It is what `--dry-run` prints.
func Plan(ctx context.Context, s Stream, opts Options, parted bool, layout sink.Layout, gaps []state.Interval) ([]PlannedWindow, sink.Layout, error) {
	opts.setDefaults()
	p := &Poller{opts: opts, parted: parted, draining: make(chan struct{})}
	f := &streamRun{p: p, s: s, key: s.Key(), table: s.Table(), log: opts.Logger}
	if layout == "" {
		layout = opts.Layout
	}
	f.layout = layout
	var out []PlannedWindow
	for _, g := range gaps {
		err := p.plan(ctx, s, g, f.cutter(), func(w Window) error {
			f.noteWindow(w)
			out = append(out, PlannedWindow{Start: w.Start, End: w.End, Rows: w.Count, FirstRead: w.First != nil, Empty: w.Empty})
			return nil
		})
		if err != nil {
			return out, f.currentLayout(), err
		}
	}
	return out, f.currentLayout(), nil
}

// PagesFor is the requests that reading a window of rows takes with pages
// of pageSize that overlap by one row, less the first page when planning
// already read it.
func PagesFor(rows, pageSize int, firstRead bool) int64 {
	if pageSize < 2 {
		pageSize = 2
	}
	pages := int64(1)
	if rows > pageSize {
		pages += int64((rows - pageSize + pageSize - 2) / (pageSize - 1))
	}
	if firstRead {
		pages--
	}
	return pages
}
