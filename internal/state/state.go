// Package state keeps what syncd must remember between runs, per stream
// (keyed by its stream key): the windows of record time already committed
// to the sink, the batches in flight (intents), the pinned table schema
// and a few counters.
//
// The committed windows are a merged set of half-open intervals rather than
// a single checkpoint: backfill and live sync fill gaps in the same record,
// so no range is ever written twice. A window becomes covered only in the
// same transaction that clears its intent, after the sink committed the
// batch (see "Exactly once, on purpose" in the design).
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Intent is a batch in flight: recorded before the batch is fetched, cleared
// when it is committed. One found at start-up is resolved by asking the sink
// whether BatchID landed.
type Intent struct {
	BatchID   string    `json:"batch_id"`
	Table     string    `json:"table"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Rows      int       `json:"rows,omitempty"` // expected rows, when known
	CreatedAt time.Time `json:"created_at"`
	// Parts are the sink partitions the batch writes a file to, recorded
	// once its rows are fetched and before the first file is written.
	Parts []string `json:"parts,omitempty"`
	// Attempt names the attempt that writes those files (sink.Batch.Attempt).
	Attempt string `json:"attempt,omitempty"`
	// Layout is the partition layout of the table's files (sink.Layout):
	// the first intent that names one records it as the form's (Layout),
	// before any file is written, and one that names another is refused.
	Layout string `json:"layout,omitempty"`
	// Schema is the table schema the batch's rows were built with, once
	// they are (the source's, as Commit.Schema): a batch found in the sink
	// after a stop is committed with it, so the pin never misses the
	// columns its files hold.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Index is what the batch's Commit will record in the version index,
	// kept (beside the index, not in this record) so that a batch found in
	// the sink after a stop is committed with it: RecordIntent stores it
	// under the batch id, and a Commit of the batch without an Index of
	// its own applies it. Get does not read it back.
	Index *IndexChange `json:"-"`
	// Counts are what a reconcile batch writes, for its Commit after a stop.
	Counts *ReconcileCounts `json:"counts,omitempty"`
	// Reconcile marks a batch of changes found by re-reading a committed
	// window: its window is covered already.
	Reconcile bool `json:"reconcile,omitempty"`
}

// ReconcileCounts is what one reconcile batch wrote.
type ReconcileCounts struct {
	Versions   int `json:"versions"`   // changed rows and late imports
	Tombstones int `json:"tombstones"` // deletions
}

// StreamState is everything the store keeps about one stream (a form, the
// bookings); FormID is its stream key.
type StreamState struct {
	Key       string            `json:"form_id"`
	Committed Intervals         `json:"committed"`
	Intents   map[string]Intent `json:"intents,omitempty"`
	Schema    json.RawMessage   `json:"schema,omitempty"` // owned by the schema package
	// Layout is how the table's files are partitioned (sink.Layout: none,
	// year, month, day), chosen once, by the table's first batch, from its
	// density or the config, and kept for the table's life (a reset keeps
	// it; a refresh, which removes the files, forgets it). Empty: not
	// chosen yet, or a table written before layouts were recorded, which
	// the engine records from its files (day, the default then) at its
	// next commit.
	Layout      string    `json:"layout,omitempty"`
	Rows        int64     `json:"rows"`
	Batches     int64     `json:"batches"`
	LastSuccess time.Time `json:"last_success,omitempty"`
	LastError   string    `json:"last_error,omitempty"` // cleared by the next Commit
	UpdatedAt   time.Time `json:"updated_at"`
	// Generation counts the times the form was reset or refreshed. Batch
	// ids carry it (after the first), so a re-sync's batches never pass
	// for the earlier ones a sink still remembers (BigQuery keeps job ids).
	Generation int `json:"generation,omitempty"`
	// Refresh is set while a full refresh is under way: its table's output
	// is being removed. Until FinishRefresh clears it, every pass of the
	// form finishes the removal first.
	Refresh *Refresh `json:"refresh,omitempty"`
	// IndexedFrom is where the version index starts (see Store.Versions):
	// every batch committed since records all its rows in it, so a form
	// first synced by format 3 has it at the Unix epoch. A form whose index
	// was kept for sync.lookback only (formats 1 and 2) has it where that
	// index started; its earlier rows are not in the index.
	IndexedFrom time.Time `json:"indexed_from,omitzero"`
	// Indexed counts the records in the version index.
	Indexed int64 `json:"indexed,omitempty"`
	// Reconcile counters: the last reconcile pass's end, windows re-read,
	// version rows and tombstones written.
	Reconciled        time.Time `json:"reconciled,omitzero"`
	ReconciledWindows int64     `json:"reconciled_windows,omitempty"`
	VersionsWritten   int64     `json:"versions_written,omitempty"`
	Tombstones        int64     `json:"tombstones,omitempty"`
	// Damaged is set, by List only, for a form whose record in the state
	// file is damaged: the rest is zero. It says what is wrong and what to
	// do; Get and every write but a reset of the form fail with it.
	Damaged string `json:"-"`
}

// Refresh is a full refresh in progress.
type Refresh struct {
	Table       string    `json:"table"`
	RequestedAt time.Time `json:"requested_at"`
}

// Empty reports whether the state holds nothing of the form: no committed
// window, no batch in flight, nothing counted.
func (st StreamState) Empty() bool {
	return len(st.Committed) == 0 && len(st.Intents) == 0 && st.Batches == 0 && st.Refresh == nil && st.Generation == 0
}

// Commit is one atomic state transition after the sink committed a batch.
type Commit struct {
	BatchID string          // intent to clear ("" for a range known empty: no batch)
	Window  Interval        // becomes covered
	Rows    int             // rows the batch held
	Schema  json.RawMessage // pinned schema after the batch (nil: unchanged)
	// Index is what the batch changes in the version index, applied in the
	// same transaction; nil applies what its intent recorded, if anything.
	Index *IndexChange
	// IndexFrom moves StreamState.IndexedFrom (zero: unchanged).
	IndexFrom time.Time
	// Reconciled sets StreamState.Reconciled (zero: unchanged): a version
	// index started with a commit of its own is current, and must not
	// look never reconciled if the process dies before a second write.
	Reconciled time.Time
	// Reconcile is set by a reconcile batch, to count it.
	Reconcile *ReconcileCounts
	// Generation moves StreamState.Generation forward to it when it is
	// later: a state rebuilt from the output (adopt) takes the generation
	// of the batches it finds.
	Generation int
	// Layout records StreamState.Layout when none is recorded yet (a table
	// written before layouts were recorded, or rebuilt from its output).
	Layout string
}

// Store is the durable record of every stream's progress. Every method that
// returns nil has made its change durable (fsync'd). Streams is the one
// implementation, over the backends Bolt, Object and Sharded; the
// interface stays so that a caller can wrap a store (a test that records
// or fails its writes).
type Store interface {
	// Get returns the state of a stream; StreamState{Key: id} if it has none.
	Get(ctx context.Context, key string) (StreamState, error)
	// List returns the state of every stream that has one, by stream key.
	List(ctx context.Context) ([]StreamState, error)
	// RecordIntent records (or replaces) the intent in.BatchID.
	RecordIntent(ctx context.Context, key string, in Intent) error
	// Commit clears the intent, covers the window, pins the schema and
	// counts the batch in one transaction. Replaying a Commit whose intent is
	// already gone and whose window is already covered changes nothing.
	Commit(ctx context.Context, key string, c Commit) error
	// DropIntent forgets an intent whose batch never reached the sink.
	DropIntent(ctx context.Context, key, batchID string) error
	// SetSchema pins a schema; nil unpins it.
	SetSchema(ctx context.Context, key string, schema json.RawMessage) error
	// SetError records the last error of a stream ("" clears it).
	SetError(ctx context.Context, key string, msg string) error
	// SetSucceeded records that a pass of the stream ended well at t
	// (LastSuccess), clearing its last error. A pass that failed or was
	// interrupted never calls it, whatever it committed.
	SetSucceeded(ctx context.Context, key string, t time.Time) error
	// Reset forgets the stream's windows, intents, schema and counters and
	// moves it to the next generation, so that every row is fetched and
	// written again. The output is not touched.
	Reset(ctx context.Context, key string) error
	// Uncommit forgets the committed windows from instant from on, so that
	// the next pass fetches them again. It refuses while batches are open.
	Uncommit(ctx context.Context, key string, from time.Time) error
	// BeginRefresh marks a full refresh of the stream's table under way.
	BeginRefresh(ctx context.Context, key string, r Refresh) error
	// FinishRefresh is Reset once the table's output is gone, clearing the
	// refresh mark in the same transaction.
	FinishRefresh(ctx context.Context, key string) error
	// Versions calls fn with every record of the stream's version index whose
	// time is in [from, to), in time order; fn's error stops it. It reads a
	// consistent state: the batches committed when it began. fn must not
	// write to the store (the state file's read transaction is open).
	Versions(ctx context.Context, key string, from, to time.Time, fn func(Entry) error) error
	// SetReconciled records that a reconcile pass of the stream ended at t.
	SetReconciled(ctx context.Context, key string, t time.Time) error
	// GetSecret returns the value stored under name (nil when there is
	// none): a source's OAuth tokens live here, never in the config.
	GetSecret(ctx context.Context, name string) ([]byte, error)
	// PutSecret stores value under name (nil deletes it), durably, before
	// it returns: a rotated refresh token must outlive a crash.
	PutSecret(ctx context.Context, name string, value []byte) error
	Close() error
}

// ErrReadOnly is returned by writes to a store opened read-only.
var ErrReadOnly = errors.New("the state store is open read-only")

// Holder is what the process holding a state file wrote into its lock file.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"` // when it took the lock
}

func (h *Holder) String() string {
	if h == nil {
		return "which one is unknown: its lock file names no process"
	}
	return fmt.Sprintf("pid %d, started %s on host %s", h.PID, h.Started.UTC().Format(time.RFC3339), h.Host)
}

// LockedError means another process holds the state file.
type LockedError struct {
	Path     string  // the state file
	Holder   *Holder // nil when the holder is unknown
	ReadOnly bool    // the refused open was read-only
	// Foreign is set when the state file itself was locked by a process that
	// does not take the lock file: a read-only opener such as
	// `syncd state show`, or a bbolt tool.
	Foreign bool
	// LeaseExpires is set for state in a bucket (Path is then its URL):
	// when the holder's lease runs out unless it renews it.
	LeaseExpires time.Time
}

func (e *LockedError) Error() string {
	switch {
	case !e.LeaseExpires.IsZero():
		return fmt.Sprintf("state %s is in use by another syncd (%s) whose lease runs until %s: stop it, or, if it died, rerun after its lease expires", e.Path, e.Holder, e.LeaseExpires.UTC().Format(time.RFC3339))
	case e.Foreign:
		return fmt.Sprintf("state file %s is open in another process (a read-only `syncd state show` or a bbolt tool): let it finish, or stop it", e.Path)
	case e.ReadOnly:
		return fmt.Sprintf("state file %s is in use by a running syncd (%s), and it cannot be read while syncd writes it: stop that syncd first", e.Path, e.Holder)
	default:
		return fmt.Sprintf("state file %s is in use by another syncd (%s): stop it or point state.path elsewhere", e.Path, e.Holder)
	}
}

// CorruptError means the state file cannot be trusted. The store never
// starts over on its own: that would re-sync every form from its start date
// into output that already holds the rows.
type CorruptError struct {
	Path string
	// Form is set when only that form's record is damaged: the rest of the
	// file is usable, and `syncd state reset FORM` replaces the record.
	Form string
	Err  error // what was wrong
}

func (e *CorruptError) Error() string {
	if e.Form != "" {
		return fmt.Sprintf("state file %s: the record of form %s is damaged (%v): restore it from a backup (`syncd state restore FILE` with a file `syncd state backup` wrote), or run `syncd state reset %s` to forget what was synced of that form: its next pass then fetches all of it again and writes it beside the rows already in the output; the other forms are not affected", e.Path, e.Form, e.Err, e.Form)
	}
	return fmt.Sprintf("state file %s is corrupt (%v): restore it from a backup; or move it aside and let syncd start a fresh one, which re-syncs every form from its start date, so move the output already written aside too or its rows will be written twice", e.Path, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// NewerFormatError means the state file was written by a newer syncd.
type NewerFormatError struct {
	Path      string
	Version   int // found in the file
	Supported int // newest this build reads
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("state file %s has format version %d, newer than the %d this syncd reads: run the newer syncd that wrote it, or restore a backup written by this version", e.Path, e.Version, e.Supported)
}

// Claimer is a store split by account (Sharded): only the process that
// claimed an account writes its state, and it must stop writing, and let
// its sink abandon uploads in flight, once Lost closes.
type Claimer interface {
	// Claim takes the lease of the account of namespace ("" is the
	// default account); a lease held by a live process gives a
	// *LockedError naming it.
	Claim(ctx context.Context, namespace string) error
	// Release lets go of the lease, so that another process can claim
	// the account at once.
	Release(namespace string) error
	// Lost is closed once the lease of namespace is lost, has expired
	// without renewal, or was released.
	Lost(namespace string) <-chan struct{}
}

// Leased is a store that holds one lease on all of its state (Object):
// Lost is closed once the lease is lost to another syncd or expired, and
// from then on the store writes nothing.
type Leased interface {
	Lost() <-chan struct{}
}

var (
	_ Claimer = (*Sharded)(nil)
	_ Leased  = (*Object)(nil)
)
