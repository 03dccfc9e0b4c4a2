// Package blobsink commits batches as Parquet objects in a bucket (GCS, S3,
// Azure Blob, or a folder through file://), in the layout of the local
// Parquet sink: <prefix>/<table>/submission_date=YYYY-MM-DD/<batch id>.parquet.
//
// An object store makes an upload visible whole when it completes, or not
// at all when it is abandoned; a commit whose encoding fails or whose
// context ends abandons its upload. Committed is an existence check. On GCS
// every upload carries the precondition "the object does not exist", so a
// batch is never written twice even by two writers at once.
package blobsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// ContentType is the media type of every object written.
const ContentType = "application/vnd.apache.parquet"

// MetaBatchID and MetaAttempt are the object metadata keys naming the
// batch an object holds and the attempt that wrote it.
const (
	MetaBatchID = "syncd-batch-id"
	MetaAttempt = "syncd-attempt"
)

// Options configures a Sink.
type Options struct {
	URL     string                    // gs://bucket/prefix, s3://bucket/prefix?region=..., azblob://container/prefix, file:///abs/path
	Encode  parquetsink.EncodeOptions // compression and row group size
	Layout  parquetsink.Layout        // partition prefixes: day (default), month or none
	Version string                    // written to the footer as syncd.version
	Logger  *zap.Logger               // nil logs nothing
}

// Sink commits each batch as one object per partition it touches, in the
// layout of the Parquet folder sink.
type Sink struct {
	bucket *blob.Bucket
	where  string // the URL, for messages
	enc    parquetsink.EncodeOptions
	layout parquetsink.Layout

	checkedMu sync.Mutex
	checked   map[string]bool   // tables whose layout was checked
	kv        map[string]string // footer extras; read-only after New
	log       *zap.Logger

	// stop, when closed, abandons every upload in flight and refuses new
	// ones (see StopWhen). Set before the first commit.
	stop <-chan struct{}

	// beforeUpload, when set, is called after the existence check, before
	// the upload starts (tests).
	beforeUpload func(key string)
}

// ErrStopped is the error of a commit refused or abandoned because the
// channel given to StopWhen was closed.
var ErrStopped = errors.New("this syncd lost the lease of its state (another one took over, or it could not renew in time), so it stopped writing: nothing was uploaded")

// StopWhen makes the sink abandon uploads in flight, and refuse new ones,
// once ch is closed: the state store's lease, so that a writer that lost it
// cannot complete an upload of a batch that the syncd that took over may
// already have resolved as never committed. Call it before the first commit.
func (s *Sink) StopWhen(ch <-chan struct{}) { s.stop = ch }

func (s *Sink) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

var (
	_ sink.Sink        = (*Sink)(nil)
	_ sink.Partitioner = (*Sink)(nil)
	_ sink.LeaseBound  = (*Sink)(nil)
)

// New opens the bucket opts.URL names and checks that it can be listed.
func New(ctx context.Context, opts Options) (*Sink, error) {
	if err := opts.Encode.Validate(); err != nil {
		return nil, err
	}
	loc, err := blobstore.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w: set sink.parquet.path to a folder or a bucket URL", err)
	}
	b, err := blobstore.Open(ctx, loc, true)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	layout, err := parquetsink.ParseLayout(string(opts.Layout))
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	s := &Sink{bucket: b, where: loc.Shown, enc: opts.Encode, layout: layout, log: log, checked: map[string]bool{}}
	if opts.Version != "" {
		s.kv = map[string]string{parquetsink.KeyVersion: opts.Version}
	}
	return s, nil
}

// Bucket is the bucket the sink writes to, keys relative to its prefix.
func (s *Sink) Bucket() *blob.Bucket { return s.bucket }

// Key is where the object of batch b's partition part lives, relative to
// the URL's prefix.
func (s *Sink) Key(b sink.Batch, part string) string {
	return s.layout.RelPath(b.Table, parquetsink.Prefix(b.TimeColumn), part, b.ID)
}

// PartitionOf names the partition of a row whose time is t.
func (s *Sink) PartitionOf(t time.Time) string { return s.layout.PartitionOf(t) }

// PartitionStart is the first instant of the partition holding t.
func (s *Sink) PartitionStart(t time.Time) time.Time { return s.layout.PartitionStart(t) }

// Check reports whether the bucket can be reached and read, for validate.
func (s *Sink) Check(ctx context.Context) error {
	it := s.bucket.List(&blob.ListOptions{})
	if _, err := it.Next(ctx); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list %s: %w", s.where, blobstore.Hint(err, s.where))
	}
	return nil
}

// Commit writes rec as batch b: one object per partition its rows fall
// in. An object already there is kept: the rows are never written twice.
func (s *Sink) Commit(ctx context.Context, b sink.Batch, rec arrow.Record) error {
	if rec == nil {
		return fmt.Errorf("commit batch %s: no record", b.ID)
	}
	b, parts, err := s.layout.Split(b, rec)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		part := s.layout.PartitionOf(b.WindowStart)
		b.Parts = []string{part}
		parts = []sink.Part{{Key: part, Records: sink.Records{Schema: rec.Schema(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}}}
	}
	_, err = s.CommitParts(ctx, b, parts)
	return err
}

// CommitParts uploads each part of batch b as one object, in order
// (sink.Partitioner): the encoder streams into the upload, so memory holds
// one chunk and one row group. It reports the bytes uploaded.
func (s *Sink) CommitParts(ctx context.Context, b sink.Batch, parts []sink.Part) (int64, error) {
	if err := parquetsink.ValidateBatch(b); err != nil {
		return 0, err
	}
	if len(parts) != len(b.Parts) {
		return 0, fmt.Errorf("commit batch %s: %d parts for %d partition keys", b.ID, len(parts), len(b.Parts))
	}
	if err := s.checkLayout(ctx, b); err != nil {
		return 0, err
	}
	var written int64
	for i, p := range parts {
		if p.Key != b.Parts[i] {
			return written, fmt.Errorf("commit batch %s: part %d is %q, the batch lists %q", b.ID, i, p.Key, b.Parts[i])
		}
		n, err := s.commitPart(ctx, b, p)
		written += n
		if err != nil {
			return written, err
		}
	}
	for _, part := range b.Stale {
		if err := s.bucket.Delete(ctx, s.Key(b, part)); err != nil && !blobstore.IsNotFound(err) {
			return written, fmt.Errorf("commit batch %s: remove the object an earlier attempt wrote in %s: %w", b.ID, part, blobstore.Hint(err, s.where))
		}
	}
	return written, nil
}

// checkLayout refuses, once per table and process, a table written with
// another layout: one listing of the table's prefix.
func (s *Sink) checkLayout(ctx context.Context, b sink.Batch) error {
	table := b.Table
	s.checkedMu.Lock()
	defer s.checkedMu.Unlock()
	if s.checked[table] {
		return nil
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: table + "/", Delimiter: "/"})
	var names []string
	for len(names) < 100 {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("list table %s in %s: %w", table, s.where, blobstore.Hint(err, s.where))
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(obj.Key, table+"/"), "/"))
	}
	if err := s.layout.CheckTable(table, parquetsink.Prefix(b.TimeColumn), names); err != nil {
		return err
	}
	s.checked[table] = true
	return nil
}

func (s *Sink) commitPart(ctx context.Context, b sink.Batch, p sink.Part) (int64, error) {
	key := s.Key(b, p.Key)
	rows := p.Records.Rows
	encode := func(w io.Writer) (int64, error) {
		return parquetsink.EncodeRecords(w, p.Records, b, s.kv, s.enc)
	}
	before := ifAbsent
	if b.Replace {
		// An attempt that never committed may have written it: this
		// attempt's rows replace it (one writer holds the state's lease).
		before = nil
	} else {
		switch ours, present, err := s.holds(ctx, key, b); {
		case err != nil:
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, err)
		case ours:
			s.log.Debug("batch object already committed", zap.String("batch_id", b.ID), zap.String("key", key))
			return 0, nil
		case present:
			// A stopped attempt of the batch wrote it: replaced.
			before = nil
		}
	}
	if s.beforeUpload != nil {
		s.beforeUpload(key)
	}
	if s.stopped() {
		return 0, fmt.Errorf("commit batch %s: %w", b.ID, ErrStopped)
	}
	// Cancelling wctx abandons the upload: the object never appears.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.stop != nil {
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{
		ContentType: ContentType,
		Metadata:    map[string]string{MetaBatchID: b.ID, MetaAttempt: b.Attempt},
		BeforeWrite: before,
	})
	if err != nil {
		return 0, fmt.Errorf("commit batch %s: start the upload of %s: %w", b.ID, key, blobstore.Hint(err, s.where))
	}
	cw := &countingWriter{w: w}
	if _, err := encode(cw); err != nil {
		cancel()
		_ = closeWriter(w)
		if s.stopped() {
			err = ErrStopped
		}
		return 0, fmt.Errorf("write batch %s to %s: %w (nothing written)", b.ID, key, err)
	}
	if err := ctx.Err(); err != nil {
		cancel()
		_ = closeWriter(w)
		return 0, fmt.Errorf("commit batch %s: %w (nothing written to %s)", b.ID, err, key)
	}
	if s.stopped() {
		cancel()
		_ = closeWriter(w)
		return 0, fmt.Errorf("commit batch %s: %w", b.ID, ErrStopped)
	}
	if err := closeWriter(w); err != nil {
		if s.stopped() && wctx.Err() != nil {
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, ErrStopped)
		}
		if blobstore.IsPrecondition(err) {
			// Another writer put the batch in place first: it is committed.
			s.log.Info("batch committed meanwhile by another writer", zap.String("batch_id", b.ID), zap.String("key", key))
			return 0, nil
		}
		return 0, fmt.Errorf("commit batch %s: upload %s: %w", b.ID, key, blobstore.Hint(err, s.where))
	}
	s.log.Debug("batch committed", zap.String("batch_id", b.ID), zap.String("key", key), zap.Int64("rows", rows), zap.Int64("bytes", cw.n))
	return cw.n, nil
}

// ifAbsent makes an upload create the object only if it does not exist
// yet: DoesNotExist on GCS, If-None-Match: * on S3 and Azure. So a batch is
// never written twice, even by two writers at once; a store without such a
// condition fails the upload instead (file:// excepted: one host, and the
// state's lock keeps one writer).
func ifAbsent(as func(any) bool) error { return blobstore.IfAbsent(as) }

// Committed reports whether every object of batch b (one per partition of
// b.Parts) exists.
func (s *Sink) Committed(ctx context.Context, b sink.Batch) (bool, error) {
	if err := parquetsink.ValidateBatch(b); err != nil {
		return false, err
	}
	for _, part := range s.layout.PartsOf(b) {
		ok, _, err := s.holds(ctx, s.Key(b, part), b)
		if err != nil {
			return false, fmt.Errorf("check batch %s: %w", b.ID, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// holds reports whether key is an object of batch b written by b's attempt
// (when b names one), and whether an object is there at all.
func (s *Sink) holds(ctx context.Context, key string, b sink.Batch) (ours, present bool, err error) {
	if b.Attempt == "" {
		ok, err := s.exists(ctx, key)
		return ok, ok, err
	}
	a, err := s.bucket.Attributes(ctx, key)
	if blobstore.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("look for %s in %s: %w", key, s.where, blobstore.Hint(err, s.where))
	}
	return a.Metadata[MetaAttempt] == b.Attempt, true, nil
}

func (s *Sink) exists(ctx context.Context, key string) (bool, error) {
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("look for %s in %s: %w", key, s.where, blobstore.Hint(err, s.where))
	}
	return ok, nil
}

// Close closes the bucket.
func (s *Sink) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("close bucket %s: %w", s.where, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Purge deletes every object of table. A purge a crash interrupted is
// finished by the next one: deleting is idempotent.
func (s *Sink) Purge(ctx context.Context, table string) error {
	if table == "" || strings.ContainsAny(table, `/\`) {
		return fmt.Errorf("purge table %q: not a table name", table)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: table + "/"})
	deleted := 0
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("purge table %s: list %s: %w", table, s.where, blobstore.Hint(err, s.where))
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("purge table %s: delete %s: %w", table, obj.Key, blobstore.Hint(err, s.where))
		}
		deleted++
	}
	s.log.Info("purged a table's objects", zap.String("table", table), zap.Int("objects", deleted))
	return nil
}

// closeWriter closes an upload. gocloud.dev v0.47's Azure writer panics
// (nil pointer) when it closes an upload fed by Write that failed, a
// refused create-only condition or a cancelled one among them: that is an
// upload that did not happen, so the panic becomes its error.
func closeWriter(w *blob.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the storage client failed while it closed the upload: %v", r)
		}
	}()
	return w.Close()
}
