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

// TestSQLiteCatalogConcurrentCreates: streams of one process create their
// tables at once through the embedded catalog (two connections' deferred
// transactions failed with SQLITE_BUSY at once, whatever the busy
// timeout, in the bench's reader and accounts scenarios).
func TestSQLiteCatalogConcurrentCreates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := icebergsink.OpenCatalog(ctx, icebergsink.CatalogConfig{Type: icebergsink.CatalogSQLite,
		URI: filepath.Join(dir, "state", "iceberg-catalog.db"), Warehouse: filepath.Join(dir, "lake")})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.CreateNamespace(ctx, []string{"syncd"}, nil); err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.String, Required: true})
	const n = 48
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = cat.CreateTable(ctx, []string{"syncd", fmt.Sprintf("t%02d", i)}, schema)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create table t%02d: %v", i, err)
		}
	}
	var names int
	for _, err := range cat.ListTables(ctx, []string{"syncd"}) {
		if err != nil {
			t.Fatal(err)
		}
		names++
	}
	if names != n {
		t.Errorf("%d tables listed, want %d", names, n)
	}
}
