// Package blobsink commits batches as Parquet objects in a bucket (GCS, S3,
// Azure Blob, or a folder through file://): the Parquet sink
// (parquetsink.Sink, its algorithm and layout) over a bucket Storage,
// <prefix>/<table>/submission_date=YYYY-MM-DD/<batch id>.parquet.
//
// An object store makes an upload visible whole when it completes, or not
// at all when it is abandoned; a commit whose encoding fails or whose
// context ends abandons its upload. Every upload of a new object carries
// the precondition "the object does not exist" (GCS DoesNotExist, S3 and
// Azure If-None-Match: *), so a batch is never written twice even by two
// writers at once. Each object names its batch and attempt in its
// metadata, so Committed needs no download.
package blobsink

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"
	"gocloud.dev/blob"

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

// Sink is the Parquet sink over a bucket. It is also a sink.LeaseBound:
// it stops uploading once the state's lease is lost.
type Sink struct {
	*parquetsink.Sink
	store *bucketStore
}

// The rest of its capabilities are parquetsink.Sink's.
var _ sink.LeaseBound = (*Sink)(nil)

// ErrStopped is the error of a commit refused or abandoned because the
// channel given to StopWhen was closed.
var ErrStopped = errors.New("this syncd lost the lease of its state (another one took over, or it could not renew in time), so it stopped writing: nothing was uploaded")

// New opens the bucket opts.URL names.
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
	st := &bucketStore{bucket: b, where: loc.Shown, log: log}
	ps, err := parquetsink.NewOn(st, parquetsink.Settings{Encode: opts.Encode, Layout: opts.Layout, Version: opts.Version, Logger: log})
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return &Sink{Sink: ps, store: st}, nil
}

// StopWhen makes the sink abandon uploads in flight, and refuse new ones,
// once ch is closed: the state store's lease, so that a writer that lost it
// cannot complete an upload of a batch that the syncd that took over may
// already have resolved as never committed. Call it before the first commit.
func (s *Sink) StopWhen(ch <-chan struct{}) { s.store.stop = ch }

// Bucket is the bucket the sink writes to, keys relative to its prefix.
func (s *Sink) Bucket() *blob.Bucket { return s.store.bucket }

// Check reports whether the bucket can be reached and read, for validate.
func (s *Sink) Check(ctx context.Context) error {
	it := s.store.bucket.List(&blob.ListOptions{})
	if _, err := it.Next(ctx); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list %s: %w", s.store.where, blobstore.Hint(err, s.store.where))
	}
	return nil
}
