package blobsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

var (
	_ sink.Inventory     = (*Sink)(nil)
	_ sink.VersionReader = (*Sink)(nil)
)

// HeldBatches lists the ids of the batches table has objects of, by their
// keys (sink.Inventory).
func (s *Sink) HeldBatches(ctx context.Context, table string) ([]string, error) {
	return parquetsink.HeldBatchIDs(ctx, bucketLister{s.bucket, s.where}, table)
}

// DescribeBatches reads the footers of table's objects (sink.Inventory).
func (s *Sink) DescribeBatches(ctx context.Context, table string) ([]sink.Held, error) {
	return parquetsink.DescribeHeld(ctx, bucketLister{s.bucket, s.where}, s.layout, table)
}

// ReadVersions reads the identity columns of the objects of table's
// complete batches, by range reads of those columns only
// (sink.VersionReader).
func (s *Sink) ReadVersions(ctx context.Context, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	return parquetsink.ReadHeldVersions(ctx, bucketLister{s.bucket, s.where}, s.layout, t, fn)
}

// bucketLister is parquetsink.Lister over a bucket.
type bucketLister struct {
	b     *blob.Bucket
	where string
}

func (l bucketLister) List(ctx context.Context, prefix string, fn func(key string) error) error {
	it := l.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s in %s: %w", prefix, l.where, blobstore.Hint(err, l.where))
		}
		if obj.IsDir || hidden(obj.Key) {
			continue
		}
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
}

// hidden reports a key with an element readers skip ('.'), such as a
// file:// bucket's temporary files.
func hidden(key string) bool {
	for _, e := range strings.Split(key, "/") {
		if strings.HasPrefix(e, ".") {
			return true
		}
	}
	return false
}

func (l bucketLister) Open(ctx context.Context, key string) (parquetsink.ReadFile, error) {
	a, err := l.b.Attributes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("look at %s in %s: %w", key, l.where, blobstore.Hint(err, l.where))
	}
	return &objectFile{ctx: ctx, b: l.b, key: key, size: a.Size, where: l.where}, nil
}

// objectFile reads an object by ranges: the Parquet reader fetches the
// footer, then the column chunks it is asked for, never the whole object.
type objectFile struct {
	ctx       context.Context
	b         *blob.Bucket
	key       string
	where     string
	size, off int64
}

func (f *objectFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	r, err := f.b.NewRangeReader(f.ctx, f.key, off, n, nil)
	if err != nil {
		return 0, fmt.Errorf("read %s in %s: %w", f.key, f.where, blobstore.Hint(err, f.where))
	}
	defer r.Close()
	got, err := io.ReadFull(r, p[:n])
	if err != nil {
		return got, fmt.Errorf("read %s in %s: %w", f.key, f.where, err)
	}
	if got < len(p) {
		return got, io.EOF
	}
	return got, nil
}

func (f *objectFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, errors.New("seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("seek: negative offset")
	}
	f.off = offset
	return offset, nil
}

func (f *objectFile) Close() error { return nil }
