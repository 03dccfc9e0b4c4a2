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
	db := openDuck(t)
	defer db.Close()
	var n int64
	q := fmt.Sprintf("SELECT count(*) FROM read_parquet(%s)", localList(t, files))
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("duckdb %s: %v", q, err)
	}
	return n
}

// localList is files as DuckDB's list of local paths.
func localList(t testing.TB, files []File) string {
	t.Helper()
	paths := make([]string, 0, len(files))
	for _, f := range files {
		p, err := LocalPath(f.Path)
		if err != nil {
			t.Fatalf("duckdb: %v", err)
		}
		paths = append(paths, "'"+strings.ReplaceAll(p, "'", "''")+"'")
	}
	return "[" + strings.Join(paths, ", ") + "]"
}

func openDuck(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	return db
}

// DuckVersions reads the identity of every row of files (local ones) with
// DuckDB's read_parquet: "key@µs del=bool" of key, version and deleted
// columns, counted. A second reader's view of a table whose files carry
// no deletes (a versions table), to compare with icebird's rows.
func DuckVersions(t testing.TB, files []File, key, version, deleted string) map[string]int {
	t.Helper()
	out := map[string]int{}
	if len(files) == 0 {
		return out
	}
	db := openDuck(t)
	defer db.Close()
	q := fmt.Sprintf(`SELECT %q, epoch_us(%q), coalesce(%q, false) FROM read_parquet(%s, union_by_name = true)`, key, version, deleted, localList(t, files))
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("duckdb %s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var us int64
		var del bool
		if err := rows.Scan(&k, &us, &del); err != nil {
			t.Fatalf("duckdb: %v", err)
		}
		out[fmt.Sprintf("%s@%d del=%v", k, us, del)]++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("duckdb: %v", err)
	}
	return out
}
