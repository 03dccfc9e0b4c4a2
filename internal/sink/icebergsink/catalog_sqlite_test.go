package icebergsink_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
)

// TestSQLiteCatalogConcurrentWriters: the embedded catalog is written by
// several goroutines at once (sync.concurrency forms creating and
// committing their tables). iceberg-go's write transactions read, then
// write: begun deferred, two of them in WAL mode fail at once with
// SQLITE_BUSY ("database is locked"), whatever the busy timeout, once the
// library's three quick retries are spent. Begun immediate they wait for
// each other within the busy timeout.
func TestSQLiteCatalogConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := icebergsink.OpenCatalog(ctx, icebergsink.CatalogConfig{
		Type: icebergsink.CatalogSQLite, URI: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.CreateNamespace(ctx, []string{"acme"}, nil); err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.String, Required: true})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tbl, err := cat.CreateTable(ctx, []string{"acme", fmt.Sprintf("t%d", g)}, schema)
			if err != nil {
				errs <- fmt.Errorf("create t%d: %w", g, err)
				return
			}
			for i := range 6 {
				tx := tbl.NewTransaction()
				if err := tx.SetProperties(iceberg.Properties{"n": fmt.Sprint(i)}); err != nil {
					errs <- err
					return
				}
				if tbl, err = tx.Commit(ctx); err != nil {
					errs <- fmt.Errorf("commit %d of t%d: %w", i, g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
