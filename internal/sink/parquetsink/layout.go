package parquetsink

import (
	"path"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
)

// ValidateBatch refuses a batch that would land somewhere unexpected:
// hidden from readers, outside the root, or in the wrong partition. Other
// sinks with this layout (object storage) use it too.
func ValidateBatch(b sink.Batch) error { return validate(b) }

// RelPath is where batch b's file lives relative to the root, with '/'
// separators: <table>/submission_date=YYYY-MM-DD/<batch id>.parquet. It is
// the object key under a bucket prefix.
func RelPath(b sink.Batch) string {
	return path.Join(b.Table, PartitionKey+"="+b.Day.UTC().Format(time.DateOnly), b.ID+".parquet")
}
