package poller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// ForeignOutputError means a stream's table already holds batches that the
// state never recorded: another state wrote them (a second working
// directory, a lost or replaced state file, two configs on one output).
// Syncing would write their rows a second time, so the stream is refused
// until the state adopts them.
type ForeignOutputError struct {
	Stream  string
	Table   string
	Output  string // where the table lives, for the message
	State   string // the state store in use, for the message
	Batches int    // how many such batches
	Example string // one of their ids
}

func (e *ForeignOutputError) Error() string {
	return fmt.Sprintf("%s: table %s in %s already holds %d of its batches (e.g. %s) that state %s never recorded, so syncing would write their rows a second time: "+
		"another state wrote them (a second working directory, a lost or replaced state file, or two configs on one output); run `syncd state adopt %s` to take them over from the output, or point the config at the state that wrote them; nothing was written",
		e.Stream, e.Table, e.Output, e.Batches, e.Example, e.State, e.Stream)
}

// checkOwnOutput refuses a stream whose state has committed no batch yet
// while its table already holds batches of it (of this generation or a
// later one: batches written before a reset are the user's to keep). It
// asks the sink only then: a state that committed a batch wrote into this
// output, and the question costs a listing of the table.
func (p *Poller) checkOwnOutput(ctx context.Context, stream, table string, st state.StreamState) error {
	inv, ok := p.sink.(sink.Inventory)
	if !ok || st.Batches > 0 || len(st.Intents) > 0 {
		return nil
	}
	ids, err := inv.HeldBatches(ctx, table)
	if err != nil {
		return fmt.Errorf("%s: ask the output whether table %s already holds batches of it: %w", stream, table, err)
	}
	var foreign []string
	for _, id := range ids {
		if n, ok := ParseBatchID(stream, id); ok && n.Generation >= st.Generation {
			foreign = append(foreign, id)
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	slices.Sort(foreign)
	return &ForeignOutputError{Stream: stream, Table: table, Output: p.opts.OutputName, State: p.opts.StateName, Batches: len(foreign), Example: foreign[0]}
}

// TargetOf is the adoption of stream s: its table's columns, and its
// version index when it keeps one (a Reconciler).
func TargetOf(s Stream) AdoptTarget {
	cols := s.Columns()
	_, versioned := s.(Reconciler)
	t := AdoptTarget{Stream: s.Key(), Table: s.Table(), Key: cols.Key, Version: cols.Version, Time: cols.Time, Index: versioned}
	if ev, ok := s.(Evolver); ok {
		t.Unpin = ev.Unpin
	}
	return t
}

// AdoptTarget is a stream whose state is rebuilt from its table's output.
type AdoptTarget struct {
	Stream string
	Table  string
	// Columns of the rows' identity; Index is set for a stream that keeps
	// a version index (forms): it is rebuilt from the rows too.
	Key, Version, Time string
	Index              bool
	// Unpin reads the schema a batch's files carry (an Evolver's); nil
	// for a fixed table.
	Unpin func([]byte) (table.Schema, error)
}

// AdoptResult is what Adopt took over.
type AdoptResult struct {
	Stream     string `json:"stream"`
	Table      string `json:"table"`
	Batches    int    `json:"batches"`    // whole in the output: their windows are committed now
	Known      int    `json:"known"`      // already committed in the state
	Open       int    `json:"open"`       // part-written: recorded open, fetched again and rewritten by the next pass
	Earlier    int    `json:"earlier"`    // of generations before a reset: left as they are
	Rows       int64  `json:"rows"`       // rows of the batches adopted
	Indexed    int    `json:"indexed"`    // records put in the version index
	Generation int    `json:"generation"` // the stream's generation after
	Schema     bool   `json:"schema"`     // a pinned schema was taken from the files
	Windows    int    `json:"windows"`    // committed windows after
	Layout     string `json:"layout"`     // the layout the table's files show ("": none found)
}

// Adopt rebuilds a stream's state from what its table holds: the windows
// of the batches in the output become committed (counted as batches), a
// batch only part-written by a stopped run becomes an open batch, so the
// next pass fetches its window again under its own id and rewrites its
// files, the pinned schema comes from the files' footers, and the version
// index from the rows. Losing the state then costs a scan of the output,
// never a duplicate. Batches the state already records are left as they
// are, so adopting twice, or after `state restore`, changes nothing more.
func (p *Poller) Adopt(ctx context.Context, t AdoptTarget) (AdoptResult, error) {
	res := AdoptResult{Stream: t.Stream, Table: t.Table}
	inv, ok := p.sink.(sink.Inventory)
	if !ok {
		return res, fmt.Errorf("adopt %s: this sink cannot tell which batches a table holds", t.Stream)
	}
	lock := p.formLock(t.Stream)
	if !lock.TryLock() {
		return res, fmt.Errorf("adopt %s: %w", t.Stream, ErrBusy)
	}
	defer lock.Unlock()
	st, err := p.store.Get(ctx, t.Stream)
	if err != nil {
		return res, fmt.Errorf("adopt %s: read state: %w", t.Stream, err)
	}
	if st.Refresh != nil {
		return res, fmt.Errorf("adopt %s: a refresh of table %s is under way: run `syncd once --form %s` to finish it first", t.Stream, st.Refresh.Table, t.Stream)
	}
	held, err := inv.DescribeBatches(ctx, t.Table)
	if err != nil {
		return res, fmt.Errorf("adopt %s: read what table %s holds: %w", t.Stream, t.Table, err)
	}
	// The table keeps the layout its files were written with.
	var layout sink.Layout
	if lf, ok := p.sink.(sink.LayoutFinder); ok {
		if layout, err = lf.TableLayout(ctx, t.Table, t.Time); err != nil {
			return res, fmt.Errorf("adopt %s: %w", t.Stream, err)
		}
	}
	res.Layout = string(layout)
	type found struct {
		sink.Held
		name BatchName
	}
	var batches []found
	gen := st.Generation
	for _, h := range held {
		if n, ok := ParseBatchID(t.Stream, h.ID); ok {
			batches = append(batches, found{h, n})
			gen = max(gen, n.Generation)
		}
	}
	// Batches of new rows first, in window order; reconcile batches (whose
	// windows the new rows' batches cover) after them.
	slices.SortFunc(batches, func(a, b found) int {
		if (a.name.Reconcile == 0) != (b.name.Reconcile == 0) {
			if a.name.Reconcile == 0 {
				return -1
			}
			return 1
		}
		return a.name.Start.Compare(b.name.Start)
	})
	var pinned table.Schema
	// reindex: the output may hold a reconcile batch the state never
	// committed (its window is committed all the same), whose versions
	// the index then lacks.
	reindex := false
	for _, b := range batches {
		if b.name.Generation < gen {
			res.Earlier++
			continue
		}
		window := state.Interval{Start: b.name.Start, End: b.name.End}
		if !b.Complete {
			// A reconcile batch's window is always committed, so only its
			// intent tells: a committed batch is whole in the output, and
			// one that is not and has no intent is one whose intent the
			// state lost.
			if _, open := st.Intents[b.ID]; open || b.name.Reconcile == 0 && st.Committed.Covers(window) {
				continue
			}
			parts := b.AllParts
			if len(parts) == 0 {
				parts = b.Parts
			}
			in := state.Intent{BatchID: b.ID, Table: t.Table, Start: window.Start, End: window.End, Parts: parts, Attempt: b.Attempt,
				Layout: string(layout), Reconcile: b.name.Reconcile != 0, CreatedAt: p.opts.Now().UTC()}
			if b.name.Reconcile != 0 {
				in.CreatedAt = time.UnixMilli(b.name.Reconcile).UTC()
			}
			if err := p.store.RecordIntent(ctx, t.Stream, in); err != nil {
				return res, fmt.Errorf("adopt %s: record part-written batch %s as open: %w", t.Stream, b.ID, err)
			}
			res.Open++
			continue
		}
		if len(b.Schema) > 0 && t.Unpin != nil {
			tbl, err := t.Unpin(b.Schema)
			if err != nil {
				return res, fmt.Errorf("adopt %s: the schema in the footer of batch %s: %w", t.Stream, b.ID, err)
			}
			pinned = mergeTables(pinned, tbl)
		}
		_, open := st.Intents[b.ID]
		if open && len(stale(b.Parts, b.AllParts)) > 0 {
			// Files of an earlier attempt lie beside the whole one (a
			// redo stopped before it removed them): committed now, they
			// would stay; left open, the next pass removes them.
			res.Open++
			continue
		}
		if !open && st.Committed.Covers(window) {
			// Passes of a stream never overlap, and a whole reconcile
			// pass records its start (Reconciled) only after its batches
			// are committed: a reconcile batch of a pass that started
			// later may be one the state never committed (a state
			// restored from a backup), so the index is read again from
			// the output.
			if b.name.Reconcile > st.Reconciled.UnixMilli() {
				reindex = true
			}
			res.Known++
			continue
		}
		c := state.Commit{BatchID: b.ID, Window: window, Rows: int(b.Rows), Generation: gen, Layout: string(layout)}
		if err := p.store.Commit(ctx, t.Stream, c); err != nil {
			return res, fmt.Errorf("adopt %s: commit batch %s found in the output: %w", t.Stream, b.ID, err)
		}
		if st, err = p.store.Get(ctx, t.Stream); err != nil {
			return res, fmt.Errorf("adopt %s: read state: %w", t.Stream, err)
		}
		res.Batches++
		res.Rows += b.Rows
	}
	if pinned != nil {
		if len(st.Schema) > 0 {
			cur, err := t.Unpin(st.Schema)
			if err != nil {
				return res, fmt.Errorf("adopt %s: read the pinned schema: %w", t.Stream, err)
			}
			pinned = cur.Merge(pinned)
		}
		raw, err := pinned.Marshal()
		if err != nil {
			return res, fmt.Errorf("adopt %s: %w", t.Stream, err)
		}
		if err := p.store.SetSchema(ctx, t.Stream, raw); err != nil {
			return res, fmt.Errorf("adopt %s: pin the schema: %w", t.Stream, err)
		}
		res.Schema = true
	}
	// An index kept for sync.lookback only (formats 1 and 2) starts after
	// the epoch: ErrNoIndex sends the operator here to index the earlier
	// rows, so it is read again from the output too.
	if st.IndexedFrom.After(epoch) {
		reindex = true
	}
	if t.Index && (res.Batches > 0 || reindex) {
		n, err := p.adoptIndex(ctx, t)
		if err != nil {
			return res, err
		}
		res.Indexed = n
	}
	if st, err = p.store.Get(ctx, t.Stream); err != nil {
		return res, fmt.Errorf("adopt %s: read state: %w", t.Stream, err)
	}
	res.Generation, res.Windows = st.Generation, len(st.Committed)
	p.opts.Logger.Info("adopted the output of a stream", zap.String(logkey.Stream, t.Stream), zap.String(logkey.Table, t.Table),
		zap.Int(logkey.Batches, res.Batches), zap.Int(logkey.Open, res.Open), zap.Int64(logkey.Rows, res.Rows))
	return res, nil
}

// adoptIndex rebuilds the version index from the rows the table holds:
// the latest version of each record, none for a record whose latest row is
// a tombstone. The index covers the whole history, as a pass's does.
func (p *Poller) adoptIndex(ctx context.Context, t AdoptTarget) (int, error) {
	vr, ok := p.sink.(sink.VersionReader)
	if !ok {
		return 0, nil
	}
	type latest struct {
		time, version time.Time
		deleted       bool
	}
	index := map[string]latest{}
	err := vr.ReadVersions(ctx, sink.TableColumns{Table: t.Table, Key: t.Key, Version: t.Version, Time: t.Time}, func(r sink.RowVersion) error {
		if r.Version.IsZero() {
			// A record never updated holds its time as its version, as
			// the index of a pass records it (entryOf).
			r.Version = r.Time
		}
		if cur, ok := index[r.Key]; ok {
			// The latest version wins; of two rows of one version, the
			// tombstone.
			if r.Version.Before(cur.version) || r.Version.Equal(cur.version) && !r.Deleted {
				return nil
			}
		}
		index[r.Key] = latest{time: r.Time, version: r.Version, deleted: r.Deleted}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("adopt %s: read the rows of table %s: %w", t.Stream, t.Table, err)
	}
	change := &state.IndexChange{}
	for id, l := range index {
		e := state.Entry{ID: id, Version: state.Version{Time: l.time, Hash: state.TimeVersion(l.version)}}
		if l.deleted {
			change.Gone = append(change.Gone, e)
		} else {
			change.Put = append(change.Put, e)
		}
	}
	if err := p.store.Commit(ctx, t.Stream, state.Commit{Index: change, IndexFrom: epoch}); err != nil {
		return 0, fmt.Errorf("adopt %s: record the version index: %w", t.Stream, err)
	}
	return len(change.Put), nil
}
