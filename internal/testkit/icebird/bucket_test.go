package icebird_test

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs" // gs:// table IO
	_ "github.com/apache/iceberg-go/io/gocloud/s3"  // s3:// table IO
	"github.com/apache/iceberg-go/table"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/testkit/icebird"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
	"github.com/syncd-dev/syncd/internal/testkit/s3srv"
)

// TestReadsBucketWarehouses writes a table with iceberg-go into a bucket
// warehouse on a local server and reads it with icebird through a Bucket
// source. Azure (abfs://) is left out: iceberg-go builds the account's
// URL as <protocol>://<account>.<adls.endpoint>, a host name that does not
// resolve to Azurite on loopback; TestBucketSourceOnAzurite reads from
// Azurite instead.
func TestReadsBucketWarehouses(t *testing.T) {
	for _, scheme := range []string{"s3", "gs"} {
		t.Run(scheme, func(t *testing.T) {
			lake := lakes.Start(t, scheme)
			props := iceberg.Properties{"warehouse": scheme + "://" + lakes.BucketName + "/wh"}
			switch scheme {
			case "s3":
				u, err := url.Parse(lake.URL(""))
				if err != nil {
					t.Fatal(err)
				}
				props["s3.endpoint"] = u.Query().Get("endpoint")
				props["s3.access-key-id"] = s3srv.AccessKey
				props["s3.secret-access-key"] = s3srv.SecretKey
				props["s3.region"] = s3srv.Region
				props["s3.force-virtual-addressing"] = "false"
			case "gs":
				// STORAGE_EMULATOR_HOST (set by lakes.Start) points the
				// client at fake-gcs-server; no credentials.
				props["gcs.no-auth"] = "true"
			}
			w := newWarehouse(t, props)
			tbl := w.create(t, "upserted", nil, nil)
			tbl = appendRows(t, tbl, jan1, jan2, feb3, nul4)
			tbl = upsert(t, tbl, []int64{2}, feb5)

			got := icebird.Read(t, tbl.MetadataLocation(), icebird.Bucket(scheme+"://"+lakes.BucketName, lake.Open(t))).SortBy("id")
			if !strings.HasPrefix(tbl.MetadataLocation(), scheme+"://"+lakes.BucketName+"/wh/") {
				t.Errorf("metadata at %s, not in the bucket", tbl.MetadataLocation())
			}
			if w := want(jan1, feb3, nul4, feb5); !reflect.DeepEqual(got.Rows, w) {
				t.Errorf("rows:\n got %v\nwant %v", got.Rows, w)
			}
			if len(got.DataFiles) != 2 || len(got.DeleteFiles) != 1 {
				t.Errorf("%d data files, %d delete files; want 2 and 1", len(got.DataFiles), len(got.DeleteFiles))
			}
		})
	}
}

// TestBucketSourceOnAzurite serves a table from an Azure container: written
// locally (see TestReadsBucketWarehouses for why), copied into Azurite, and
// read with its file:// locations mapped to the container's keys.
func TestBucketSourceOnAzurite(t *testing.T) {
	ctx := context.Background()
	lake := lakes.Start(t, "azblob")
	w := newWarehouse(t, nil)
	tbl := w.create(t, "mor", nil, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
	tbl = appendRows(t, tbl, jan1, jan2, feb3, nul4)
	tbl, err := tbl.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(1)), nil)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	b := lake.Open(t)
	err = filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.dir, p)
		return b.WriteAll(ctx, "copy/"+filepath.ToSlash(rel), raw, nil)
	})
	if err != nil {
		t.Fatalf("copy the warehouse into azurite: %v", err)
	}
	got := icebird.Read(t, tbl.MetadataLocation(), icebird.Bucket("file://"+w.dir, blob.PrefixedBucket(b, "copy/"))).SortBy("id")
	if w := want(jan2, feb3, nul4); !reflect.DeepEqual(got.Rows, w) {
		t.Errorf("rows:\n got %v\nwant %v", got.Rows, w)
	}
	if len(got.DataFiles) != 1 || len(got.DeleteFiles) != 1 || got.DeleteFiles[0].Content != icebird.PositionDeletes {
		t.Errorf("files: %+v, deletes %+v; want 1 data file and 1 position delete file", got.DataFiles, got.DeleteFiles)
	}
}
