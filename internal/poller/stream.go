package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// Stream is a source stream whose table has a fixed schema, read window by
// window along its time key: the scheduling API's bookings, whose time is
// the version time of each change. It runs through the same state
// records, batch ids, intents, sink commits and guards as a form's
// submissions; a form, whose table follows its questions, runs through Sync.
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
	// Read returns every record whose time lies in [start, end), once, as
	// one record stamped with lin. The caller releases it.
	Read(ctx context.Context, start, end time.Time, lin schema.Lineage) (arrow.Record, error)
	// Requests is how many requests the stream has made so far.
	Requests() int64
}

// SyncStream runs the live pass of a stream: every gap in [from, now - lag).
func (p *Poller) SyncStream(ctx context.Context, s Stream, from time.Time) Result {
	started := p.opts.Now()
	res := Result{FormID: s.Key(), Table: s.Table()}
	lock := p.formLock(s.Key())
	if !lock.TryLock() {
		res.Err = fmt.Errorf("sync %s: %w", s.Key(), ErrBusy)
		return res
	}
	defer lock.Unlock()
	before := s.Requests()
	r := &streamRun{p: p, s: s, log: p.opts.Logger.With(zap.String("stream", s.Key()))}
	err := r.execute(ctx, from, p.Horizon())
	res.Rows, res.Batches, res.Recovered = r.rows.Load(), int(r.batches.Load()), r.recovered
	res.Interrupted = r.interrupted
	res.Requests = s.Requests() - before
	res.Duration = p.opts.Now().Sub(started)
	if st, gerr := p.store.Get(context.WithoutCancel(ctx), s.Key()); gerr == nil && len(st.Committed) > 0 {
		res.CoveredStart, res.CoveredEnd = st.Committed[0].Start, st.Committed.End()
	}
	if err != nil {
		res.Err = err
		if serr := p.store.SetError(context.WithoutCancel(ctx), s.Key(), err.Error()); serr != nil {
			r.log.Warn("could not record the error in the state store", zap.Error(serr))
		}
	}
	return res
}

// streamRun is one pass over one stream.
type streamRun struct {
	p           *Poller
	s           Stream
	log         *zap.Logger
	gen         int
	recovered   int
	interrupted bool
	rows        atomic.Int64
	batches     atomic.Int64
}

func (r *streamRun) execute(ctx context.Context, from, to time.Time) error {
	key, store := r.s.Key(), r.p.store
	st, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read state of %s: %w", key, err)
	}
	if st.Refresh != nil {
		if st, err = r.p.finishRefresh(ctx, key, st); err != nil {
			return err
		}
	}
	if end := st.Committed.End(); end.After(r.p.opts.Now()) {
		return &FutureCommitError{FormID: key, End: end, LastSuccess: st.LastSuccess}
	}
	if err := r.p.checkOwnOutput(ctx, key, r.s.Table(), st); err != nil {
		return err
	}
	r.gen = st.Generation
	redo, recovered, err := r.p.recoverIntents(ctx, st, r.log, r.batchFor)
	r.recovered = recovered
	if err != nil {
		return err
	}
	for _, w := range redo {
		if err := r.process(ctx, w); err != nil {
			return fmt.Errorf("finish the open batch of %s left by an earlier run: %w", key, err)
		}
	}
	if st, err = store.Get(ctx, key); err != nil {
		return fmt.Errorf("read state of %s: %w", key, err)
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
			if r.p.Draining() {
				r.interrupted = true
				return nil
			}
			n, err := r.s.Count(ctx, a, b)
			if err != nil {
				return fmt.Errorf("count %s in [%s, %s): %w", key, a.Format(time.RFC3339), b.Format(time.RFC3339), err)
			}
			end := b
			if n > r.p.opts.MaxRowsPerBatch {
				if end, _, err = r.p.split(a, a, b, n, func(t time.Time) (int, error) { return r.s.Count(ctx, a, t) }); err != nil {
					return fmt.Errorf("count %s: %w", key, err)
				}
			}
			if n == 0 {
				// The count may miss records (bookings never updated count
				// by another field): an empty count is read, not trusted.
				end = b
			}
			if err := r.process(ctx, window{start: a, end: end, count: n}); err != nil {
				return err
			}
			a = end
		}
	}
	return nil
}

func (r *streamRun) batchFor(w window) sink.Batch {
	id := w.id
	if id == "" {
		id = BatchID(r.s.Key(), w.start, w.end)
		if r.gen > 0 {
			id += fmt.Sprintf("-g%d", r.gen)
		}
	}
	table := r.s.Table()
	if w.table != "" {
		table = w.table
	}
	return sink.Batch{ID: id, FormID: r.s.Key(), Table: table, WindowStart: w.start, WindowEnd: w.end,
		TimeColumn: r.s.TimeColumn(), KeyColumn: r.s.KeyColumn(), VersionColumn: r.s.TimeColumn(), Parts: w.parts, Attempt: w.attempt}
}

// process is the exactly-once protocol for one window of a stream: intent,
// read, the files named in the intent, commit, checkpoint.
func (r *streamRun) process(ctx context.Context, w window) error {
	key := r.s.Key()
	b := r.batchFor(w)
	if err := r.p.checkHorizon(key, w.end); err != nil && !w.redo {
		return err
	}
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, CreatedAt: r.p.opts.Now().UTC()}
	if err := r.p.store.RecordIntent(ctx, key, intent); err != nil {
		return fmt.Errorf("record intent of batch %s: %w", b.ID, err)
	}
	drop := func() {
		if w.redo {
			return // that run may have sent it
		}
		if err := r.p.store.DropIntent(context.WithoutCancel(ctx), key, b.ID); err != nil {
			r.log.Warn("could not drop the intent of an abandoned batch; the next run resolves it", zap.String("batch_id", b.ID), zap.Error(err))
		}
	}
	rec, err := r.s.Read(ctx, w.start, w.end, schema.Lineage{BatchID: b.ID, SyncedAt: r.p.opts.Now().UTC()})
	if err != nil {
		drop()
		return fmt.Errorf("read %s in [%s, %s): %w", key, w.start.Format(time.RFC3339Nano), w.end.Format(time.RFC3339Nano), err)
	}
	defer rec.Release()
	n := rec.NumRows()
	if n > 0 {
		if pt, ok := r.p.sink.(sink.Partitioner); ok {
			parts, err := partsOf(rec, b.TimeColumn, pt.PartitionOf)
			if err != nil {
				drop()
				return fmt.Errorf("batch %s: %w", b.ID, err)
			}
			b.Parts, intent.Parts = parts, parts
			b.Attempt = newAttempt()
			intent.Attempt = b.Attempt
			if w.redo {
				b.Replace, b.Stale = true, stale(w.parts, parts)
			}
			if err := r.p.store.RecordIntent(ctx, key, intent); err != nil {
				drop()
				return fmt.Errorf("record the files of batch %s: %w", b.ID, err)
			}
		}
		if err := r.p.sink.Commit(ctx, b, rec); err != nil {
			// The sink may hold part of it: the intent stays.
			return fmt.Errorf("commit batch %s of %s: %w", b.ID, key, err)
		}
	}
	commit := state.Commit{BatchID: b.ID, Window: state.Interval{Start: w.start, End: w.end}, Rows: int(n)}
	if err := r.p.store.Commit(context.WithoutCancel(ctx), key, commit); err != nil {
		return fmt.Errorf("move the checkpoint of %s past batch %s: %w", key, b.ID, err)
	}
	r.rows.Add(n)
	r.batches.Add(1)
	return nil
}

// partsOf are the partitions of rec's time column, sorted.
func partsOf(rec arrow.Record, col string, partOf func(time.Time) string) ([]string, error) {
	idx := rec.Schema().FieldIndices(col)
	if len(idx) != 1 {
		return nil, fmt.Errorf("the record has no single %s column", col)
	}
	ts, ok := rec.Column(idx[0]).(*array.Timestamp)
	if !ok {
		return nil, errors.New("column " + col + " is not a timestamp")
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	seen := map[string]bool{}
	for i := 0; i < ts.Len(); i++ {
		seen[partOf(ts.Value(i).ToTime(unit))] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
