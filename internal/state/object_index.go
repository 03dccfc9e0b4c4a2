package state

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// The version index of a state in a bucket lives in objects beside the
// state object, under <state>.index/<form id, hex>/: a chunk object per
// range of record times, and a pending object per intent that carries an
// index change. Each is written once, under a name of its own that is never
// reused, with If-None-Match, before the compare-and-swap of the state
// object that names it: a stop or a lost race in between leaves an object
// nothing names, never a state object naming one that is missing or
// different. Objects a state object no longer names are deleted after it
// is written.

// The chunks of a bucket's index hold 4,096 to 16,384 records (about 120
// to 470 KB): a year of a dense form is a few hundred of them, and a state
// object names each in about 80 bytes.
const objectChunkMax, objectChunkSmall = 16384, 4096

// objIndex is what the state object keeps of one form's index.
type objIndex struct {
	Chunks  []chunkRef        `json:"chunks,omitempty"`  // sorted by start
	Pending map[string]string `json:"pending,omitempty"` // batch id -> object name
}

// chunkRef names one chunk object.
type chunkRef struct {
	Start int64  `json:"start"` // Unix microseconds: the chunk holds [Start, the next chunk's Start)
	Last  int64  `json:"last"`  // time of its last record
	N     int    `json:"n"`     // records
	Name  string `json:"name"`  // object, under <state>.index/
}

func (ix objIndex) clone() objIndex {
	return objIndex{Chunks: slices.Clone(ix.Chunks), Pending: maps.Clone(ix.Pending)}
}

func (ix objIndex) isZero() bool { return len(ix.Chunks) == 0 && len(ix.Pending) == 0 }

func (ix objIndex) count() (n int64) {
	for _, c := range ix.Chunks {
		n += int64(c.N)
	}
	return n
}

func (o *Object) blobKey(name string) string { return o.key + ".index/" + name }

// newBlobName is a name never used before, for an object of form's index.
func newBlobName(formID, kind string, start int64) string {
	return fmt.Sprintf("%s/%s-%016x-%s", hex.EncodeToString([]byte(formID)), kind, uint64(start)^(1<<63), newID())
}

// putBlob writes an index object once: a name is never written twice.
func (o *Object) putBlob(ctx context.Context, name string, raw []byte) error {
	err := o.bucket.WriteAll(ctx, o.blobKey(name), raw, &blob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: blobstore.IfAbsent})
	if err != nil {
		return fmt.Errorf("write %s: %w", o.blobKey(name), blobstore.Hint(err, o.shown))
	}
	return nil
}

func (o *Object) getBlob(ctx context.Context, name string) ([]byte, error) {
	raw, err := o.bucket.ReadAll(ctx, o.blobKey(name))
	if blobstore.IsNotFound(err) {
		return nil, &CorruptError{Path: o.shown, Err: fmt.Errorf("the version index object %s it names is missing", o.blobKey(name))}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", o.blobKey(name), blobstore.Hint(err, o.shown))
	}
	return raw, nil
}

func (o *Object) getChunk(ctx context.Context, formID, name string) ([]entry, error) {
	raw, err := o.getBlob(ctx, name)
	if err != nil {
		return nil, err
	}
	es, err := decodeChunk(raw)
	if err != nil {
		return nil, &CorruptError{Path: o.shown, Form: formID, Err: fmt.Errorf("the version index object %s: %w", o.blobKey(name), err)}
	}
	return es, nil
}

// remove deletes index objects the state object no longer names, or, while
// a Versions of this store reads chunks the state object named when it
// began, leaves them to the last such reader to delete. A failure leaves an
// object nothing names: harmless, so it is not an error.
func (o *Object) remove(ctx context.Context, names []string) {
	o.mu.Lock()
	if o.readers > 0 {
		o.trash = append(o.trash, names...)
		names = nil
	}
	o.mu.Unlock()
	for _, n := range names {
		_ = o.bucket.Delete(context.WithoutCancel(ctx), o.blobKey(n))
	}
}

// applyIndex lands change in the form's chunks: the chunk objects it
// rewrites are written anew, and ix names them instead of the old ones,
// which it returns.
func (o *Object) applyIndex(ctx context.Context, st *StreamState, ix *objIndex, change *IndexChange) ([]string, error) {
	if change.empty() {
		return nil, nil
	}
	refs := map[int64]chunkRef{}
	starts := make([]int64, len(ix.Chunks))
	for i, c := range ix.Chunks {
		refs[c.Start] = c
		starts[i] = c.Start
	}
	plan, err := planIndex(starts, func(start int64) ([]entry, error) {
		return o.getChunk(ctx, st.Key, refs[start].Name)
	}, func(start int64) (int, int64) {
		return refs[start].N, refs[start].Last
	}, change, o.chunks)
	if err != nil {
		return nil, err
	}
	var unused []string
	for _, k := range plan.delete {
		unused = append(unused, refs[k].Name)
		delete(refs, k)
	}
	for k, es := range plan.write {
		name := newBlobName(st.Key, "chunk", k)
		if err := o.putBlob(ctx, name, encodeChunk(es)); err != nil {
			return nil, err
		}
		if old, ok := refs[k]; ok {
			unused = append(unused, old.Name)
		}
		refs[k] = chunkRef{Start: k, Last: es[len(es)-1].t, N: len(es), Name: name}
	}
	ix.Chunks = slices.SortedFunc(maps.Values(refs), func(a, b chunkRef) int { return cmp.Compare(a.Start, b.Start) })
	st.Indexed += plan.delta
	return unused, nil
}

// versions calls fn with every record of the form's index whose time is in
// [from, to), in time order, from the chunks the state object named when it
// began.
func (o *Object) versions(ctx context.Context, formID string, from, to time.Time, fn func(Entry) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read the version index of form %s: %w", formID, err)
	}
	lo, hi := from.UnixMicro(), to.UnixMicro()
	o.mu.Lock()
	o.readers++
	defer func() {
		o.mu.Lock()
		o.readers--
		var trash []string
		if o.readers == 0 {
			trash, o.trash = o.trash, nil
		}
		o.mu.Unlock()
		o.remove(ctx, trash)
	}()
	ix := o.doc.Index[formID].clone()
	legacy := o.legacy[formID]
	if o.doc.FormatVersion >= 2 {
		legacy = nil
	}
	o.mu.Unlock()
	if legacy != nil {
		// A format 1 object read by a read-only store.
		for _, e := range legacy.entries() {
			if t := e.Time.UnixMicro(); t >= lo && t < hi {
				if err := fn(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i, c := range ix.Chunks {
		if c.Start >= hi || (i+1 < len(ix.Chunks) && ix.Chunks[i+1].Start <= lo) {
			continue
		}
		es, err := o.getChunk(ctx, formID, c.Name)
		if err != nil {
			return fmt.Errorf("read the version index of form %s: %w", formID, err)
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
}

// migrate moves the version index of a format 1 state object out into
// chunk and pending objects, and writes the state object at format 2.
func (o *Object) migrate(ctx context.Context) error {
	o.mu.Lock()
	old, legacy := o.doc.FormatVersion, o.legacy
	o.mu.Unlock()
	if old >= objectFormat {
		return nil
	}
	var unused []string
	err := o.mutate(ctx, "migrate", func(doc *objectDoc) error {
		var err error
		unused, err = o.migrateDoc(ctx, doc, legacy)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate state %s from format %d to %d: %w", o.shown, old, objectFormat, err)
	}
	o.remove(ctx, unused)
	o.mu.Lock()
	o.legacy = nil
	o.mu.Unlock()
	return nil
}

// migrateDoc writes the index objects of the legacy index of doc's forms
// and names them in doc.
func (o *Object) migrateDoc(ctx context.Context, doc *objectDoc, legacy map[string]*legacyIndex) ([]string, error) {
	var unused []string
	for id, old := range legacy {
		st, ok := doc.Forms[id]
		if !ok || old == nil {
			continue
		}
		st = cloneForm(st)
		st.Indexed = 0
		ix := objIndex{}
		u, err := o.applyIndex(ctx, &st, &ix, &IndexChange{Put: old.entries()})
		if err != nil {
			return nil, err
		}
		unused = append(unused, u...)
		for batch, in := range st.Intents {
			if in.Reconcile && in.Counts == nil {
				in.Counts = old.counts(batch)
				st.Intents[batch] = in
			}
			if c := old.pending(batch); c != nil {
				name := newBlobName(id, "pending", 0)
				if err := o.putBlob(ctx, name, encodeChange(c)); err != nil {
					return nil, err
				}
				if ix.Pending == nil {
					ix.Pending = map[string]string{}
				}
				ix.Pending[batch] = name
			}
		}
		doc.Forms[id] = st
		if !ix.isZero() {
			doc.Index[id] = ix
		}
	}
	return unused, nil
}

// objIndexTx is a form's index inside a write of the state object: the
// objects it writes are named in doc, which the write then puts in place,
// and those doc no longer names are deleted once it is.
type objIndexTx struct {
	ctx    context.Context
	o      *Object
	doc    *objectDoc
	formID string
	ix     objIndex // the form's, once loaded: a write that keeps no index copies none
	loaded bool
	unused []string // objects the new doc no longer names
}

func (x *objIndexTx) index() *objIndex {
	if !x.loaded {
		x.ix, x.loaded = x.doc.Index[x.formID].clone(), true
	}
	return &x.ix
}

// store puts the index, if the write changed it, into the doc.
func (x *objIndexTx) store() {
	if !x.loaded {
		return
	}
	if x.ix.isZero() {
		delete(x.doc.Index, x.formID)
	} else {
		x.doc.Index[x.formID] = x.ix
	}
}

// pend writes the change to an object of its own, named in the index
// under the batch id.
func (x *objIndexTx) pend(batchID string, c *IndexChange) error {
	name := newBlobName(x.formID, "pending", 0)
	if err := x.o.putBlob(x.ctx, name, encodeChange(c)); err != nil {
		return err
	}
	ix := x.index()
	if old, ok := ix.Pending[batchID]; ok {
		x.unused = append(x.unused, old)
	}
	if ix.Pending == nil {
		ix.Pending = map[string]string{}
	}
	ix.Pending[batchID] = name
	return nil
}

func (x *objIndexTx) settle(batchID string, read bool) (*IndexChange, error) {
	ix := x.index()
	name, ok := ix.Pending[batchID]
	if !ok {
		return nil, nil
	}
	var change *IndexChange
	if read {
		raw, err := x.o.getBlob(x.ctx, name)
		if err != nil {
			return nil, err
		}
		if change, err = decodeChange(raw); err != nil {
			return nil, &CorruptError{Path: x.o.shown, Form: x.formID, Err: err}
		}
	}
	delete(ix.Pending, batchID)
	x.unused = append(x.unused, name)
	return change, nil
}

func (x *objIndexTx) apply(st *StreamState, c *IndexChange) error {
	u, err := x.o.applyIndex(x.ctx, st, x.index(), c)
	x.unused = append(x.unused, u...)
	return err
}

// clear lets every object of the form's index go.
func (x *objIndexTx) clear() error {
	ix := x.index()
	for _, c := range ix.Chunks {
		x.unused = append(x.unused, c.Name)
	}
	for _, n := range ix.Pending {
		x.unused = append(x.unused, n)
	}
	*ix = objIndex{}
	return nil
}

// blobsOf reads every index object doc names, for a backup.
func (o *Object) blobsOf(ctx context.Context, doc *objectDoc) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, ix := range doc.Index {
		names := slices.Collect(maps.Values(ix.Pending))
		for _, c := range ix.Chunks {
			names = append(names, c.Name)
		}
		for _, n := range names {
			raw, err := o.getBlob(ctx, n)
			if err != nil {
				return nil, err
			}
			out[n] = raw
		}
	}
	return out, nil
}

// checkBlobs makes sure a backup holds every index object it names.
func checkBlobs(doc *objectDoc) error {
	for id, ix := range doc.Index {
		for _, c := range ix.Chunks {
			if _, err := decodeChunk(doc.Blobs[c.Name]); err != nil {
				return fmt.Errorf("the version index of form %s: chunk %s: %w", id, c.Name, err)
			}
		}
		for b, n := range ix.Pending {
			if _, err := decodeChange(doc.Blobs[n]); err != nil {
				return fmt.Errorf("the version index of form %s: the pending change of batch %s: %w", id, b, err)
			}
		}
	}
	return nil
}
