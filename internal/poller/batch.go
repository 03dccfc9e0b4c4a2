package poller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// processWindow is the exactly-once protocol for one window: record the
// intent, read the whole window off to the side, commit it to the sink
// under its batch id, then move the checkpoint and clear the intent in one
// state transaction. The versions the stream records of its rows go into
// the version index in that same transaction.
func (f *streamRun) processWindow(ctx context.Context, w window) error {
	if w.planSlot {
		defer f.p.opts.PlanGate.Release(1)
	}
	b := f.batchFor(w)
	if err := f.p.checkHorizon(f.key, w.end); err != nil && !w.redo {
		return err
	}
	// An open batch of an earlier run keeps the files its intent names
	// until this attempt names its own: a stop in between must not leave an
	// intent that names fewer files than are (partly) in the sink.
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, Layout: string(b.Layout), CreatedAt: f.p.opts.Now().UTC()}
	if err := f.p.store.RecordIntent(ctx, f.key, intent); err != nil {
		return fmt.Errorf("record intent of batch %s: %w", b.ID, err)
	}
	fill := func(rows *Rows) error {
		if err := f.s.Read(ctx, Window{Start: w.start, End: w.end, Count: w.count, AtMost: w.atMost, First: w.first}, rows); err != nil {
			return fmt.Errorf("read %s in [%s, %s): %w", f.key, w.start.Format(time.RFC3339Nano), w.end.Format(time.RFC3339Nano), err)
		}
		return nil
	}
	return f.commitBatch(ctx, w, b, intent, fill, func(in *state.Intent, c *state.Commit, rows *Rows) {
		if _, ok := f.s.(Reconciler); ok {
			idx := rows.index
			in.Index, c.Index = &idx, &idx
		}
	})
}

// commitBatch builds the rows of a batch whose intent is recorded (fill
// appends them), names its files in the intent, commits it to the sink and
// then to the state; extra adds what the batch records in the version index
// to both the intent and the commit.
func (f *streamRun) commitBatch(ctx context.Context, w window, b sink.Batch, intent state.Intent, fill func(*Rows) error, extra func(*state.Intent, *state.Commit, *Rows)) error {
	log := f.log.With(zap.String(logkey.BatchID, b.ID))
	if g := f.p.opts.Gate; g != nil {
		if err := g.Acquire(ctx, 1); err != nil {
			return fmt.Errorf("wait for a slot for batch %s: %w", b.ID, err)
		}
		defer g.Release(1)
	}
	base, err := f.schemaForFetch(ctx)
	if err != nil {
		f.dropIntent(ctx, w, b.ID)
		return err
	}
	lin := table.Lineage{BatchID: b.ID, SyncedAt: f.p.opts.Now().UTC()}
	rows := newRows(base, lin, b.TimeColumn, f.p.opts.Allocator, f.p.opts.ChunkRows, f.p.opts.SpoolDir, f.partOf())
	rows.indexHint = min(Window{Count: w.count, AtMost: w.atMost}.SizeHint(), f.p.opts.MaxRowsPerBatch)
	defer rows.release(f)
	if err := fill(rows); err != nil {
		f.dropIntent(ctx, w, b.ID)
		return err
	}
	built, stats := rows.finish()
	if built != nil {
		b.SchemaFingerprint = built.Fingerprint()
		// The files carry the schema they were built with: a state rebuilt
		// from the output (adopt) pins it again.
		if b.Schema, err = built.Marshal(); err != nil {
			f.dropIntent(ctx, w, b.ID)
			return fmt.Errorf("serialise the schema of batch %s: %w", b.ID, err)
		}
		f.noteStats(log, stats)
	}

	n := rows.rows()
	commit := state.Commit{BatchID: b.ID, Window: state.Interval{Start: w.start, End: w.end}, Rows: int(n), Layout: string(b.Layout)}
	extra(&intent, &commit, rows)
	_, parted := f.p.sink.(sink.Partitioner)
	if n > 0 && (parted || intent.Index != nil || b.Schema != nil) {
		// What the batch writes is known now: the intent names its files
		// and versions before the first is written, so a stop between two
		// files is resolved file by file, and a batch found in the sink
		// after a stop is committed with its versions.
		intent.Schema = b.Schema
		if parted {
			b.Parts = rows.parts()
			b.Attempt = newAttempt()
			intent.Parts, intent.Attempt = b.Parts, b.Attempt
			if w.redo {
				b.Replace, b.Stale = true, stale(w.parts, b.Parts)
				// Until the commit has removed the earlier attempt's files,
				// the intent names them too: a stop after this attempt's
				// files land but before the stale ones are gone then
				// leaves the batch open (Committed wants a file of this
				// attempt in every partition named), and the next run
				// fetches it again and removes them.
				intent.Parts = union(w.parts, b.Parts)
			}
		}
		if err := f.p.store.RecordIntent(ctx, f.key, intent); err != nil {
			f.dropIntent(ctx, w, b.ID)
			return fmt.Errorf("record the files of batch %s: %w", b.ID, err)
		}
	}
	if n > 0 {
		written, err := rows.commit(ctx, f, b, parted)
		f.bytes.Add(written)
		if err != nil {
			// The sink may or may not hold the batch: the intent stays, and the
			// next run asks the sink before it fetches the window again.
			return fmt.Errorf("commit batch %s of %s: %w", b.ID, f.key, err)
		}
	} else if parted && w.redo && len(w.parts) > 0 {
		// Fetched again with no rows (its records are gone at the
		// source), the batch writes no file, but the files an earlier
		// attempt wrote must go before the state commits the window:
		// a commit of no parts removes them. The intent still names
		// them, so a stop before they are gone leaves the batch open.
		b.Parts, b.Replace, b.Stale = nil, true, w.parts
		if _, err := f.p.sink.Commit(ctx, b, nil); err != nil {
			return fmt.Errorf("remove the files an earlier attempt of batch %s of %s wrote: %w", b.ID, f.key, err)
		}
	}

	f.schemaMu.Lock()
	defer f.schemaMu.Unlock()
	merged := f.pinned
	if built != nil {
		merged = mergeTables(f.pinned, built)
		if commit.Schema, err = merged.Marshal(); err != nil {
			return fmt.Errorf("serialise the schema of form %s: %w", f.key, err)
		}
	}
	// The batch is in the sink: finish the move even if the pass is being
	// cancelled, so that a clean stop leaves no intent to resolve.
	if err := f.p.store.Commit(context.WithoutCancel(ctx), f.key, commit); err != nil {
		return fmt.Errorf("move the checkpoint of form %s past batch %s: %w", f.key, b.ID, err)
	}
	f.pinned = merged
	f.rows.Add(n)
	f.batches.Add(1)
	log.Debug("batch committed", zap.Int64(logkey.Rows, n),
		zap.Time(logkey.WindowStart, w.start), zap.Time(logkey.WindowEnd, w.end))
	f.report(Progress{})
	return nil
}

// dropIntent forgets the intent of a batch this process never sent to the
// sink. An open batch of an earlier run keeps its intent: that run may have
// sent it.
func (f *streamRun) dropIntent(ctx context.Context, w window, batchID string) {
	if w.redo {
		return
	}
	if err := f.p.store.DropIntent(context.WithoutCancel(ctx), f.key, batchID); err != nil {
		f.log.Warn("could not drop the intent of an abandoned batch; the next run resolves it", zap.String(logkey.BatchID, batchID), zap.Error(err))
	}
}

// schemaForFetch evolves the pinned table with the source's metadata once
// per pass (an Evolver's), and returns a snapshot for one window's rows;
// nil for a fixed table.
func (f *streamRun) schemaForFetch(ctx context.Context) (table.Schema, error) {
	ev, ok := f.s.(Evolver)
	if !ok {
		return nil, nil
	}
	f.schemaMu.Lock()
	defer f.schemaMu.Unlock()
	if !f.metaFetched {
		first := f.pinned == nil
		t, changes, err := ev.Evolve(ctx, f.pinned)
		if err != nil {
			return nil, err
		}
		f.pinned = t
		if first {
			// A new table: its columns are no change.
			f.log.Info("table mapped", zap.Int(logkey.Columns, t.ArrowSchema().NumFields()))
		} else {
			logChanges(f.log, "the source's fields changed", changes)
		}
		f.metaFetched = true
	}
	return f.pinned, nil // a value: the source builds on its own copy
}

// noteStats logs what a batch's values did: one line per column whose
// values did not fit, with their count and the redacted shape of one of
// them (type and length, never the value), and one line
// for the columns the values added, with the details at debug.
func (f *streamRun) noteStats(log *zap.Logger, st table.Stats) {
	cols := make([]string, 0, len(st.Misfits))
	for col, n := range st.Misfits {
		f.misfits.Add(int64(n))
		cols = append(cols, col)
	}
	sort.Strings(cols)
	for _, col := range cols {
		keptIn := st.KeptIn[col]
		if keptIn == "" {
			keptIn = col + "__v_json" // a source that does not name it
		}
		log.Warn("values did not fit their column and were kept as JSON text", zap.String(logkey.Column, col), zap.Int(logkey.Values, st.Misfits[col]),
			zap.String(logkey.Example, st.MisfitExamples[col]), zap.String(logkey.KeptIn, keptIn))
	}
	for typ, n := range st.Discarded {
		f.discarded.Add(int64(n))
		if f.p.firstSighting(f.key, typ) {
			log.Warn("discarding answers of an unknown question type, as the API contract asks", zap.String(logkey.Type, typ), zap.Int(logkey.Answers, n))
		}
	}
	logChanges(log, "answers needed columns the form's questions did not have", st.Changes)
}

// logChanges logs schema changes as one info line that counts them by
// kind ("47 columns added, 2 type changes"), each change at debug.
func logChanges(log *zap.Logger, why string, changes []table.Change) {
	if len(changes) == 0 {
		return
	}
	for _, c := range changes {
		log.Debug("schema change", zap.String(logkey.Change, c.Kind), zap.String(logkey.Column, c.Column), zap.String(logkey.Detail, c.Detail))
	}
	log.Info("schema changed: "+SummarizeChanges(changes), zap.String(logkey.Why, why), zap.Int(logkey.Changes, len(changes)))
}

// SummarizeChanges counts changes by kind: "47 columns added, 2 type
// changes", in a fixed order.
func SummarizeChanges(changes []table.Change) string {
	counts := map[string]int{}
	for _, c := range changes {
		counts[c.Kind]++
	}
	words := []struct{ kind, one, many string }{
		{table.ChangeAdded, "column added", "columns added"},
		{table.ChangeRenamed, "question renamed (its column kept)", "questions renamed (their columns kept)"},
		{table.ChangeVariant, "type change (a variant column)", "type changes (variant columns)"},
		{table.ChangeTypeUpdated, "column type updated", "column types updated"},
	}
	var parts []string
	for _, w := range words {
		switch n := counts[w.kind]; n {
		case 0:
		case 1:
			parts = append(parts, "1 "+w.one)
		default:
			parts = append(parts, fmt.Sprintf("%d %s", n, w.many))
		}
		delete(counts, w.kind)
	}
	other := make([]string, 0, len(counts))
	for k := range counts {
		other = append(other, k)
	}
	sort.Strings(other)
	for _, k := range other {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

// firstSighting reports whether an unknown type is new for this form, so
// that each (form, type) is logged once per process.
func (p *Poller) firstSighting(formID, typ string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := formID + "\x00" + typ
	if p.loggedTypes[key] {
		return false
	}
	p.loggedTypes[key] = true
	return true
}

// mergeTables is the pinned schema after a window built with a snapshot of
// pinned has committed: windows of one pass run concurrently and each may
// have added columns, so the pin keeps the union.
func mergeTables(pinned, built table.Schema) table.Schema {
	if pinned == nil {
		return built
	}
	return pinned.Merge(built)
}

// stale are the partitions an earlier attempt of a batch wrote (before)
// that this attempt does not (now).
func stale(before, now []string) []string {
	var out []string
	for _, p := range before {
		if !slices.Contains(now, p) {
			out = append(out, p)
		}
	}
	return out
}

// union is the sorted partitions of a and b.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// newAttempt names an attempt at writing a batch's files: unique enough
// that two attempts of one batch never share it.
func newAttempt() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}
