package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// change is how one write transforms a stream's state, inside the
// backend's transaction; returning errUnchanged makes the store write
// nothing. Streams applies them over every backend, so the backends agree
// on what a replayed Commit or a dropped intent means.
type change func(st *StreamState, now time.Time) error

// errUnchanged makes update roll back: nothing to write, nothing to fsync.
var errUnchanged = errors.New("unchanged")

// intentChange records (or replaces) the intent in.BatchID.
func intentChange(formID string, in Intent) (change, error) {
	if in.BatchID == "" {
		return nil, fmt.Errorf("record intent for form %s: the batch id is empty", formID)
	}
	in.Start, in.End, in.CreatedAt = Normalize(in.Start), Normalize(in.End), Normalize(in.CreatedAt)
	if in.End.Before(in.Start) {
		return nil, fmt.Errorf("record intent %s for form %s: window %v ends before it starts", in.BatchID, formID, Interval{in.Start, in.End})
	}
	if in.Rows < 0 {
		return nil, fmt.Errorf("record intent %s for form %s: negative row count %d", in.BatchID, formID, in.Rows)
	}
	return func(st *StreamState, now time.Time) error {
		if in.Layout != "" {
			// The table's layout is recorded with its first intent, before
			// any of its files is written, and never changes under them.
			switch st.Layout {
			case "":
				st.Layout = in.Layout
			case in.Layout:
			default:
				return fmt.Errorf("record intent %s for form %s: its files would be partitioned by %s, but the table's are by %s", in.BatchID, formID, in.Layout, st.Layout)
			}
		}
		if in.CreatedAt.IsZero() {
			in.CreatedAt = now
		}
		if st.Intents == nil {
			st.Intents = make(map[string]Intent)
		}
		st.Intents[in.BatchID] = in
		return nil
	}, nil
}

// commitChange clears the intent, covers the window, pins the schema, counts
// the batch. A replay, whose intent
// is gone and window already covered, changes nothing, so counters never
// count a batch twice.
func commitChange(formID string, c Commit) (change, error) {
	w := c.Window.normal()
	if w.End.Before(w.Start) {
		return nil, fmt.Errorf("commit batch %q of form %s: window %v ends before it starts", c.BatchID, formID, w)
	}
	if c.Rows < 0 {
		return nil, fmt.Errorf("commit batch %q of form %s: negative row count %d", c.BatchID, formID, c.Rows)
	}
	if c.Generation < 0 {
		return nil, fmt.Errorf("commit batch %q of form %s: negative generation %d", c.BatchID, formID, c.Generation)
	}
	if c.Schema != nil && !json.Valid(c.Schema) {
		return nil, fmt.Errorf("commit batch %q of form %s: the schema is not valid JSON", c.BatchID, formID)
	}
	return func(st *StreamState, now time.Time) error {
		if c.BatchID != "" {
			if _, open := st.Intents[c.BatchID]; open {
				delete(st.Intents, c.BatchID)
				if len(st.Intents) == 0 {
					st.Intents = nil
				}
			} else if st.Committed.Covers(w) {
				return errUnchanged
			}
			st.Batches++
		}
		st.Committed = st.Committed.Add(w)
		st.Rows += int64(c.Rows)
		if st.Layout == "" {
			st.Layout = c.Layout
		}
		if !c.IndexFrom.IsZero() {
			st.IndexedFrom = Normalize(c.IndexFrom)
		}
		if !c.Reconciled.IsZero() {
			st.Reconciled = Normalize(c.Reconciled)
		}
		st.Generation = max(st.Generation, c.Generation)
		if r := c.Reconcile; r != nil {
			st.ReconciledWindows++
			st.VersionsWritten += int64(r.Versions)
			st.Tombstones += int64(r.Tombstones)
		}
		if c.Schema != nil {
			st.Schema = bytes.Clone(c.Schema)
		}
		return nil
	}, nil
}

// succeededChange records a pass that ended well at t: a commit alone is
// no success (a pass may commit an empty range, then fail to write).
func succeededChange(t time.Time) change {
	t = Normalize(t)
	return func(st *StreamState, _ time.Time) error {
		st.LastSuccess = t
		st.LastError = ""
		return nil
	}
}

// dropIntentChange forgets an intent; one that is not there is already
// dropped.
func dropIntentChange(batchID string) change {
	return func(st *StreamState, _ time.Time) error {
		if _, open := st.Intents[batchID]; !open {
			return errUnchanged
		}
		delete(st.Intents, batchID)
		if len(st.Intents) == 0 {
			st.Intents = nil
		}
		return nil
	}
}

// schemaChange pins schema; nil unpins it.
func schemaChange(formID string, schema json.RawMessage) (change, error) {
	if schema != nil && !json.Valid(schema) {
		return nil, fmt.Errorf("pin schema of form %s: it is not valid JSON", formID)
	}
	return func(st *StreamState, _ time.Time) error {
		st.Schema = bytes.Clone(schema)
		return nil
	}, nil
}

// reconciledChange records the end of a reconcile pass.
func reconciledChange(t time.Time) change {
	return func(st *StreamState, _ time.Time) error {
		st.Reconciled = Normalize(t)
		return nil
	}
}

// errorChange records msg as the form's last error; "" clears it.
func errorChange(msg string) change {
	return func(st *StreamState, _ time.Time) error {
		st.LastError = msg
		return nil
	}
}

// resetChange forgets everything a sync of the form built up and moves it
// to the next generation (see StreamState.Generation). The table's layout
// stays: its files stay, and the rows fetched again join them.
func resetChange(st *StreamState, now time.Time) error {
	*st = StreamState{Key: st.Key, Generation: st.Generation + 1, UpdatedAt: now, Layout: st.Layout}
	return nil
}

// finishRefreshChange is resetChange once the table's output is gone: the
// table written again chooses its layout again.
func finishRefreshChange(st *StreamState, now time.Time) error {
	*st = StreamState{Key: st.Key, Generation: st.Generation + 1, UpdatedAt: now}
	return nil
}

// uncommitChange forgets the committed windows from instant from on.
func uncommitChange(formID string, from time.Time) change {
	from = Normalize(from)
	return func(st *StreamState, _ time.Time) error {
		if len(st.Intents) > 0 {
			return fmt.Errorf("form %s has %d open batches: run `syncd once` to resolve them first", formID, len(st.Intents))
		}
		cut := st.Committed.Before(from)
		if len(cut) == len(st.Committed) && (len(cut) == 0 || cut[len(cut)-1].End.Equal(st.Committed[len(st.Committed)-1].End)) {
			return errUnchanged
		}
		st.Committed = cut
		return nil
	}
}

// beginRefreshChange marks a full refresh under way.
func beginRefreshChange(formID string, r Refresh) (change, error) {
	if r.Table == "" {
		return nil, fmt.Errorf("begin refresh of form %s: no table named", formID)
	}
	r.RequestedAt = Normalize(r.RequestedAt)
	return func(st *StreamState, now time.Time) error {
		if len(st.Intents) > 0 {
			return fmt.Errorf("form %s has %d open batches: run `syncd once` to resolve them first", formID, len(st.Intents))
		}
		if r.RequestedAt.IsZero() {
			r.RequestedAt = now
		}
		st.Refresh = &r
		return nil
	}, nil
}
