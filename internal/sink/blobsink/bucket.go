package blobsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/syncd-dev/syncd/internal/logkey"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// bucketStore is parquetsink.Storage in a bucket: an upload is visible
// whole once it completes, a new object is created only if absent, and
// uploads stop once stop is closed (see Sink.StopWhen).
type bucketStore struct {
	bucket *blob.Bucket
	where  string // the URL, for messages
	log    *zap.Logger

	// stop, when closed, abandons every upload in flight and refuses new
	// ones. Set before the first commit.
	stop <-chan struct{}

	// beforeUpload, when set, is called before an upload starts (tests).
	beforeUpload func(key string)
}

var _ parquetsink.Storage = (*bucketStore)(nil)

func (b *bucketStore) String() string { return b.where }

func (b *bucketStore) stopped() bool {
	select {
	case <-b.stop:
		return true
	default:
		return false
	}
}

func (b *bucketStore) hint(err error) error { return blobstore.Hint(err, b.where) }

// Stat reads the object's metadata. An object without it (file://
// buckets keep none) is named by its footer.
func (b *bucketStore) Stat(ctx context.Context, key string) (parquetsink.FileStat, error) {
	a, err := b.bucket.Attributes(ctx, key)
	if blobstore.IsNotFound(err) {
		return parquetsink.FileStat{}, nil
	}
	if err != nil {
		return parquetsink.FileStat{}, fmt.Errorf("look for %s in %s: %w", key, b.where, b.hint(err))
	}
	st := parquetsink.FileStat{Present: true, BatchID: a.Metadata[MetaBatchID], Attempt: a.Metadata[MetaAttempt], Version: a.ETag}
	var gcs storage.ObjectAttrs
	if a.As(&gcs) {
		// GCS conditions name generations, not ETags.
		st.Version = strconv.FormatInt(gcs.Generation, 10)
	}
	if st.BatchID != "" {
		return st, nil
	}
	f := &objectFile{ctx: ctx, b: b.bucket, key: key, size: a.Size, where: b.where}
	r, err := file.NewParquetReader(f)
	if err != nil {
		return st, nil // unreadable: present, naming no batch
	}
	defer r.Close()
	kv := r.MetaData().KeyValueMetadata()
	if v := kv.FindValue(parquetsink.KeyBatchID); v != nil {
		st.BatchID = *v
	}
	if v := kv.FindValue(parquetsink.KeyAttempt); v != nil {
		st.Attempt = *v
	}
	return st, nil
}

// Put streams what write produces into one upload. Cancelling the upload's
// context (ctx ending, the stop channel closing, write failing) abandons
// it: the object never appears.
func (b *bucketStore) Put(ctx context.Context, key string, o parquetsink.PutOptions, write func(io.Writer) (int64, error)) (int64, error) {
	if b.beforeUpload != nil {
		b.beforeUpload(key)
	}
	if b.stopped() {
		return 0, ErrStopped
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if b.stop != nil {
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	var before func(as func(any) bool) error
	switch {
	case o.IfAbsent:
		// DoesNotExist on GCS, If-None-Match: * on S3 and Azure; a store
		// without such a condition fails the upload instead (file://
		// excepted: one host, and the state's lock keeps one writer).
		before = blobstore.IfAbsent
	case o.IfVersion != "":
		before = ifVersion(o.IfVersion)
	}
	up := &lazyUpload{open: func(bufferSize int) (*blob.Writer, error) {
		w, err := b.bucket.NewWriter(wctx, key, &blob.WriterOptions{
			ContentType: ContentType,
			Metadata:    map[string]string{MetaBatchID: o.BatchID, MetaAttempt: o.Attempt},
			BeforeWrite: before,
			BufferSize:  bufferSize,
		})
		if err != nil {
			return nil, fmt.Errorf("start the upload of %s: %w", key, b.hint(err))
		}
		return w, nil
	}}
	cw := &countingWriter{w: up}
	abandon := func(err error) (int64, error) {
		cancel()
		if up.w != nil {
			_ = closeWriter(up.w)
		}
		if b.stopped() {
			err = ErrStopped
		}
		return 0, fmt.Errorf("upload %s: %w (nothing written)", key, err)
	}
	if _, err := write(cw); err != nil {
		return abandon(err)
	}
	if err := ctx.Err(); err != nil {
		return abandon(err)
	}
	if b.stopped() {
		return abandon(ErrStopped)
	}
	w, err := up.finish()
	if err != nil {
		return abandon(err)
	}
	if err := closeWriter(w); err != nil {
		if b.stopped() && wctx.Err() != nil {
			return 0, ErrStopped
		}
		if blobstore.IsPrecondition(err) {
			return 0, fmt.Errorf("upload %s: %w", key, parquetsink.ErrChanged)
		}
		return 0, fmt.Errorf("upload %s: %w", key, b.hint(err))
	}
	return cw.n, nil
}

// ifVersion makes an upload replace the object only while it is still
// version ver (Stat's): GenerationMatch on GCS, If-Match on S3 and Azure;
// nothing on file:// (one host, one writer by the state's lock).
// Replacing unconditionally would let the commit of a writer that died
// after sending it, completed by the service later, land over the file of
// the attempt that followed; its condition names a version that is gone.
func ifVersion(ver string) func(as func(any) bool) error {
	return func(as func(any) bool) error {
		var obj **storage.ObjectHandle
		if as(&obj) {
			gen, err := strconv.ParseInt(ver, 10, 64)
			if err != nil {
				return fmt.Errorf("GCS generation %q is not a number", ver)
			}
			*obj = (*obj).If(storage.Conditions{GenerationMatch: gen})
			return nil
		}
		var up *transfermanager.UploadObjectInput
		if as(&up) {
			up.IfMatch = aws.String(ver)
			return nil
		}
		var az *azblob.UploadStreamOptions
		if as(&az) {
			e := azcore.ETag(ver)
			az.AccessConditions = &azblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &e}}
			return nil
		}
		return nil
	}
}

// Keep does nothing: an upload is durable once it is visible.
func (b *bucketStore) Keep(context.Context, string) error { return nil }

// Delete deletes key; an absent one is no error.
func (b *bucketStore) Delete(ctx context.Context, key string) error {
	if err := b.bucket.Delete(ctx, key); err != nil && !blobstore.IsNotFound(err) {
		return fmt.Errorf("delete %s in %s: %w", key, b.where, b.hint(err))
	}
	return nil
}

// Entries lists table's prefix one level deep.
func (b *bucketStore) Entries(ctx context.Context, table string, n int) ([]string, error) {
	it := b.bucket.List(&blob.ListOptions{Prefix: table + "/", Delimiter: "/"})
	var names []string
	for len(names) < n {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list table %s in %s: %w", table, b.where, b.hint(err))
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(obj.Key, table+"/"), "/"))
	}
	return names, nil
}

// Purge deletes every object of table. A bucket cannot hide a table at
// once, so readers may see part of it while it goes; a purge a crash
// interrupted is finished by the next one, deleting being idempotent.
func (b *bucketStore) Purge(ctx context.Context, table string) error {
	it := b.bucket.List(&blob.ListOptions{Prefix: table + "/"})
	deleted := 0
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", b.where, b.hint(err))
		}
		if err := b.Delete(ctx, obj.Key); err != nil {
			return err
		}
		deleted++
	}
	b.log.Info("purged a table's objects", zap.String(logkey.Table, table), zap.Int(logkey.Objects, deleted))
	return nil
}

// Close closes the bucket.
func (b *bucketStore) Close() error {
	if err := b.bucket.Close(); err != nil {
		return fmt.Errorf("close bucket %s: %w", b.where, err)
	}
	return nil
}

// smallUpload is the largest file gathered in memory before its upload
// starts. The storage clients' default buffers are 8 MiB (Azure) and
// 16 MiB (GCS) per upload, allocated even for a file of a few kilobytes:
// a first sync of sparse forms writes thousands of those, and a three-row
// file cost 17 MB of allocation on GCS. A small file is sent with a buffer
// of its own size (uploadBuffer); a larger one streams with the defaults.
const smallUpload = 1 << 20

// uploadBuffer is the upload buffer for n bytes: n rounded up to GCS's
// chunk granularity (256 KiB), which the other drivers accept as is.
func uploadBuffer(n int) int {
	const unit = 256 << 10
	return max(unit, (n+unit-1)/unit*unit)
}

// lazyUpload gathers up to smallUpload bytes before it opens its upload
// with a buffer for what it gathered; past that, it opens one with the
// driver's default buffer and streams.
type lazyUpload struct {
	open func(bufferSize int) (*blob.Writer, error)
	buf  []byte
	w    *blob.Writer
}

func (u *lazyUpload) Write(p []byte) (int, error) {
	if u.w == nil {
		if len(u.buf)+len(p) <= smallUpload {
			u.buf = append(u.buf, p...)
			return len(p), nil
		}
		if err := u.start(0); err != nil {
			return 0, err
		}
	}
	return u.w.Write(p)
}

// finish returns the upload with every byte written to it, for Close.
func (u *lazyUpload) finish() (*blob.Writer, error) {
	if u.w == nil {
		if err := u.start(uploadBuffer(len(u.buf))); err != nil {
			return nil, err
		}
	}
	return u.w, nil
}

// start opens the upload with bufferSize and hands it what was gathered.
// The upload is kept even when that write fails, for the caller to close.
func (u *lazyUpload) start(bufferSize int) error {
	w, err := u.open(bufferSize)
	if err != nil {
		return err
	}
	u.w = w
	_, err = w.Write(u.buf)
	u.buf = nil
	return err
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

// Probe writes and deletes a hidden probe object under the prefix
// (parquetsink.StorageProber).
func (b *bucketStore) Probe(ctx context.Context) (string, error) {
	key := parquetsink.ProbeName()
	if err := b.bucket.WriteAll(ctx, key, []byte("syncd validate probe\n"), &blob.WriterOptions{ContentType: "text/plain"}); err != nil {
		return "", fmt.Errorf("output %s cannot be written (probe object %s): %w", b.where, key, blobstore.Hint(err, b.where))
	}
	if err := b.bucket.Delete(ctx, key); err != nil {
		return "", fmt.Errorf("output %s: the probe object %s was written but could not be deleted: %w (syncd must be able to delete objects there; delete it by hand)", b.where, key, blobstore.Hint(err, b.where))
	}
	return "a probe object was written and deleted", nil
}
