package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/state"
)

// Stream is a source stream whose table has a fixed schema, read window by
// window along its time key: the scheduling API's bookings, whose time is
// the version time of each change. It runs through the same pass as a
// form's submissions (prepare, recovery, intents, spool, sink commits,
// checkpoint and guards); only its planning (by Count) and its rows (whole
// records) differ.
type Stream interface {
	// Key names the stream in the state store and in its batch ids. It
	// never looks like a form id ("scheduling/bookings").
	Key() string
	Table() string
	// TimeColumn is the column of Schema that windows and partitions
	// follow: the version time of each record.
	TimeColumn() string
	// KeyColumn names a record; its rows are its versions.
	KeyColumn() string
	// Count tells how many records [start, end) holds (it plans windows).
	Count(ctx context.Context, start, end time.Time) (int, error)
	// Read calls emit with every record whose time lies in [start, end),
	// once, stamped with lin, in records of at most chunkRows rows (the
	// engine spools them, so a window of any size is never held whole). A
	// record is valid only during its call.
	Read(ctx context.Context, start, end time.Time, lin schema.Lineage, chunkRows int, emit func(arrow.Record) error) error
	// Requests is how many requests the stream has made so far.
	Requests() int64
}

// SyncStream runs the live pass of a stream: every gap in [from, now - lag).
func (p *Poller) SyncStream(ctx context.Context, s Stream, from time.Time) Result {
	before := s.Requests()
	res := p.pass(ctx, Job{FormID: s.Key(), Table: s.Table()}, s, func(f *formRun) error {
		return f.executeStream(ctx, from, p.Horizon())
	})
	res.Requests = s.Requests() - before
	return res
}

// executeStream fills the gaps of [from, to) window by window, each cut by
// the stream's counts to at most MaxRowsPerBatch records.
func (f *formRun) executeStream(ctx context.Context, from, to time.Time) error {
	key := f.job.FormID
	st, err := f.prepare(ctx)
	if err != nil {
		return err
	}
	if from.Before(epoch) || from.IsZero() {
		from = epoch
	}
	from, to = floorMS(from), floorMS(to)
	if !from.Before(to) {
		return nil
	}
	for _, g := range st.Committed.Gaps(state.Interval{Start: from, End: to}) {
		for a, b := g.Start, g.End; a.Before(b); {
			if f.p.Draining() {
				f.interrupted.Store(true)
				return nil
			}
			n, err := f.stream.Count(ctx, a, b)
			if err != nil {
				return fmt.Errorf("count %s in [%s, %s): %w", key, a.Format(time.RFC3339), b.Format(time.RFC3339), err)
			}
			end := b
			if n > f.p.opts.MaxRowsPerBatch {
				if end, _, err = f.p.split(a, a, b, n, func(t time.Time) (int, error) { return f.stream.Count(ctx, a, t) }); err != nil {
					return fmt.Errorf("count %s: %w", key, err)
				}
			}
			if n == 0 {
				// The count may miss records (bookings never updated count
				// by another field): an empty count is read, not trusted.
				end = b
			}
			if err := f.processStreamWindow(ctx, window{start: a, end: end, count: n}); err != nil {
				return err
			}
			a = end
		}
	}
	return nil
}

// processStreamWindow is the exactly-once protocol for one window of a
// stream, the one a form's window follows (commitBatch): intent, read into
// the spool, the files named in the intent, commit, checkpoint.
func (f *formRun) processStreamWindow(ctx context.Context, w window) error {
	b := f.batchFor(w)
	if err := f.p.checkHorizon(f.job.FormID, w.end); err != nil && !w.redo {
		return err
	}
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, CreatedAt: f.p.opts.Now().UTC()}
	if err := f.p.store.RecordIntent(ctx, f.job.FormID, intent); err != nil {
		return fmt.Errorf("record intent of batch %s: %w", b.ID, err)
	}
	fill := func(rows *batchRows, lin schema.Lineage) error {
		err := f.stream.Read(ctx, w.start, w.end, lin, f.p.opts.ChunkRows, func(rec arrow.Record) error {
			return rows.AddRecord(rec, b.TimeColumn)
		})
		if err != nil {
			return fmt.Errorf("read %s in [%s, %s): %w", f.job.FormID, w.start.Format(time.RFC3339Nano), w.end.Format(time.RFC3339Nano), err)
		}
		return nil
	}
	return f.commitBatch(ctx, w, b, intent, fill, func(*state.Intent, *state.Commit) {})
}
