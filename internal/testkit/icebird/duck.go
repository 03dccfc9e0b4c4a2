package icebird

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" driver
)

// DuckCount counts the rows of files (local ones: file:// or absolute
// paths) with DuckDB's read_parquet, a second reader of the Parquet files
// icebird lists. It reads the files as they are: deletes are not applied,
// so for DataFiles it is the rows before deletes, the sum of their
// RecordCount when the manifests are right.
func DuckCount(t testing.TB, files []File) int64 {
	t.Helper()
	if len(files) == 0 {
		return 0
	}
	var paths []string
	for _, f := range files {
		p, err := LocalPath(f.Path)
		if err != nil {
			t.Fatalf("duckdb: %v", err)
		}
		paths = append(paths, "'"+strings.ReplaceAll(p, "'", "''")+"'")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	defer db.Close()
	var n int64
	q := fmt.Sprintf("SELECT count(*) FROM read_parquet([%s])", strings.Join(paths, ", "))
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("duckdb %s: %v", q, err)
	}
	return n
}
