package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// backend is where a Streams keeps its records: a bbolt file (Bolt), an
// object in a bucket (Object), or an object per account (Sharded). It
// knows how to read and write a stream's record in one transaction and
// where the version index lies; what a write means (intents, commits,
// resets, refreshes) is Streams', written once for every backend.
//
// A new backend is a type in this package with these methods that embeds
// Streams over itself (see newStreams), and a run of the contract suite
// (storetest) over it.
type backend interface {
	// record returns the record of the stream key: StreamState{Key: key}
	// when it has none, a *CorruptError naming it when it is damaged.
	record(ctx context.Context, key string) (StreamState, error)
	// records returns every record, ordered by key; a damaged one has only
	// its key and Damaged set.
	records(ctx context.Context) ([]StreamState, error)
	// update runs fn on the record of key (zero if absent) in one
	// transaction, and makes the record as fn left it durable before it
	// returns. fn's error rolls the transaction back; errUnchanged does
	// so and update returns nil. A damaged record fails the write with its
	// *CorruptError unless overDamage is set, when fn gets an empty record
	// in its place (a reset). The index transaction ix is valid in fn only.
	update(ctx context.Context, key string, overDamage bool, fn func(st *StreamState, ix indexTx) error) error
	// versions is Store.Versions.
	versions(ctx context.Context, key string, from, to time.Time, fn func(Entry) error) error
	// secret and putSecret are Store.GetSecret and Store.PutSecret.
	secret(ctx context.Context, name string) ([]byte, error)
	putSecret(ctx context.Context, name string, value []byte) error
	// close lets go of the file or lease; a second call returns the
	// first's result.
	close() error
}

// indexTx is the version index of one stream inside a backend's update:
// its changes land in the same transaction as the record's.
type indexTx interface {
	// pend keeps c under batchID, for the batch's commit after a stop.
	pend(batchID string, c *IndexChange) error
	// settle forgets the change pend kept under batchID and, when read
	// is set, returns it (nil when none was kept).
	settle(batchID string, read bool) (*IndexChange, error)
	// apply lands c in the index and counts it in st.Indexed.
	apply(st *StreamState, c *IndexChange) error
	// clear forgets the whole index of the stream and every kept change.
	clear() error
}

// Streams is the one Store: every rule of what a write does to a stream's
// state lives here, over the backend that keeps the records. Bolt, Object
// and Sharded are Streams over their own backends, with what only that
// backend offers (a path, a lease, claims) beside it.
//
// It is safe for concurrent use: each write is one backend transaction.
type Streams struct {
	b     backend
	clock func() time.Time // UpdatedAt, and intents without CreatedAt
}

var _ Store = (*Streams)(nil)

// newStreams is the store over b; nil clock means time.Now.
func newStreams(b backend, clock func() time.Time) Streams {
	if clock == nil {
		clock = time.Now
	}
	return Streams{b: b, clock: clock}
}

// write applies ch to the record of key and, unless idx is nil, lets idx
// change the stream's index (and the record) in the same transaction;
// overDamage replaces a damaged record (a reset does, nothing else).
func (s *Streams) write(ctx context.Context, key string, ch change, idx func(st *StreamState, ix indexTx) error, overDamage bool) error {
	return s.b.update(ctx, key, overDamage, func(st *StreamState, ix indexTx) error {
		// The time is read inside the transaction, so that UpdatedAt
		// follows the order the writes land in.
		now := Normalize(s.clock())
		if err := ch(st, now); err != nil {
			return err
		}
		if idx != nil {
			if err := idx(st, ix); err != nil {
				return err
			}
		}
		st.UpdatedAt = now
		return nil
	})
}

// Get returns the state of a stream; StreamState{Key: key} if it has none.
func (s *Streams) Get(ctx context.Context, key string) (StreamState, error) {
	return s.b.record(ctx, key)
}

// List returns the state of every stream that has one, by key.
func (s *Streams) List(ctx context.Context) ([]StreamState, error) {
	return s.b.records(ctx)
}

// RecordIntent records the intent in.BatchID, replacing one of the same
// id, and keeps its index change (in.Index) for its commit.
func (s *Streams) RecordIntent(ctx context.Context, key string, in Intent) error {
	ch, err := intentChange(key, in)
	if err != nil {
		return err
	}
	var idx func(*StreamState, indexTx) error
	if in.Index != nil {
		idx = func(_ *StreamState, ix indexTx) error { return ix.pend(in.BatchID, in.Index) }
	}
	if err := s.write(ctx, key, ch, idx, false); err != nil {
		return fmt.Errorf("record intent %s for form %s: %w", in.BatchID, key, err)
	}
	return nil
}

// Commit applies c in one transaction: the intent is cleared, the window
// covered, the schema pinned, the batch counted, and its index change (its
// own, or the one its intent kept) applied. A replay, whose intent is gone
// and window already covered, changes nothing, so counters never count a
// batch twice.
func (s *Streams) Commit(ctx context.Context, key string, c Commit) error {
	ch, err := commitChange(key, c)
	if err != nil {
		return err
	}
	idx := func(st *StreamState, ix indexTx) error {
		change := c.Index
		if c.BatchID != "" {
			// The kept change is read only when the commit brings none:
			// a commit with its own never fails on a damaged kept one.
			kept, err := ix.settle(c.BatchID, change == nil)
			if err != nil {
				return err
			}
			if change == nil {
				change = kept
			}
		}
		return ix.apply(st, change)
	}
	if err := s.write(ctx, key, ch, idx, false); err != nil {
		return fmt.Errorf("commit batch %q of form %s: %w", c.BatchID, key, err)
	}
	return nil
}

// DropIntent forgets an intent and the index change it kept; one that is
// not there is already dropped.
func (s *Streams) DropIntent(ctx context.Context, key, batchID string) error {
	idx := func(_ *StreamState, ix indexTx) error {
		_, err := ix.settle(batchID, false)
		return err
	}
	if err := s.write(ctx, key, dropIntentChange(batchID), idx, false); err != nil {
		return fmt.Errorf("drop intent %s of form %s: %w", batchID, key, err)
	}
	return nil
}

// SetSchema pins schema for the stream; nil unpins it.
func (s *Streams) SetSchema(ctx context.Context, key string, schema json.RawMessage) error {
	ch, err := schemaChange(key, schema)
	if err != nil {
		return err
	}
	if err := s.write(ctx, key, ch, nil, false); err != nil {
		return fmt.Errorf("pin schema of form %s: %w", key, err)
	}
	return nil
}

// SetError records msg as the stream's last error; "" clears it.
func (s *Streams) SetError(ctx context.Context, key string, msg string) error {
	if err := s.write(ctx, key, errorChange(msg), nil, false); err != nil {
		return fmt.Errorf("record last error of form %s: %w", key, err)
	}
	return nil
}

// SetSucceeded records that a pass of the stream ended well at t.
func (s *Streams) SetSucceeded(ctx context.Context, key string, t time.Time) error {
	if err := s.write(ctx, key, succeededChange(t), nil, false); err != nil {
		return fmt.Errorf("record the success of a pass of form %s: %w", key, err)
	}
	return nil
}

// clearIndex is the index step of a reset: the stream's index goes with
// its windows.
func clearIndex(_ *StreamState, ix indexTx) error { return ix.clear() }

// Reset forgets the stream's windows, intents, schema, index and counters
// and moves it to its next generation. The output is not touched. It is
// the one write that replaces a damaged record.
func (s *Streams) Reset(ctx context.Context, key string) error {
	if err := s.write(ctx, key, resetChange, clearIndex, true); err != nil {
		return fmt.Errorf("reset state of form %s: %w", key, err)
	}
	return nil
}

// Uncommit forgets the stream's committed windows from instant from on.
func (s *Streams) Uncommit(ctx context.Context, key string, from time.Time) error {
	if err := s.write(ctx, key, uncommitChange(key, from), nil, false); err != nil {
		return fmt.Errorf("uncommit form %s from %s: %w", key, from.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// BeginRefresh marks a full refresh of the stream's table under way.
func (s *Streams) BeginRefresh(ctx context.Context, key string, r Refresh) error {
	ch, err := beginRefreshChange(key, r)
	if err != nil {
		return err
	}
	if err := s.write(ctx, key, ch, nil, false); err != nil {
		return fmt.Errorf("begin refresh of form %s: %w", key, err)
	}
	return nil
}

// FinishRefresh resets the stream and clears its refresh mark in one
// transaction.
func (s *Streams) FinishRefresh(ctx context.Context, key string) error {
	if err := s.write(ctx, key, finishRefreshChange, clearIndex, true); err != nil {
		return fmt.Errorf("finish refresh of form %s: %w", key, err)
	}
	return nil
}

// Versions calls fn with every record of the stream's version index whose
// time is in [from, to), in time order.
func (s *Streams) Versions(ctx context.Context, key string, from, to time.Time, fn func(Entry) error) error {
	return s.b.versions(ctx, key, from, to, fn)
}

// SetReconciled records that a reconcile pass of the stream ended at t.
func (s *Streams) SetReconciled(ctx context.Context, key string, t time.Time) error {
	if err := s.write(ctx, key, reconciledChange(t), nil, false); err != nil {
		return fmt.Errorf("record the reconcile of form %s: %w", key, err)
	}
	return nil
}

// GetSecret returns the value stored under name; nil when there is none.
func (s *Streams) GetSecret(ctx context.Context, name string) ([]byte, error) {
	return s.b.secret(ctx, name)
}

// PutSecret stores value under name (nil deletes it), durably, before it
// returns.
func (s *Streams) PutSecret(ctx context.Context, name string, value []byte) error {
	return s.b.putSecret(ctx, name, value)
}

// Close closes the backend: the file, or the lease. Calling it again
// returns the first result.
func (s *Streams) Close() error { return s.b.close() }
