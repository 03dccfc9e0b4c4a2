package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// BackupInfo describes a backup taken or restored.
type BackupInfo struct {
	Forms   int    // forms the state holds
	Version string // the state file's format version, or the object's generation or ETag
	Bytes   int64  // written
}

// snapshotTries bounds the copies BackupBolt takes while a writer changes
// the file under it.
const snapshotTries = 50

// BackupBolt writes a consistent copy of the state file at path to w, also
// while a syncd runs on it. The file is read without a lock (a running
// writer holds bbolt's), twice, until both reads agree; the copy is opened
// read-only, checked whole (every record's checksum, the manifest) and
// written out with bbolt's Tx.WriteTo. A copy torn by a write in flight
// fails the check and is taken again. A damaged state file is refused:
// its backup would be worth nothing.
func BackupBolt(ctx context.Context, path string, w io.Writer) (BackupInfo, error) {
	if _, err := os.Stat(path); err != nil {
		return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, err)
	}
	tmp, err := os.MkdirTemp("", "syncd-backup-")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	snap := filepath.Join(tmp, "state.db")
	var lastErr error
	for try := 0; try < snapshotTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		a, err := os.ReadFile(path)
		if err != nil {
			return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, err)
		}
		if !bytes.Equal(a, b) {
			lastErr = errors.New("it changed during every copy")
			continue
		}
		if err := os.WriteFile(snap, a, 0o600); err != nil {
			return BackupInfo{}, fmt.Errorf("back up state file %s: %w", path, err)
		}
		info, err := writeVerified(ctx, snap, path, w)
		if err == nil {
			return info, nil
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return BackupInfo{}, err
		}
		lastErr = err // torn by a write, or damaged: look again
	}
	return BackupInfo{}, fmt.Errorf("back up state file %s: no consistent copy in %d tries: %w", path, snapshotTries, lastErr)
}

// writeVerified checks the bbolt file at p whole and writes it to w.
func writeVerified(ctx context.Context, p, shown string, w io.Writer) (BackupInfo, error) {
	b, info, err := openChecked(ctx, p, shown)
	if err != nil {
		return info, err
	}
	defer b.Close()
	err = b.db.View(func(tx *bolt.Tx) error {
		n, err := tx.WriteTo(w)
		info.Bytes = n
		return err
	})
	if err != nil {
		return info, fmt.Errorf("write the backup of state file %s: %w", shown, err)
	}
	return info, nil
}

// openChecked opens the bbolt file at p read-only, without the lock file
// (p is a copy), and checks every record: a damaged one fails it too.
func openChecked(ctx context.Context, p, shown string) (*Bolt, BackupInfo, error) {
	b := &Bolt{path: p, readOnly: true}
	b.Streams = newStreams(b, nil)
	db, err := b.openVerified(defaultLockTimeout)
	if err != nil {
		return nil, BackupInfo{}, relabel(err, p, shown)
	}
	b.db = db
	list, err := b.List(ctx)
	if err == nil {
		for _, fs := range list {
			if fs.Damaged != "" {
				err = &CorruptError{Path: p, Form: fs.Key, Err: errors.New(fs.Damaged)}
				break
			}
		}
	}
	if err == nil {
		err = b.checkIndex()
	}
	if err != nil {
		b.Close()
		return nil, BackupInfo{}, relabel(err, p, shown)
	}
	return b, BackupInfo{Forms: len(list), Version: fmt.Sprint(b.version)}, nil
}

// relabel names shown instead of the temporary copy p in a CorruptError.
func relabel(err error, p, shown string) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.Path == p {
		c := *ce
		c.Path = shown
		return &c
	}
	return err
}

// VerifyBackup checks a backup of a state file (bbolt) whole: every record's
// checksum and the manifest, and a format this syncd reads.
func VerifyBackup(ctx context.Context, backup string) (BackupInfo, error) {
	if _, err := os.Stat(backup); err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w", backup, err)
	}
	b, info, err := openChecked(ctx, backup, backup)
	if err != nil {
		return info, err
	}
	return info, b.Close()
}

// RestoreBolt replaces the state file at path with the backup at backup,
// after checking the backup whole. It refuses while a syncd holds the state
// (its lock file). The file it replaces is kept beside it, renamed
// <path>.replaced-<UTC time>, and named in the result.
func RestoreBolt(ctx context.Context, path, backup string) (BackupInfo, string, error) {
	info, err := VerifyBackup(ctx, backup)
	if err != nil {
		return info, "", fmt.Errorf("restore state file %s: the backup is not usable: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return info, "", fmt.Errorf("restore state file %s: %w", path, err)
	}
	host, _ := os.Hostname()
	lock, holder, err := lockExclusive(path+".lock", Holder{PID: os.Getpid(), Host: host, Started: Normalize(time.Now()).Truncate(time.Second)})
	if errors.Is(err, errHeld) {
		return info, "", fmt.Errorf("restore state file %s: %w", path, &LockedError{Path: path, Holder: holder})
	}
	if err != nil {
		return info, "", fmt.Errorf("restore state file %s: lock it: %w", path, err)
	}
	defer lock.release()
	raw, err := os.ReadFile(backup)
	if err != nil {
		return info, "", fmt.Errorf("restore state file %s: %w", path, err)
	}
	tmp := path + ".restore"
	if err := writeSynced(tmp, raw); err != nil {
		return info, "", fmt.Errorf("restore state file %s: %w", path, err)
	}
	aside := ""
	switch _, err := os.Stat(path); {
	case err == nil:
		aside = path + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, aside); err != nil {
			os.Remove(tmp)
			return info, "", fmt.Errorf("restore state file %s: move it aside: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		os.Remove(tmp)
		return info, "", fmt.Errorf("restore state file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return info, aside, fmt.Errorf("restore state file %s: %w (the replaced file is %s)", path, err, aside)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return info, aside, fmt.Errorf("restore state file %s: %w", path, err)
	}
	info.Bytes = int64(len(raw))
	return info, aside, nil
}

func writeSynced(p string, raw []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BackupObject writes the state object at url, as its current version
// holds it, to w: one read is consistent by itself. It takes no lease.
func BackupObject(ctx context.Context, url string, w io.Writer) (BackupInfo, error) {
	o, err := openObject(ctx, ObjectOptions{URL: url, ReadOnly: true}, false)
	if err != nil {
		return BackupInfo{}, err
	}
	defer o.Close()
	raw, ver, err := blobstore.Read(ctx, o.bucket, o.key)
	if blobstore.IsNotFound(err) {
		return BackupInfo{}, fmt.Errorf("back up state %s: there is no state object yet: nothing was synced", url)
	}
	if err != nil {
		return BackupInfo{}, fmt.Errorf("back up state %s: %w", url, blobstore.Hint(err, url))
	}
	doc, err := o.decode(raw)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("back up state %s: %w", url, err)
	}
	if doc.FormatVersion >= 2 && len(doc.Index) > 0 {
		// The version index lives in objects of its own: the backup holds
		// them too, as they were when the state object was read (a writer
		// deletes what it replaces only after the next state object names
		// the replacement, so a fast writer can make this fail: rerun).
		if doc.Blobs, err = o.blobsOf(ctx, &doc); err != nil {
			return BackupInfo{}, fmt.Errorf("back up state %s: read its version index (if a syncd is writing it, rerun): %w", url, err)
		}
		if raw, err = encodeDoc(&doc); err != nil {
			return BackupInfo{}, fmt.Errorf("back up state %s: %w", url, err)
		}
	}
	n, err := w.Write(raw)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("write the backup of state %s: %w", url, err)
	}
	return BackupInfo{Forms: len(doc.Forms), Version: string(ver), Bytes: int64(n)}, nil
}

// RestoreObject replaces the state object with the backup raw (what
// BackupObject wrote), after checking it. It takes the state's lease for
// the write, so it refuses while a syncd holds it.
func RestoreObject(ctx context.Context, opts ObjectOptions, raw []byte) (BackupInfo, error) {
	opts.ReadOnly = false
	o, err := OpenObject(ctx, opts)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("restore state %s: %w", opts.URL, err)
	}
	defer o.Close()
	doc, err := o.decode(raw)
	if err == nil && doc.FormatVersion >= 2 {
		err = checkBlobs(&doc)
	}
	var legacy map[string]*legacyIndex
	if err == nil && doc.FormatVersion < 2 {
		legacy, err = o.decodeLegacy(raw)
	}
	if err != nil {
		return BackupInfo{}, fmt.Errorf("restore state %s: the backup is not usable: %w", opts.URL, err)
	}
	// The index objects are written under new names: those of the backup
	// may still be in the bucket, named by the state being replaced, which
	// is kept beside it.
	if doc.Index == nil {
		doc.Index = map[string]objIndex{}
	}
	for id, ix := range doc.Index {
		ix = ix.clone()
		for i, c := range ix.Chunks {
			name := newBlobName(id, "chunk", c.Start)
			if err := o.putBlob(ctx, name, doc.Blobs[c.Name]); err != nil {
				return BackupInfo{}, fmt.Errorf("restore state %s: %w", opts.URL, err)
			}
			ix.Chunks[i].Name = name
		}
		for b, n := range ix.Pending {
			name := newBlobName(id, "pending", 0)
			if err := o.putBlob(ctx, name, doc.Blobs[n]); err != nil {
				return BackupInfo{}, fmt.Errorf("restore state %s: %w", opts.URL, err)
			}
			ix.Pending[b] = name
		}
		doc.Index[id] = ix
	}
	doc.Blobs = nil
	if legacy != nil {
		if _, err := o.migrateDoc(ctx, &doc, legacy); err != nil {
			return BackupInfo{}, fmt.Errorf("restore state %s: move the version index of the format %d backup out: %w", opts.URL, doc.FormatVersion, err)
		}
		doc.FormatVersion = objectFormat
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.lease.valid(); err != nil {
		return BackupInfo{}, err
	}
	// Keep what is replaced beside it.
	if o.ver != "" {
		cur, err := encodeDoc(&o.doc)
		if err == nil {
			err = o.bucket.WriteAll(ctx, o.key+".replaced-"+time.Now().UTC().Format("20060102T150405Z"), cur, &blob.WriterOptions{ContentType: "application/json"})
		}
		if err != nil {
			return BackupInfo{}, fmt.Errorf("restore state %s: keep the state it replaces: %w", opts.URL, err)
		}
	}
	if o.unsure {
		if err := o.resync(ctx); err != nil {
			return BackupInfo{}, fmt.Errorf("restore state %s: %w", opts.URL, err)
		}
	}
	seq := max(o.seq, o.tried) + 1
	doc.Writer, doc.Seq, doc.FormatVersion = o.id, seq, objectFormat
	out, err := encodeDoc(&doc)
	if err != nil {
		return BackupInfo{}, err
	}
	o.tried = seq
	ver, err := o.write(ctx, out, seq)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("restore state %s: %w", opts.URL, err)
	}
	o.doc, o.ver, o.seq = doc, ver, doc.Seq
	return BackupInfo{Forms: len(doc.Forms), Version: fmt.Sprint(ver), Bytes: int64(len(out))}, nil
}

// checkIndex checks every chunk of the version index and every pending
// change against its checksum: a backup must hold the index whole.
func (b *Bolt) checkIndex() error {
	return b.guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			for _, top := range [][]byte{indexBucket, pendingBucket} {
				parent := tx.Bucket(top)
				if parent == nil {
					continue
				}
				err := parent.ForEachBucket(func(form []byte) error {
					return parent.Bucket(form).ForEach(func(k, v []byte) error {
						var err error
						if string(top) == string(indexBucket) {
							_, err = decodeChunk(v)
						} else {
							_, err = decodeChange(v)
						}
						if err != nil {
							return &CorruptError{Path: b.path, Form: string(form), Err: fmt.Errorf("the version index: %w", err)}
						}
						return nil
					})
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
}
