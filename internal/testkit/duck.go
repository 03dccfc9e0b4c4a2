// Package testkit holds what the end-to-end, crash and benchmark suites share:
// an independent reader of the Parquet output (DuckDB) and helpers to build
// and run the syncd binary. Only tests and benchmarks import it, so DuckDB is
// never linked into syncd itself.
package testkit

import (
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" driver
)

// Duck is an in-memory DuckDB connection for reading Parquet output.
type Duck struct{ DB *sql.DB }

// OpenDuck opens DuckDB in memory; the test closes it at cleanup.
func OpenDuck(t testing.TB) *Duck {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return &Duck{DB: db}
}

// Scan is the read_parquet expression over every file of a table under root,
// Hive partitions (of any layout, none included) and evolving schemas
// included.
func Scan(root, table string) string {
	glob := filepath.Join(root, table, "**", "*.parquet")
	return fmt.Sprintf("read_parquet('%s', hive_partitioning = true, union_by_name = true)", strings.ReplaceAll(glob, "'", "''"))
}

// HasFiles reports whether a table has any Parquet file yet.
func HasFiles(root, table string) bool {
	return len(Files(root, table)) > 0
}

// Files lists a table's Parquet files under root, in any layout (in its
// folder, or in partition folders), leaving out hidden ones (a writer's
// temporary files).
func Files(root, table string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(root, table), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && p != filepath.Join(root, table) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".parquet") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// IDCounts returns how many rows each submission id has in a table.
func (d *Duck) IDCounts(t testing.TB, root, table string) map[string]int {
	t.Helper()
	out := map[string]int{}
	if !HasFiles(root, table) {
		return out
	}
	rows, err := d.DB.Query("SELECT submission_id, count(*) FROM " + Scan(root, table) + " GROUP BY 1")
	if err != nil {
		t.Fatalf("read table %s: %v", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Columns returns a table's column names and DuckDB types.
func (d *Duck) Columns(t testing.TB, root, table string) map[string]string {
	t.Helper()
	rows, err := d.DB.Query("DESCRIBE SELECT * FROM " + Scan(root, table))
	if err != nil {
		t.Fatalf("describe table %s: %v", table, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := map[string]string{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprint(vals[0])] = fmt.Sprint(vals[1])
	}
	return out
}

// CheckExactlyOnce compares a table's submission ids with the expected set:
// every expected id exactly once, nothing else. It reports up to a few of
// each kind of difference.
func CheckExactlyOnce(t testing.TB, got map[string]int, want []string) {
	t.Helper()
	wantSet := make(map[string]bool, len(want))
	for _, id := range want {
		wantSet[id] = true
	}
	var missing, dup, extra []string
	for _, id := range want {
		switch n := got[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s×%d", id, n))
		}
	}
	for id := range got {
		if !wantSet[id] {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(dup)+len(extra) > 0 {
		t.Errorf("output differs from the expected %d submissions: %d missing %v, %d duplicated %v, %d unexpected %v",
			len(want), len(missing), head(missing), len(dup), head(dup), len(extra), head(extra))
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// ParquetFiles lists every committed Parquet file under root.
func ParquetFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
