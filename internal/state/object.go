package state

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"sort"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// ObjectOptions configures OpenObject.
type ObjectOptions struct {
	// URL names the state object: gs://bucket/prefix/syncd-state,
	// s3://bucket/prefix/syncd-state?region=..., or
	// azblob://container/prefix/syncd-state. Each of these stores makes a
	// write conditional on the object's version (a GCS generation, an S3 or
	// Azure ETag), which compare-and-swap needs; file:// cannot.
	URL string
	// ReadOnly reads the object once and takes no lease, for inspection.
	ReadOnly bool
	// LeaseTTL is how long the writer's lease lasts unless renewed; it is
	// renewed every third of it. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Now is the clock for the lease and the state's timestamps; nil means
	// time.Now.
	Now func() time.Time

	sharded bool // a Sharded store's: marks the lease (leaseRecord.Sharded)
}

// DefaultLeaseTTL is how long a writer's lease outlives its last renewal.
const DefaultLeaseTTL = 30 * time.Second

// objectFormat is the layout of the state object this build writes and
// the newest it reads (the state file has its own, formatVersion).
//
// Format 1 kept each form's version index (of the lookback) in its record.
// Format 2 keeps it in chunk objects beside the state object (see
// objIndex): the state object only names them.
const objectFormat = 2

// objectDoc is the state object: every form's state, and which write of
// which writer produced it.
type objectDoc struct {
	FormatVersion int                    `json:"format_version"`
	Forms         map[string]StreamState `json:"forms"`
	Index         map[string]objIndex    `json:"index,omitempty"`   // by form
	Secrets       map[string][]byte      `json:"secrets,omitempty"` // see Store.PutSecret
	Writer        string                 `json:"writer,omitempty"`  // lease id of the writer
	Seq           int64                  `json:"seq,omitempty"`     // that writer's write count
	// Blobs are the index's chunk and pending objects, by name, in a
	// backup only (see BackupObject): the state object never holds them.
	Blobs map[string][]byte `json:"blobs,omitempty"`
	// Checksums are each form's record's CRC-32C (over its JSON, as
	// recordCRC takes it), so that a damaged record stops that form alone,
	// as in the state file; a form without one (an older object) is not
	// checked.
	Checksums map[string]uint32 `json:"checksums,omitempty"`
	// damaged are the forms whose record failed its checksum on reading.
	damaged map[string]error
}

// formJSON is a record as its checksum covers it.
func formJSON(st *StreamState) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Object is a Store kept in one object of a GCS, S3 or Azure bucket. Every
// write replaces the object on the condition that its version (generation
// or ETag) is still the one this store last read or wrote, so two processes can never both advance
// the state: the second one's write fails with a *ConflictError, and after
// that the store refuses every write. A writer also holds a lease object
// beside the state (<state>.lease), renewed while it runs, so that a second
// syncd fails at start instead of mid-pass. It is safe for concurrent use;
// writes are serialised.
type Object struct {
	Streams

	bucket   *blob.Bucket
	key      string // of the state object
	shown    string // the URL, for messages
	readOnly bool
	now      func() time.Time
	id       string // this writer's lease id

	mu  sync.Mutex
	doc objectDoc
	ver blobstore.Version // of the object as last read or written; "": absent
	seq int64
	// tried is the highest Seq this store has sent, landed or not: a
	// write never reuses one, so a write found in place after a failed
	// compare-and-swap is this one only if it carries this one's Seq.
	tried int64
	// unsure is set by a write that failed without an answer: it may have
	// landed, and the next write reads the object first (resync).
	unsure bool
	failed error // a lost compare-and-swap: every later write fails with it

	lease     *lease // nil when read-only
	ownBucket bool   // Close closes bucket (not when Sharded shares it)

	chunks chunkLimits
	// readers count the Versions reading chunk objects; trash holds the
	// objects writes replaced meanwhile, deleted when the last one ends.
	readers int
	trash   []string
	// legacy is the version index of a format 1 object as read, by form,
	// until a writer migrates it (read-only stores keep reading it).
	legacy map[string]*legacyIndex

	closeOnce sync.Once
	closeErr  error
}

var (
	_ Store   = (*Object)(nil)
	_ backend = (*Object)(nil)
)

// OpenObject reads the state object at opts.URL (a missing one is an empty
// state) and, unless read-only, takes the writer lease. A lease held by a
// live syncd gives a *LockedError that names it.
func OpenObject(ctx context.Context, opts ObjectOptions) (*Object, error) {
	return openObject(ctx, opts, true)
}

func openObject(ctx context.Context, opts ObjectOptions, withLease bool) (*Object, error) {
	loc, err := parseStateURL(opts.URL)
	if err != nil {
		return nil, err
	}
	b, err := blobstore.Open(ctx, loc, false)
	if err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	o, err := openObjectIn(ctx, b, loc.Prefix, opts, withLease)
	if err != nil {
		b.Close()
		return nil, err
	}
	o.ownBucket = true
	return o, nil
}

// parseStateURL checks that url can name a state object.
func parseStateURL(url string) (blobstore.Location, error) {
	loc, err := blobstore.Parse(url)
	if err != nil {
		return loc, fmt.Errorf("open state: %w: set state.url to gs://bucket/prefix/syncd-state", err)
	}
	switch loc.Scheme {
	case "gs", "s3", "azblob":
	default:
		return loc, fmt.Errorf("open state %s: a %s:// URL cannot keep the state (compare-and-swap needs conditional writes on the object's version, which only gs://, s3:// and azblob:// have): use one of those, or state.path for a local file", url, loc.Scheme)
	}
	if loc.Prefix == "" {
		return loc, fmt.Errorf("open state %s: the URL names a bucket but no object: add one, e.g. %s/syncd-state", url, url)
	}
	return loc, nil
}

// newObject is the state object at key in b, not read yet; shown is its
// URL. Its Close leaves b open.
func newObject(b *blob.Bucket, key, shown string, readOnly bool, now func() time.Time) *Object {
	if now == nil {
		now = time.Now
	}
	o := &Object{bucket: b, key: key, shown: shown, readOnly: readOnly, now: now, id: newID(), chunks: chunkLimits{max: objectChunkMax, small: objectChunkSmall}}
	o.Streams = newStreams(o, now)
	return o
}

// openObjectIn is openObject on the object at key in b (opts.URL names
// it), which the caller keeps open and closes after the store.
func openObjectIn(ctx context.Context, b *blob.Bucket, key string, opts ObjectOptions, withLease bool) (*Object, error) {
	o := newObject(b, key, opts.URL, opts.ReadOnly, opts.Now)
	if err := o.load(ctx); err != nil {
		return nil, err
	}
	if !opts.ReadOnly && withLease {
		ttl := opts.LeaseTTL
		if ttl <= 0 {
			ttl = DefaultLeaseTTL
		}
		var err error
		o.lease, err = acquireLease(ctx, leaseConfig{bucket: b, key: o.key + ".lease", shown: opts.URL, id: o.id, ttl: ttl, now: o.now, sharded: opts.sharded})
		if err != nil {
			return nil, err
		}
		// The state may have moved while the previous holder's lease ran out.
		if err := o.load(ctx); err != nil {
			o.Close()
			return nil, err
		}
		if err := o.migrate(ctx); err != nil {
			o.Close()
			return nil, err
		}
	}
	return o, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lost is closed once this writer's lease is lost to another syncd or has
// expired without renewal: from then on the store writes nothing, and a
// sink should abandon uploads in flight (a syncd that took over may resolve
// their batches as never committed). It is nil, never closed, for a
// read-only store.
func (o *Object) Lost() <-chan struct{} {
	if o.lease == nil {
		return nil
	}
	return o.lease.gone
}

// URL is the state object's URL.
func (o *Object) URL() string { return o.shown }

// load reads the object and its generation.
func (o *Object) load(ctx context.Context) error {
	doc, ver, legacy, err := o.read(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.doc, o.ver, o.legacy = doc, ver, legacy
	o.mu.Unlock()
	return nil
}

// decodeLegacy reads the version index a format 1 object kept in its
// records.
func (o *Object) decodeLegacy(raw []byte) (map[string]*legacyIndex, error) {
	var old struct {
		Forms map[string]*legacyIndex `json:"forms"`
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		return nil, &CorruptError{Path: o.shown, Err: err}
	}
	return old.Forms, nil
}

// read returns the object's document and version, and the version index a
// format 1 object holds in its records; an absent object is an empty
// document at version "". It takes no lock: write calls it holding o.mu.
func (o *Object) read(ctx context.Context) (objectDoc, blobstore.Version, map[string]*legacyIndex, error) {
	raw, ver, err := blobstore.Read(ctx, o.bucket, o.key)
	if blobstore.IsNotFound(err) {
		return objectDoc{FormatVersion: objectFormat, Forms: map[string]StreamState{}}, "", nil, nil
	}
	if errors.Is(err, blobstore.ErrNoConditions) {
		return objectDoc{}, "", nil, fmt.Errorf("read state %s: %w: keep the state in gs://, s3:// or azblob://, or in state.path", o.shown, err)
	}
	if err != nil {
		return objectDoc{}, "", nil, fmt.Errorf("read state %s: %w", o.shown, blobstore.Hint(err, o.shown))
	}
	doc, err := o.decode(raw)
	var legacy map[string]*legacyIndex
	if err == nil && doc.FormatVersion < 2 {
		legacy, err = o.decodeLegacy(raw)
	}
	return doc, ver, legacy, err
}

func (o *Object) decode(raw []byte) (objectDoc, error) {
	var doc objectDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return doc, &CorruptError{Path: o.shown, Err: err}
	}
	if doc.FormatVersion > objectFormat {
		return doc, &NewerFormatError{Path: o.shown, Version: doc.FormatVersion, Supported: objectFormat}
	}
	if doc.FormatVersion < 1 {
		return doc, &CorruptError{Path: o.shown, Err: errors.New("no format_version")}
	}
	if doc.Forms == nil {
		doc.Forms = map[string]StreamState{}
	}
	for id, st := range doc.Forms {
		if sum, ok := doc.Checksums[id]; ok {
			body, err := formJSON(&st)
			if err != nil || recordCRC([]byte(id), body) != sum {
				if doc.damaged == nil {
					doc.damaged = map[string]error{}
				}
				doc.damaged[id] = errors.New("its checksum does not match")
				continue
			}
		}
		if st.Key != id {
			return doc, &CorruptError{Path: o.shown, Err: fmt.Errorf("record under key %q names form %q", id, st.Key)}
		}
		if err := st.Committed.check(); err != nil {
			return doc, &CorruptError{Path: o.shown, Err: fmt.Errorf("committed windows of form %q: %w", id, err)}
		}
	}
	return doc, nil
}

// record returns the state of a form, StreamState{Key: formID} if it has none.
func (o *Object) record(ctx context.Context, formID string) (StreamState, error) {
	if err := ctx.Err(); err != nil {
		return StreamState{}, fmt.Errorf("read state of form %s: %w", formID, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.doc.damaged[formID]; err != nil {
		return StreamState{}, &CorruptError{Path: o.shown, Form: formID, Err: err}
	}
	st, ok := o.doc.Forms[formID]
	if !ok {
		return StreamState{Key: formID}, nil
	}
	return cloneForm(st), nil
}

// records returns the state of every form that has one, ordered by form id.
func (o *Object) records(ctx context.Context) ([]StreamState, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list form states: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	list := make([]StreamState, 0, len(o.doc.Forms))
	for id, st := range o.doc.Forms {
		if err := o.doc.damaged[id]; err != nil {
			list = append(list, StreamState{Key: id, Damaged: (&CorruptError{Path: o.shown, Form: id, Err: err}).Error()})
			continue
		}
		list = append(list, cloneForm(st))
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	return list, nil
}

// secret returns the value stored under name; nil when there is none.
func (o *Object) secret(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.doc.Secrets[name]), nil
}

// putSecret stores value under name (nil deletes it) in one write.
func (o *Object) putSecret(ctx context.Context, name string, value []byte) error {
	err := o.mutate(ctx, name, func(doc *objectDoc) error {
		if value == nil {
			if _, ok := doc.Secrets[name]; !ok {
				return errUnchanged
			}
			delete(doc.Secrets, name)
			return nil
		}
		doc.Secrets[name] = bytes.Clone(value)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	return nil
}

// update applies fn to the form's state (zero if absent) and its index in
// one compare-and-swap write of the object. The chunk and pending objects
// fn's index transaction writes are written before the state object that
// names them; those it no longer names are deleted after. overDamage lets
// a reset replace a damaged record; every other write refuses it.
func (o *Object) update(ctx context.Context, formID string, overDamage bool, fn func(st *StreamState, ix indexTx) error) error {
	var unused []string
	err := o.mutate(ctx, formID, func(doc *objectDoc) error {
		if err := doc.damaged[formID]; err != nil {
			if !overDamage {
				return &CorruptError{Path: o.shown, Form: formID, Err: err}
			}
			delete(doc.damaged, formID)
		}
		st, ok := doc.Forms[formID]
		if ok {
			st = cloneForm(st)
		} else {
			st = StreamState{Key: formID}
		}
		x := &objIndexTx{ctx: ctx, o: o, doc: doc, formID: formID}
		if err := fn(&st, x); err != nil {
			return err
		}
		x.store()
		unused = x.unused
		doc.Forms[formID] = st
		return nil
	})
	if err == nil {
		o.remove(ctx, unused)
	}
	return err
}

// mutate applies fn to a copy of the document and, unless fn returns
// errUnchanged, writes the copy with compare-and-swap on the generation.
// Only a successful write changes what this store holds, or a resync that
// finds a write it was not answered landed. fn copies the form and the
// index it changes.
func (o *Object) mutate(ctx context.Context, formID string, fn func(doc *objectDoc) error) error {
	if formID == "" {
		return errors.New("the form id is empty")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.readOnly {
		return ErrReadOnly
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil {
		return o.failed
	}
	if o.lease != nil {
		if err := o.lease.valid(); err != nil {
			return err
		}
	}
	if o.unsure {
		if err := o.resync(ctx); err != nil {
			return err
		}
	}
	seq := max(o.seq, o.tried) + 1
	doc := objectDoc{FormatVersion: objectFormat, Forms: maps.Clone(o.doc.Forms), Index: maps.Clone(o.doc.Index), Secrets: maps.Clone(o.doc.Secrets), Writer: o.id, Seq: seq,
		Checksums: maps.Clone(o.doc.Checksums), damaged: maps.Clone(o.doc.damaged)}
	if doc.Forms == nil {
		doc.Forms = map[string]StreamState{}
	}
	if doc.Index == nil {
		doc.Index = map[string]objIndex{}
	}
	if doc.Secrets == nil {
		doc.Secrets = map[string][]byte{}
	}
	if err := fn(&doc); err != nil {
		if errors.Is(err, errUnchanged) {
			return nil
		}
		return err
	}
	raw, err := encodeDoc(&doc)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	o.tried = seq
	ver, err := o.write(ctx, raw, seq)
	if err != nil {
		return err
	}
	o.doc, o.ver, o.seq = doc, ver, doc.Seq
	return nil
}

// resync reads the object after a write that failed without an answer
// (o.mu held). That write may have landed: the store then goes on from
// it, as if it had been answered. Anything else in place is another
// writer's, a *ConflictError. A failed read leaves the store unsure, and
// the next write reads again.
func (o *Object) resync(ctx context.Context) error {
	doc, ver, legacy, err := o.read(ctx)
	if err != nil {
		return err
	}
	if ver != o.ver {
		if doc.Writer != o.id || doc.Seq <= o.seq || doc.Seq > o.tried {
			o.failed = &ConflictError{URL: o.shown}
			return o.failed
		}
		o.doc, o.ver, o.seq, o.legacy = doc, ver, doc.Seq, legacy
	}
	o.unsure = false
	return nil
}

func encodeDoc(doc *objectDoc) ([]byte, error) {
	// Every record's checksum, but a damaged one's, which keeps the sum it
	// failed until a reset replaces it.
	sums := make(map[string]uint32, len(doc.Forms))
	for id, st := range doc.Forms {
		if _, bad := doc.damaged[id]; bad {
			sums[id] = doc.Checksums[id]
			continue
		}
		body, err := formJSON(&st)
		if err != nil {
			return nil, fmt.Errorf("encode the record of form %s: %w", id, err)
		}
		sums[id] = recordCRC([]byte(id), body)
	}
	doc.Checksums = sums
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write replaces the object if its version is still o.ver (absent when
// "") with raw, the document of Seq seq, and returns the new version.
func (o *Object) write(ctx context.Context, raw []byte, seq int64) (blobstore.Version, error) {
	ver, err := blobstore.WriteIf(ctx, o.bucket, o.key, raw, o.ver, "application/json")
	switch {
	case err == nil:
		return ver, nil
	case blobstore.IsPrecondition(err):
		// A write whose answer was lost and that the client retried fails
		// its own precondition: the object then holds this very write,
		// which its Seq tells from any earlier one of this store's.
		doc, cur, _, rerr := o.read(ctx)
		if rerr == nil && doc.Writer == o.id && doc.Seq == seq {
			return cur, nil
		}
		o.failed = &ConflictError{URL: o.shown, Own: rerr == nil && doc.Writer == o.id && doc.Seq > o.seq}
		return "", o.failed
	default:
		o.unsure = true
		return "", fmt.Errorf("write state %s: %w", o.shown, blobstore.Hint(err, o.shown))
	}
}

// fence writes the object again, as edit changes it (nil: as it is), so
// that its version moves on: a writer that read an earlier version, such
// as a previous holder of the lease that has not noticed it lost it, fails
// its next compare-and-swap with a *ConflictError. An absent object is
// created. When another write landed since this store last read the
// object, fence reads it again and returns the *ConflictError: the caller
// may fence again, over what it now holds.
func (o *Object) fence(ctx context.Context, edit func(doc *objectDoc) error) error {
	err := o.mutate(ctx, "fence", func(doc *objectDoc) error {
		if edit == nil {
			return nil
		}
		return edit(doc)
	})
	var ce *ConflictError
	if errors.As(err, &ce) {
		// Not a lost race of this store's own writes: it has written
		// nothing yet, so it may go on from what is there now.
		o.mu.Lock()
		if _, lost := o.failed.(*ConflictError); lost {
			o.failed = nil
		}
		o.mu.Unlock()
		if lerr := o.load(ctx); lerr != nil {
			return lerr
		}
	}
	return err
}

// exists reports whether the object was there when last read or written.
func (o *Object) exists() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ver != ""
}

// close stops renewing the lease and lets go of it. Calling it again
// returns the first result.
func (o *Object) close() error {
	o.closeOnce.Do(func() {
		// A write in flight ends first (it holds o.mu), under the lease;
		// none starts after: the lease is let go of next.
		o.mu.Lock()
		if o.failed == nil {
			o.failed = fmt.Errorf("state %s is closed", o.shown)
		}
		o.mu.Unlock()
		var errs []error
		if o.lease != nil {
			errs = append(errs, o.lease.release())
		}
		if o.ownBucket {
			errs = append(errs, o.bucket.Close())
		}
		if err := errors.Join(errs...); err != nil {
			o.closeErr = fmt.Errorf("close state %s: %w", o.shown, err)
		}
	})
	return o.closeErr
}

func cloneForm(st StreamState) StreamState {
	if st.Intents != nil {
		in := make(map[string]Intent, len(st.Intents))
		for k, v := range st.Intents {
			in[k] = v
		}
		st.Intents = in
	}
	st.Committed = append(Intervals(nil), st.Committed...)
	st.Schema = bytes.Clone(st.Schema)
	if st.Refresh != nil {
		r := *st.Refresh
		st.Refresh = &r
	}
	return st
}

// ConflictError means another process wrote the state object since this one
// read it: two syncd runs on one state. This one stops writing.
type ConflictError struct {
	URL string
	// Own: the write in place is an earlier one of this syncd's, which it
	// had given up on (the bucket did not answer) and which landed late.
	Own bool
}

func (e *ConflictError) Error() string {
	if e.Own {
		return fmt.Sprintf("state %s changed under this syncd: a write of its own that the bucket did not answer in time landed after a later one was sent, so this one stopped without writing: rerun (it reads the state as it is)", e.URL)
	}
	return fmt.Sprintf("state %s was changed by another syncd since this one read it, so this one stopped without writing: run one syncd at a time on a state (its lease keeps a second one out unless the first stalls past state.lease_ttl), then rerun", e.URL)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
