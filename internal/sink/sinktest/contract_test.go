package sinktest_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gbq "cloud.google.com/go/bigquery"
	"gocloud.dev/blob"
	"google.golang.org/api/iterator"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/bigquery"
	"github.com/syncd-dev/syncd/internal/sink/blobsink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/azurite"
	"github.com/syncd-dev/syncd/internal/testkit/fakegcs"
	"github.com/syncd-dev/syncd/internal/testkit/s3srv"
)

// TestSinkContract runs the contract over every backend.
func TestSinkContract(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		sinktest.Run(t, func(t *testing.T) sink.Sink { return newDiskSink(t) })
	})
	testIceberg(t)
	t.Run("gs", func(t *testing.T) {
		f := fakegcs.Start(t)
		t.Setenv("STORAGE_EMULATOR_HOST", f.Host)
		f.CreateBucket(t, "lake")
		n := 0
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			n++
			return openBucket(t, "gs://lake/run"+strconv.Itoa(n))
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3srv.Start(t)
		srv.Setenv(t)
		n := 0
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			n++
			bucket := "lake" + strconv.Itoa(n)
			srv.CreateBucket(t, bucket)
			return openBucket(t, srv.URL(bucket, "out"))
		})
		t.Run("KilledUpload", func(t *testing.T) {
			srv.CreateBucket(t, "killed")
			testKilledUpload(t, srv.URL("killed", "out"))
		})
		t.Run("LateCommit", func(t *testing.T) {
			testLateCommit(t, srv.Addr, func(t *testing.T, i int, proxy string) (string, string) {
				bucket := "late" + strconv.Itoa(i)
				srv.CreateBucket(t, bucket)
				direct := srv.URL(bucket, "out")
				return strings.Replace(direct, url.QueryEscape(srv.Endpoint), url.QueryEscape("http://"+proxy), 1), direct
			})
		})
	})
	t.Run("azblob", func(t *testing.T) {
		srv := azurite.Start(t)
		srv.Setenv(t)
		n := 0
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			n++
			container := "lake" + strconv.Itoa(n)
			srv.CreateContainer(t, container)
			return openBucket(t, srv.URL(container, "out"))
		})
		t.Run("KilledUpload", func(t *testing.T) {
			srv.CreateContainer(t, "killed")
			testKilledUpload(t, srv.URL("killed", "out"))
		})
		t.Run("LateCommit", func(t *testing.T) {
			testLateCommit(t, srv.Addr, func(t *testing.T, i int, proxy string) (string, string) {
				container := "late" + strconv.Itoa(i)
				srv.CreateContainer(t, container)
				via := "azblob://" + container + "/out?" + url.Values{"localemu": {"true"}, "domain": {proxy}, "protocol": {"http"}}.Encode()
				return via, srv.URL(container, "out")
			})
		})
	})
	t.Run("bigquery", func(t *testing.T) {
		fake := bqfake.New(t)
		n := 0
		sinktest.Run(t, func(t *testing.T) sink.Sink {
			// A project per sink: job ids, which name batches, are
			// unique per project forever.
			n++
			project, dataset := "proj"+strconv.Itoa(n), "forms"
			s, err := bigquery.New(context.Background(), bigquery.Options{
				Project: project, Dataset: dataset, ClientOptions: fake.ClientOptions(),
				MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Version: "test",
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return &bqSink{Sink: s, fake: fake, project: project, dataset: dataset}
		})
	})
}

// bqSink reads a table back from the fake's rows, and the latest view
// through the <table>_latest view the sink keeps, run by the fake.
type bqSink struct {
	*bigquery.Sink
	fake             *bqfake.Server
	project, dataset string
}

func (b *bqSink) ReadRows(t *testing.T, table string) []sinktest.Row {
	t.Helper()
	var out []sinktest.Row
	for _, r := range b.fake.Rows(b.project, b.dataset, table) {
		row := sinktest.Row{}
		row.Key, _ = r[sinktest.KeyColumn].(string)
		if v, ok := r[sinktest.VersionColumn].(time.Time); ok {
			row.Version = v.UnixMicro()
		}
		row.Deleted, _ = r["_deleted"].(bool)
		row.BatchID, _ = r["_batch_id"].(string)
		row.Extra, _ = r[sinktest.ExtraColumn].(string)
		out = append(out, row)
	}
	return out
}

func (b *bqSink) Latest(t *testing.T, table string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if _, ok := b.fake.Table(b.project, b.dataset, table+"_latest"); !ok {
		return out
	}
	ctx := context.Background()
	c, err := gbq.NewClient(ctx, b.project, b.fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	it, err := c.Query("SELECT submission_id, last_updated_at FROM `" + b.project + "." + b.dataset + "." + table + "_latest`").Read(ctx)
	if err != nil {
		t.Fatalf("query the latest view of %s: %v", table, err)
	}
	for {
		var row []gbq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[row[0].(string)] = row[1].(time.Time).UnixMicro()
	}
}

// openBucket opens the bucket sink at url, read back by downloading its
// objects.
func openBucket(t *testing.T, url string) sink.Sink {
	t.Helper()
	s, err := blobsink.New(context.Background(), blobsink.Options{URL: url, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &bucketSink{Sink: s, files: duckFiles{root: func(t *testing.T) string { return download(t, s.Bucket()) }}}
}

// newDiskSink opens a disk sink on a fresh folder, read back by DuckDB.
func newDiskSink(t *testing.T) *diskSink {
	root := t.TempDir()
	s, err := parquetsink.New(parquetsink.Options{Root: root, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &diskSink{Sink: s, files: duckFiles{root: func(*testing.T) string { return root }}}
}

type diskSink struct {
	*parquetsink.Sink
	files duckFiles
}

func (d *diskSink) ReadRows(t *testing.T, table string) []sinktest.Row {
	return d.files.ReadRows(t, table)
}
func (d *diskSink) Latest(t *testing.T, table string) map[string]int64 {
	return d.files.Latest(t, table)
}

type bucketSink struct {
	*blobsink.Sink
	files duckFiles
}

func (b *bucketSink) ReadRows(t *testing.T, table string) []sinktest.Row {
	return b.files.ReadRows(t, table)
}
func (b *bucketSink) Latest(t *testing.T, table string) map[string]int64 {
	return b.files.Latest(t, table)
}

// download copies every object of the bucket into a new folder, as a
// warehouse user's reader would see them.
func download(t *testing.T, b *blob.Bucket) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	it := b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatalf("list the bucket: %v", err)
		}
		raw, err := b.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatalf("download %s: %v", obj.Key, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(obj.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// duckFiles reads a table's Parquet files with DuckDB, the independent
// reader.
type duckFiles struct {
	root func(t *testing.T) string
}

func (d duckFiles) ReadRows(t *testing.T, table string) []sinktest.Row {
	t.Helper()
	root := d.root(t)
	if len(testkit.ParquetFiles(t, filepath.Join(root, table))) == 0 {
		return nil
	}
	duck := testkit.OpenDuck(t)
	extra := "NULL"
	if _, ok := duck.Columns(t, root, table)[sinktest.ExtraColumn]; ok {
		extra = sinktest.ExtraColumn
	}
	rows, err := duck.DB.Query(`SELECT submission_id, epoch_us(last_updated_at), coalesce(_deleted, false), _batch_id, ` + extra +
		` FROM ` + testkit.Scan(root, table))
	if err != nil {
		t.Fatalf("read table %s: %v", table, err)
	}
	defer rows.Close()
	var out []sinktest.Row
	for rows.Next() {
		var r sinktest.Row
		var x sql.NullString
		if err := rows.Scan(&r.Key, &r.Version, &r.Deleted, &r.BatchID, &x); err != nil {
			t.Fatal(err)
		}
		r.Extra = x.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (d duckFiles) Latest(t *testing.T, table string) map[string]int64 {
	t.Helper()
	root := d.root(t)
	out := map[string]int64{}
	if len(testkit.ParquetFiles(t, filepath.Join(root, table))) == 0 {
		return out
	}
	duck := testkit.OpenDuck(t)
	rows, err := duck.DB.Query(`SELECT submission_id, epoch_us(last_updated_at) FROM (` +
		sink.LatestQuery(testkit.Scan(root, table), sinktest.KeyColumn, sinktest.VersionColumn) + `)`)
	if err != nil {
		t.Fatalf("latest view of %s: %v", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
