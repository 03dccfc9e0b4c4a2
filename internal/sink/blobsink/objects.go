package blobsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// List lists the objects under prefix, skipping hidden names.
func (b *bucketStore) List(ctx context.Context, prefix string, fn func(key string) error) error {
	it := b.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s in %s: %w", prefix, b.where, blobstore.Hint(err, b.where))
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

// Open opens key for range reads.
func (b *bucketStore) Open(ctx context.Context, key string) (parquetsink.ReadFile, error) {
	a, err := b.bucket.Attributes(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("look at %s in %s: %w", key, b.where, blobstore.Hint(err, b.where))
	}
	return &objectFile{ctx: ctx, b: b.bucket, key: key, size: a.Size, where: b.where}, nil
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
