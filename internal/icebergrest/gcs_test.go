package icebergrest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs" // gs:// for the warehouse
	"github.com/apache/iceberg-go/table"

	"github.com/syncd-dev/syncd/internal/testkit/fakegcs"
)

// TestGCSWarehouse: a gs:// warehouse (fake-gcs-server on loopback). The
// fake writes metadata through iceberg-go's io with Options.IOProps and
// vends the same properties to the client as the tables' config, as a real
// catalog vends storage settings.
func TestGCSWarehouse(t *testing.T) {
	ctx := context.Background()
	gcs := fakegcs.Start(t)
	gcs.CreateBucket(t, "lake")
	ioProps := iceberg.Properties{
		icebergio.GCSEndpoint: fmt.Sprintf("http://%s/", gcs.Host),
		icebergio.GCSNoAuth:   "true",
	}
	s := start(t, func(o *Options) {
		o.Warehouse = "gs://lake/wh"
		o.IOProps = ioProps
		o.TableConfig = ioProps
	})
	cat := open(t, s, nil)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, cat, ident, nil)
	tbl, err := appendRows(ctx, t, tbl, row{1, "a", jan})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	loc, _ := s.MetadataLocation(ident...)
	if !strings.HasPrefix(loc, "gs://lake/wh/ns/t/metadata/00001-") {
		t.Errorf("metadata location = %s", loc)
	}
	if b := gcs.Object(t, "lake", strings.TrimPrefix(loc, "gs://lake/")); !strings.Contains(string(b), `"current-snapshot-id"`) {
		t.Errorf("metadata object: %.200s", b)
	}
	loaded, err := open(t, s, nil).LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, loaded); fmt.Sprint(got) != "[1:a:2026-01-15T10:00:00Z]" {
		t.Errorf("rows = %v", got)
	}
}
