package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// formatVersion is the layout this build writes and the newest it reads.
//
// Version 1: bucket "forms" maps form id to the JSON of FormState; bucket
// "meta" holds "format_version".
//
// Version 2 adds checksums: every value in "forms" is the CRC-32C
// (Castagnoli, big-endian) of the form id, a zero byte and the JSON,
// followed by the JSON; "meta" also holds "manifest", the CRC-32C of its
// JSON and the JSON, which lists every form with the checksum of its record
// and its generation. A damaged record fails its checksum; a record that
// vanished, or an older copy of one, fails the manifest.
//
// Version 3 moves the version index out of the records (where formats 1
// and 2 kept the lookback's, as "versions" in the record and in each
// intent): bucket "index" holds a bucket per form, whose keys are the
// starts of its chunks (8 bytes, big-endian Unix microseconds with the
// sign bit flipped) and whose values are the chunks (see encodeChunk);
// bucket "pending" holds a bucket per form, mapping the batch id of an
// intent to the index change its commit applies (see encodeChange).
//
// A writer migrates an older file to version 3 when it opens it; readers
// read every version.
const formatVersion = 3

// The chunks of the index in a state file hold 256 to 1024 records (about
// 7 to 29 KB): an edit rewrites a few pages, and the chunks' keys cost well
// under a byte per record.
const boltChunkMax, boltChunkSmall = 1024, 256

var (
	formsBucket   = []byte("forms")
	metaBucket    = []byte("meta")
	secretsBucket = []byte("secrets") // created by the first PutSecret
	indexBucket   = []byte("index")   // format 3: a bucket of chunks per form
	pendingBucket = []byte("pending") // format 3: a bucket of intents' index changes per form
	versionKey    = []byte("format_version")
	manifestKey   = []byte("manifest")
)

// defaultLockTimeout bounds the wait for bbolt's own lock on the state file
// once the lock file is held. Only a process that skips the lock file (a
// read-only opener, a bbolt tool) can hold it then, and those are brief.
const defaultLockTimeout = time.Second

// BoltOptions configures OpenBolt.
type BoltOptions struct {
	Path string
	// ReadOnly opens without the writer lock, for inspection. It still
	// cannot overlap a running writer: bbolt's shared lock on the file
	// conflicts with the writer's exclusive one, so it fails at once with a
	// LockedError naming that writer. A missing file reads as an empty store
	// and is not created.
	ReadOnly bool
	// LockTimeout bounds the wait for bbolt's lock on the state file itself;
	// zero means one second. The writer lock file never waits.
	LockTimeout time.Duration
	// Now is the clock for UpdatedAt, LastSuccess and intents without
	// CreatedAt; nil means time.Now.
	Now func() time.Time
}

// Bolt is the embedded Store: one bbolt file, fsync'd on every commit, held
// by one writer at a time. It is Streams over the file (the backend
// methods below), and safe for concurrent use.
type Bolt struct {
	Streams

	path     string
	readOnly bool
	version  int       // of the file: 1 until a writer migrates it
	db       *bolt.DB  // nil for a read-only open of a missing file
	lock     *fileLock // nil when read-only
	chunks   chunkLimits

	closeOnce sync.Once
	closeErr  error
}

var (
	_ Store   = (*Bolt)(nil)
	_ backend = (*Bolt)(nil)
)

// OpenBolt opens (or, for a writer, creates) the state file at opts.Path.
// A second writer on the same file fails at once with a *LockedError that
// names the holder; a damaged file gives a *CorruptError and is left as it
// is; a file from a newer syncd gives a *NewerFormatError.
func OpenBolt(ctx context.Context, opts BoltOptions) (*Bolt, error) {
	if opts.Path == "" {
		return nil, errors.New("open state: the path is empty: set state.path")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open state file %s: %w", opts.Path, err)
	}
	b := &Bolt{path: opts.Path, readOnly: opts.ReadOnly, chunks: chunkLimits{max: boltChunkMax, small: boltChunkSmall}}
	b.Streams = newStreams(b, opts.Now)
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = defaultLockTimeout
	}
	var err error
	if opts.ReadOnly {
		err = b.openReader(timeout)
	} else {
		err = b.openWriter(timeout)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Path is the state file.
func (b *Bolt) Path() string { return b.path }

func (b *Bolt) lockPath() string { return b.path + ".lock" }

func (b *Bolt) openWriter(timeout time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
		return fmt.Errorf("create the directory of state file %s: %w", b.path, err)
	}
	host, _ := os.Hostname()
	me := Holder{PID: os.Getpid(), Host: host, Started: Normalize(time.Now()).Truncate(time.Second)}
	lock, holder, err := lockExclusive(b.lockPath(), me)
	if errors.Is(err, errHeld) {
		return &LockedError{Path: b.path, Holder: holder}
	}
	if err != nil {
		return fmt.Errorf("lock state file %s: %w", b.path, err)
	}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()

	switch _, err := os.Stat(b.path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := createFresh(b.path, timeout); err != nil {
			return fmt.Errorf("create state file %s: %w", b.path, err)
		}
	case err != nil:
		return fmt.Errorf("open state file %s: %w", b.path, err)
	}
	// Check through a read-only handle first: a read-only Open reads only
	// the meta pages, so whatever the check trips over happens inside a
	// transaction whose handle can still be closed.
	ro, err := b.openVerified(timeout)
	if err != nil {
		return err
	}
	if err := ro.Close(); err != nil {
		return fmt.Errorf("open state file %s: %w", b.path, err)
	}
	if b.db, err = b.openDB(false, timeout); err != nil {
		return err
	}
	if err := b.checkFreelist(); err != nil {
		b.db.Close()
		return err
	}
	if err := b.migrate(); err != nil {
		b.db.Close()
		return err
	}
	b.lock = lock
	ok = true
	return nil
}

func (b *Bolt) openReader(timeout time.Duration) error {
	switch _, err := os.Stat(b.path); {
	case errors.Is(err, fs.ErrNotExist):
		return nil // nothing synced yet: an empty store
	case err != nil:
		return fmt.Errorf("open state file %s: %w", b.path, err)
	}
	// A running writer would make bbolt wait out the timeout and then say
	// only "timeout": ask the lock file first, which answers at once.
	holder, err := probeShared(b.lockPath())
	if errors.Is(err, errHeld) {
		return &LockedError{Path: b.path, Holder: holder, ReadOnly: true}
	}
	if err != nil {
		return fmt.Errorf("check the lock of state file %s: %w", b.path, err)
	}
	b.db, err = b.openVerified(timeout)
	return err
}

// openVerified opens the file read-only and reads all of it.
func (b *Bolt) openVerified(timeout time.Duration) (*bolt.DB, error) {
	db, err := b.openDB(true, timeout)
	if err != nil {
		return nil, err
	}
	if err := b.verify(db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// createFresh creates an initialised state file in one rename, so that a
// state file that exists is never legitimately empty or half made: an empty
// one is damage, not a new installation. The caller holds the writer lock.
func createFresh(path string, timeout time.Duration) error {
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{formsBucket, indexBucket, pendingBucket} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(versionKey, []byte(strconv.Itoa(formatVersion))); err != nil {
			return err
		}
		raw, err := sealManifest(manifest{})
		if err != nil {
			return err
		}
		return meta.Put(manifestKey, raw)
	})
	if err = errors.Join(err, db.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// openDB opens the bbolt file, turning its failures into errors that say
// what to do.
func (b *Bolt) openDB(readOnly bool, timeout time.Duration) (db *bolt.DB, err error) {
	// bbolt initialises a zero-length file as a new database: that would be
	// a silent restart from zero. createFresh never leaves one behind.
	if info, err := os.Stat(b.path); err == nil && info.Size() == 0 {
		return nil, &CorruptError{Path: b.path, Err: errors.New("it is empty (0 bytes)")}
	}
	// Opening for writing reads the freelist page, and a damaged one makes
	// bbolt panic inside Open: the handle never reaches us, and its map keeps
	// the file open. Unlocking the file ourselves lets the lock go with the
	// panic; only the map leaks, on a path that ends in an error.
	var file *os.File
	opts := &bolt.Options{
		Timeout:  timeout,
		ReadOnly: readOnly,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, mode)
			file = f
			return f, err
		},
	}
	err = b.guard(func() error {
		db, err = bolt.Open(b.path, 0o600, opts)
		return err
	})
	var corrupt *CorruptError
	switch {
	case err == nil:
		return db, nil
	case errors.As(err, &corrupt):
		if file != nil {
			unlockFile(file)
			file.Close()
		}
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		// Someone holds the state file without the lock file. If a writer
		// took the lock file since the probe, name it.
		if b.readOnly {
			if holder, perr := probeShared(b.lockPath()); errors.Is(perr, errHeld) {
				return nil, &LockedError{Path: b.path, Holder: holder, ReadOnly: true}
			}
		}
		return nil, &LockedError{Path: b.path, ReadOnly: b.readOnly, Foreign: true}
	case isIOError(err):
		return nil, fmt.Errorf("open state file %s: %w", b.path, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, &CorruptError{Path: b.path, Err: fmt.Errorf("neither of its two header pages is a valid bbolt header: %w", err)}
	default:
		// A file too small to hold the header pages, and the like.
		return nil, &CorruptError{Path: b.path, Err: err}
	}
}

// isIOError tells an operating-system failure (permissions, no memory for
// the map) from bbolt finding the content wrong.
func isIOError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// verify reads the whole file once at open, so that damage is reported now,
// in one clear error, rather than as a failure in the middle of a sync.
//
// It walks every key and value itself instead of calling bbolt's tx.Check:
// Check reads pages on a goroutine of its own, where a key offset that
// points outside the map is a fatal fault, not a panic guard can recover.
func (b *Bolt) verify(db *bolt.DB) error {
	info, err := os.Stat(b.path)
	if err != nil {
		return fmt.Errorf("open state file %s: %w", b.path, err)
	}
	// bbolt walks a damaged tree that loops forever: the page graph is
	// checked over the raw bytes first.
	if err := checkPageGraph(b.path); err != nil {
		return &CorruptError{Path: b.path, Err: err}
	}
	return b.guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			// Pages past the end of a truncated file would fault rather than
			// fail: rule them out before anything reads a page.
			if need := tx.Size(); info.Size() < need {
				return &CorruptError{Path: b.path, Err: fmt.Errorf("truncated: %d bytes, its pages need %d", info.Size(), need)}
			}
			if err := tx.ForEach(func(_ []byte, bk *bolt.Bucket) error { return touch(bk) }); err != nil {
				return &CorruptError{Path: b.path, Err: err}
			}
			meta := tx.Bucket(metaBucket)
			if meta == nil {
				return fmt.Errorf("file %s is a bbolt database but not a syncd state file (it has no %q bucket): point state.path at syncd's state file", b.path, metaBucket)
			}
			raw := meta.Get(versionKey)
			v, err := strconv.Atoi(string(raw))
			if err != nil || v < 1 {
				return &CorruptError{Path: b.path, Err: fmt.Errorf("format version %q is not a version", raw)}
			}
			if v > formatVersion {
				return &NewerFormatError{Path: b.path, Version: v, Supported: formatVersion}
			}
			b.version = v
			forms := tx.Bucket(formsBucket)
			if forms == nil {
				return &CorruptError{Path: b.path, Err: fmt.Errorf("bucket %q is missing", formsBucket)}
			}
			if v < 2 {
				return forms.ForEach(func(k, v []byte) error {
					_, err := b.decode(k, v)
					return err
				})
			}
			man, err := openManifest(meta.Get(manifestKey))
			if err != nil {
				return &CorruptError{Path: b.path, Err: err}
			}
			seen := make(map[string]bool, len(man))
			err = forms.ForEach(func(k, v []byte) error {
				id := string(k)
				want, listed := man[id]
				if !listed {
					return &CorruptError{Path: b.path, Err: fmt.Errorf("it holds a record under key %q that its manifest does not list (a damaged page)", k)}
				}
				seen[id] = true
				// A damaged record is reported by the reads of its form
				// (which `syncd state reset` can replace); the rest of the
				// file stays usable.
				if _, crc, err := openRecord(k, v); err == nil && crc != want.CRC {
					return &CorruptError{Path: b.path, Err: fmt.Errorf("the record of form %q has checksum %08x, not the %08x its manifest recorded: it is not the record last written (a damaged page)", k, crc, want.CRC)}
				}
				return nil
			})
			if err != nil {
				return err
			}
			for id := range man {
				if !seen[id] {
					return &CorruptError{Path: b.path, Err: fmt.Errorf("the record of form %q, which its manifest lists, is missing (a damaged page)", id)}
				}
			}
			return nil
		})
	})
}

// checkFreelist makes sure every page the freelist offers is a page of the
// file, once, before the first write: a damaged free page id would have the
// writer allocate, and write, pages far past the end of the file.
func (b *Bolt) checkFreelist() error {
	return b.guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			inFile := 0
			for id := 2; int64(id)*int64(b.db.Info().PageSize) < tx.Size(); id++ {
				p, err := tx.Page(id)
				if err != nil {
					return err
				}
				if p != nil && p.Type == "free" {
					inFile++
				}
			}
			if listed := b.db.Stats().FreePageN; listed != inFile {
				return &CorruptError{Path: b.path, Err: fmt.Errorf("its freelist names %d free pages, but only %d pages of the file are free", listed, inFile)}
			}
			return nil
		})
	})
}

// touch reads every byte of every key and value under bk, so that a damaged
// page faults or panics here, under guard.
func touch(bk *bolt.Bucket) error {
	return bk.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := bk.Bucket(k); sub != nil {
				return touch(sub)
			}
		}
		crc32.ChecksumIEEE(k)
		crc32.ChecksumIEEE(v)
		return nil
	})
}

// guard runs fn, turning a panic or memory fault inside bbolt into a
// CorruptError: bbolt trusts its pages, and a damaged page makes it panic.
func (b *Bolt) guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: b.path, Err: fmt.Errorf("reading it panicked: %v", r)}
		}
	}()
	return fn()
}

// decode checks and decodes the record of form key. In a version 2 file a
// record that fails its checksum, or whose content is wrong, gives a
// *CorruptError naming the form (Form set): that form cannot be read, but
// `syncd state reset` can replace it.
func (b *Bolt) decode(key, val []byte) (StreamState, error) {
	var st StreamState
	body := val
	form := ""
	if b.version >= 2 {
		form = string(key)
		var err error
		if body, _, err = openRecord(key, val); err != nil {
			return st, &CorruptError{Path: b.path, Form: form, Err: err}
		}
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, &CorruptError{Path: b.path, Form: form, Err: fmt.Errorf("record of form %q: %w", key, err)}
	}
	if st.Key != string(key) {
		return st, &CorruptError{Path: b.path, Form: form, Err: fmt.Errorf("record under key %q names form %q", key, st.Key)}
	}
	if b.version < 3 {
		// A file not migrated yet (read-only) keeps its index in the record.
		var old struct {
			Versions map[string]json.RawMessage `json:"versions"`
		}
		if json.Unmarshal(body, &old) == nil {
			st.Indexed = int64(len(old.Versions))
		}
	}
	if err := st.Committed.check(); err != nil {
		return st, &CorruptError{Path: b.path, Form: form, Err: fmt.Errorf("committed windows of form %q: %w", key, err)}
	}
	return st, nil
}

// damagedRecord reports whether err is the damage of one form's record,
// which leaves the rest of the file usable.
func damagedRecord(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce) && ce.Form != ""
}

func encode(st *StreamState) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the schema's bytes as close to the caller's as JSON allows
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// record returns the state of a form, StreamState{Key: formID} if it has none.
func (b *Bolt) record(ctx context.Context, formID string) (StreamState, error) {
	st := StreamState{Key: formID}
	err := b.view(ctx, func(forms *bolt.Bucket) error {
		v := forms.Get([]byte(formID))
		if v == nil {
			return nil
		}
		var err error
		st, err = b.decode([]byte(formID), v)
		return err
	})
	if err != nil {
		return StreamState{}, fmt.Errorf("read state of form %s: %w", formID, err)
	}
	return st, nil
}

// records returns the state of every form that has one, ordered by form id.
func (b *Bolt) records(ctx context.Context) ([]StreamState, error) {
	var list []StreamState
	err := b.view(ctx, func(forms *bolt.Bucket) error {
		return forms.ForEach(func(k, v []byte) error {
			st, err := b.decode(k, v)
			if damagedRecord(err) {
				st = StreamState{Key: string(k), Damaged: err.Error()}
				err = nil
			}
			list = append(list, st)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list form states: %w", err)
	}
	return list, nil
}

// applyIndex lands change in the form's chunks, in the transaction of the
// commit, and counts it in st.
func (b *Bolt) applyIndex(tx *bolt.Tx, st *StreamState, change *IndexChange) error {
	if change.empty() {
		return nil
	}
	bk, err := formBucket(tx, indexBucket, st.Key, true)
	if err != nil {
		return err
	}
	plan, err := planIndex(chunkStarts(bk, change), func(start int64) ([]entry, error) {
		es, err := decodeChunk(bk.Get(chunkKey(start)))
		if err != nil {
			return nil, &CorruptError{Path: b.path, Form: st.Key, Err: fmt.Errorf("the version index: %w", err)}
		}
		return es, nil
	}, nil, change, b.chunks)
	if err != nil {
		return err
	}
	for _, k := range plan.delete {
		if err := bk.Delete(chunkKey(k)); err != nil {
			return err
		}
	}
	for k, es := range plan.write {
		if err := bk.Put(chunkKey(k), encodeChunk(es)); err != nil {
			return err
		}
	}
	st.Indexed += plan.delta
	return nil
}

// chunkStarts are the starts of the chunks change can fall in: from the
// one holding its first record to the first after its last, read with a
// cursor, so that a commit reads only the keys near its batch, however
// long the history.
func chunkStarts(bk *bolt.Bucket, change *IndexChange) []int64 {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, es := range [][]Entry{change.Put, change.Gone} {
		for _, e := range es {
			t := e.Time.UnixMicro()
			lo, hi = min(lo, t), max(hi, t)
		}
	}
	c := bk.Cursor()
	k, _ := c.Seek(chunkKey(lo))
	switch {
	case k == nil:
		k, _ = c.Last()
	case keyTime(k) > lo:
		if pk, _ := c.Prev(); pk != nil {
			k = pk
		} else {
			k, _ = c.First()
		}
	}
	var starts []int64
	for ; k != nil; k, _ = c.Next() {
		starts = append(starts, keyTime(k))
		if keyTime(k) > hi {
			break
		}
	}
	return starts
}

// formBucket is the form's bucket under the top-level bucket top (nil
// when it has none and create is false).
func formBucket(tx *bolt.Tx, top []byte, formID string, create bool) (*bolt.Bucket, error) {
	parent := tx.Bucket(top)
	if parent == nil {
		if !create {
			return nil, nil
		}
		var err error
		if parent, err = tx.CreateBucket(top); err != nil {
			return nil, err
		}
	}
	if !create {
		return parent.Bucket([]byte(formID)), nil
	}
	return parent.CreateBucketIfNotExists([]byte(formID))
}

// dropIndex forgets the form's index and pending changes.
func dropIndex(tx *bolt.Tx, formID string) error {
	for _, top := range [][]byte{indexBucket, pendingBucket} {
		if parent := tx.Bucket(top); parent != nil && parent.Bucket([]byte(formID)) != nil {
			if err := parent.DeleteBucket([]byte(formID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// versions calls fn with every record of the form's index whose time is in
// [from, to), in time order, in one read transaction.
func (b *Bolt) versions(ctx context.Context, formID string, from, to time.Time, fn func(Entry) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read the version index of form %s: %w", formID, err)
	}
	if b.db == nil {
		return nil
	}
	lo, hi := from.UnixMicro(), to.UnixMicro()
	err := b.guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			bk, _ := formBucket(tx, indexBucket, formID, false)
			if bk == nil {
				// A file of format 1 or 2 no writer migrated yet (a read-only
				// open) keeps the index in the form's record.
				return legacyVersions(tx, formID, lo, hi, fn)
			}
			c := bk.Cursor()
			// The chunk holding from starts at or before it.
			k, v := c.Seek(chunkKey(lo))
			switch {
			case k == nil: // every chunk starts before from: the last may hold it
				k, v = c.Last()
			case keyTime(k) > lo:
				if pk, pv := c.Prev(); pk != nil {
					k, v = pk, pv
				} else {
					k, v = c.First()
				}
			}
			for ; k != nil && keyTime(k) < hi; k, v = c.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				es, err := decodeChunk(v)
				if err != nil {
					return &CorruptError{Path: b.path, Form: formID, Err: fmt.Errorf("the version index: %w", err)}
				}
				for _, e := range es {
					if e.t >= lo && e.t < hi {
						if err := fn(e.public()); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read the version index of form %s: %w", formID, err)
	}
	return nil
}

// legacyVersions reads the index a format 1 or 2 record holds, for
// Versions of a file no writer migrated yet; nothing for a format 3 file.
func legacyVersions(tx *bolt.Tx, formID string, lo, hi int64, fn func(Entry) error) error {
	meta, forms := tx.Bucket(metaBucket), tx.Bucket(formsBucket)
	if meta == nil || forms == nil {
		return nil
	}
	version, err := strconv.Atoi(string(meta.Get(versionKey)))
	if err != nil || version >= 3 {
		return nil
	}
	v := forms.Get([]byte(formID))
	if v == nil {
		return nil
	}
	body := v
	if version == 2 {
		if body, _, err = openRecord([]byte(formID), v); err != nil {
			return err
		}
	}
	var old legacyIndex
	if err := json.Unmarshal(body, &old); err != nil {
		return err
	}
	for _, e := range old.entries() {
		if t := e.Time.UnixMicro(); t >= lo && t < hi {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// secret returns the value stored under name; nil when there is none.
func (b *Bolt) secret(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	if b.db == nil {
		return nil, nil
	}
	var out []byte
	err := b.guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket(secretsBucket); bk != nil {
				out = bytes.Clone(bk.Get([]byte(name)))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return out, nil
}

// putSecret stores value under name (nil deletes it) in one transaction,
// fsync'd before it returns.
func (b *Bolt) putSecret(ctx context.Context, name string, value []byte) error {
	if name == "" {
		return errors.New("store secret: the name is empty")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	if b.readOnly {
		return ErrReadOnly
	}
	err := b.guard(func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(secretsBucket)
			if err != nil {
				return err
			}
			if value == nil {
				return bk.Delete([]byte(name))
			}
			return bk.Put([]byte(name), bytes.Clone(value))
		})
	})
	if err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	return nil
}

// close closes the file and lets go of the writer lock. Calling it again
// returns the first result.
func (b *Bolt) close() error {
	b.closeOnce.Do(func() {
		var errs []error
		if b.db != nil {
			errs = append(errs, b.db.Close())
		}
		if b.lock != nil {
			errs = append(errs, b.lock.release())
		}
		if err := errors.Join(errs...); err != nil {
			b.closeErr = fmt.Errorf("close state file %s: %w", b.path, err)
		}
	})
	return b.closeErr
}

// update runs fn on the form's record (zero if absent) and stores it, all
// in one transaction; fn's index transaction changes the form's buckets of
// the index in the same one. With overDamage a damaged record of the form
// is replaced (by a reset) instead of failing the write: its generation
// comes from the manifest, so the batch ids of the form's next generation
// are new.
func (b *Bolt) update(ctx context.Context, formID string, overDamage bool, fn func(st *StreamState, ix indexTx) error) error {
	err := b.writeTx(ctx, formID, func(tx *bolt.Tx) error {
		forms, meta := tx.Bucket(formsBucket), tx.Bucket(metaBucket)
		man, err := openManifest(meta.Get(manifestKey))
		if err != nil {
			return &CorruptError{Path: b.path, Err: err}
		}
		key := []byte(formID)
		st := StreamState{Key: formID}
		if v := forms.Get(key); v != nil {
			if st, err = b.decode(key, v); err != nil {
				if !overDamage || !damagedRecord(err) {
					return err
				}
				st = StreamState{Key: formID, Generation: man[formID].Gen}
			}
		}
		if err := fn(&st, boltIndexTx{b: b, tx: tx, formID: formID}); err != nil {
			return err
		}
		body, err := encode(&st)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		val, crc := sealRecord(key, body)
		if err := forms.Put(key, val); err != nil {
			return err
		}
		man[formID] = manifestEntry{CRC: crc, Gen: st.Generation}
		raw, err := sealManifest(man)
		if err != nil {
			return fmt.Errorf("encode the manifest: %w", err)
		}
		return meta.Put(manifestKey, raw)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// boltIndexTx is a form's index in the state file, inside the write
// transaction of its record: bucket "index" holds its chunks, bucket
// "pending" the changes its intents keep.
type boltIndexTx struct {
	b      *Bolt
	tx     *bolt.Tx
	formID string
}

func (x boltIndexTx) pend(batchID string, c *IndexChange) error {
	bk, err := formBucket(x.tx, pendingBucket, x.formID, true)
	if err != nil {
		return err
	}
	return bk.Put([]byte(batchID), encodeChange(c))
}

func (x boltIndexTx) settle(batchID string, read bool) (*IndexChange, error) {
	pend, _ := formBucket(x.tx, pendingBucket, x.formID, false)
	if pend == nil {
		return nil, nil
	}
	raw := pend.Get([]byte(batchID))
	if raw == nil {
		return nil, nil
	}
	var change *IndexChange
	if read {
		var err error
		if change, err = decodeChange(raw); err != nil {
			return nil, &CorruptError{Path: x.b.path, Form: x.formID, Err: err}
		}
	}
	return change, pend.Delete([]byte(batchID))
}

func (x boltIndexTx) apply(st *StreamState, c *IndexChange) error {
	return x.b.applyIndex(x.tx, st, c)
}

func (x boltIndexTx) clear() error { return dropIndex(x.tx, x.formID) }

// migrate brings an older file to formatVersion, one version per
// transaction: a stop in between leaves a file of the version before, which
// the next writer migrates on.
func (b *Bolt) migrate() error {
	steps := []struct {
		to int
		do func() error
	}{{2, b.migrateTo2}, {3, b.migrateTo3}}
	for _, s := range steps {
		if b.version >= s.to {
			continue
		}
		if err := b.guard(s.do); err != nil {
			return fmt.Errorf("migrate state file %s from format version %d to %d: %w", b.path, b.version, s.to, err)
		}
		b.version = s.to
	}
	return nil
}

// migrateTo2 turns a version 1 file into version 2 in one transaction:
// every record sealed with its checksum, the manifest written, the version
// set.
func (b *Bolt) migrateTo2() error {
	return b.db.Update(func(tx *bolt.Tx) error {
		forms, meta := tx.Bucket(formsBucket), tx.Bucket(metaBucket)
		man := manifest{}
		var recs []migratedRecord
		err := forms.ForEach(func(k, v []byte) error {
			st, err := b.decode(k, v)
			if err != nil {
				return err
			}
			val, crc := sealRecord(k, v)
			man[string(k)] = manifestEntry{CRC: crc, Gen: st.Generation}
			recs = append(recs, migratedRecord{bytes.Clone(k), val})
			return nil
		})
		if err != nil {
			return err
		}
		return rewriteRecords(forms, meta, recs, man, "2")
	})
}

// migrateTo3 moves the version index out of the records of a version 2
// file, in one transaction: each form's "versions" into its chunks (the
// index then covers what it covered: from the form's IndexedFrom on), each
// intent's versions and deletions into its pending change, and the records
// sealed again without them. A damaged record is left as it is: its form
// reads as damaged, as it did, until `syncd state reset`.
func (b *Bolt) migrateTo3() error {
	return b.db.Update(func(tx *bolt.Tx) error {
		forms, meta := tx.Bucket(formsBucket), tx.Bucket(metaBucket)
		for _, name := range [][]byte{indexBucket, pendingBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		man, err := openManifest(meta.Get(manifestKey))
		if err != nil {
			return &CorruptError{Path: b.path, Err: err}
		}
		var recs []migratedRecord
		err = forms.ForEach(func(k, v []byte) error {
			st, err := b.decode(k, v)
			if damagedRecord(err) {
				return nil
			}
			if err != nil {
				return err
			}
			body, _, _ := openRecord(k, v)
			var old legacyIndex
			if err := json.Unmarshal(body, &old); err != nil {
				return &CorruptError{Path: b.path, Form: st.Key, Err: err}
			}
			st.Indexed = 0
			if err := b.applyIndex(tx, &st, &IndexChange{Put: old.entries()}); err != nil {
				return err
			}
			for id, in := range st.Intents {
				if in.Reconcile && in.Counts == nil {
					in.Counts = old.counts(id)
					st.Intents[id] = in
				}
				if c := old.pending(id); c != nil {
					pend, err := formBucket(tx, pendingBucket, st.Key, true)
					if err != nil {
						return err
					}
					if err := pend.Put([]byte(id), encodeChange(c)); err != nil {
						return err
					}
				}
			}
			body, err = encode(&st)
			if err != nil {
				return err
			}
			val, crc := sealRecord(k, body)
			man[st.Key] = manifestEntry{CRC: crc, Gen: st.Generation}
			recs = append(recs, migratedRecord{bytes.Clone(k), val})
			return nil
		})
		if err != nil {
			return err
		}
		return rewriteRecords(forms, meta, recs, man, "3")
	})
}

// migratedRecord is a form's record as a migration step rewrites it.
type migratedRecord struct{ key, val []byte }

// rewriteRecords ends a migration step: the records rewritten, their
// manifest sealed and the file's format version set, in the step's
// transaction.
func rewriteRecords(forms, meta *bolt.Bucket, recs []migratedRecord, man manifest, version string) error {
	for _, r := range recs {
		if err := forms.Put(r.key, r.val); err != nil {
			return err
		}
	}
	raw, err := sealManifest(man)
	if err != nil {
		return err
	}
	if err := meta.Put(manifestKey, raw); err != nil {
		return err
	}
	return meta.Put(versionKey, []byte(version))
}

func (b *Bolt) writeTx(ctx context.Context, formID string, fn func(tx *bolt.Tx) error) error {
	if formID == "" {
		return errors.New("the form id is empty")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.readOnly {
		return ErrReadOnly
	}
	return b.guard(func() error {
		err := b.db.Update(fn)
		releaseMapped(b.db)
		return err
	})
}

func (b *Bolt) view(ctx context.Context, fn func(forms *bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.db == nil {
		return nil // read-only open of a file that does not exist yet
	}
	return b.guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			return fn(tx.Bucket(formsBucket))
		})
	})
}
