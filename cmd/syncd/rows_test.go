package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/parquetrows"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestRowsReadsWhatDuckDBReads: `syncd rows` prints a table's first rows
// in the order of its partition folders, with the columns of every file
// (a column a later file added is null in the earlier rows), the total of
// every file, and skips hidden files; DuckDB writes the files and reads
// them back as the independent reader.
func TestRowsReadsWhatDuckDBReads(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	duck := testkit.OpenDuck(t)
	write := func(rel, query string) {
		t.Helper()
		p := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := duck.DB.Exec(fmt.Sprintf("COPY (%s) TO '%s' (FORMAT parquet)", query, p)); err != nil {
			t.Fatal(err)
		}
	}
	// Two partitions of form_abc: the second has a column the first lacks.
	write("form_abc/submission_date=2024-01-01/b1.parquet",
		"SELECT 's' || i AS submission_id, to_timestamp(1704067200 + i * 60) AS submission_time, "+
			"'line\tone\n' || i AS answer FROM range(3) t(i)")
	write("form_abc/submission_date=2024-01-02/b2.parquet",
		"SELECT 't' || i AS submission_id, to_timestamp(1704153600 + i * 60) AS submission_time, "+
			"'x' AS answer, (i * 1.5)::DOUBLE AS score FROM range(4) t(i)")
	// A commit in flight: hidden, never read.
	write("form_abc/submission_date=2024-01-02/.b3.parquet.tmp-1", "SELECT 'hidden' AS submission_id")
	cfg := filepath.Join(dir, "syncd.yaml")
	yaml := "source:\n  api_key: k\nsink:\n  type: parquet\n  parquet:\n    path: " + out + "\nstate:\n  path: " + filepath.Join(dir, "state.db") + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	// The independent reader's rows, file by file in path order.
	var want []map[string]any
	for _, f := range []string{"submission_date=2024-01-01/b1.parquet", "submission_date=2024-01-02/b2.parquet"} {
		rows, err := duck.DB.Query(fmt.Sprintf("SELECT submission_id, epoch_ms(submission_time), answer FROM read_parquet('%s')",
			filepath.Join(out, "form_abc", f)))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, answer string
			var ms int64
			if err := rows.Scan(&id, &ms, &answer); err != nil {
				t.Fatal(err)
			}
			ts := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
			want = append(want, map[string]any{"submission_id": id, "submission_time": ts, "answer": answer})
		}
		rows.Close()
	}

	// A form id finds its table (form_ and the id); -n cuts across files.
	code, stdout, stderr := execute(t, "rows", "--config", cfg, "abc", "-n", "5", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got parquetrows.Table
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if got.Table != "form_abc" || got.Files != 2 || got.TotalRows != 7 {
		t.Errorf("table %q, %d files, %d rows: want form_abc, 2, 7", got.Table, got.Files, got.TotalRows)
	}
	if strings.Join(got.Columns, ",") != "submission_id,submission_time,answer,score" {
		t.Errorf("columns %v", got.Columns)
	}
	if len(got.Rows) != 5 {
		t.Fatalf("%d rows, want 5: %s", len(got.Rows), stdout)
	}
	for i, r := range got.Rows {
		for _, c := range []string{"submission_id", "submission_time", "answer"} {
			if r[c] != want[i][c] {
				t.Errorf("row %d %s = %v, DuckDB reads %v", i, c, r[c], want[i][c])
			}
		}
	}
	if v, ok := got.Rows[0]["score"]; !ok || v != nil {
		t.Errorf("row 0 score = %v (present %v), want null: its file has no such column", v, ok)
	}
	if got.Rows[4]["score"] != 1.5 {
		t.Errorf("row 4 score = %v, want 1.5", got.Rows[4]["score"])
	}

	// The table: one line per row (the tab and newline of a value do not
	// break it), the columns asked for, and the count.
	code, stdout, stderr = execute(t, "rows", "--config", cfg, "form_abc", "-n", "2", "--columns", "answer,submission_id")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ANSWER") || !strings.Contains(lines[1], "line one 0  s0") ||
		lines[3] != "2 of 7 rows of form_abc (2 files under "+filepath.Join(out, "form_abc")+")" {
		t.Errorf("table output:\n%s", stdout)
	}

	// An unknown table names those there are; an unknown column, the columns.
	code, _, stderr = execute(t, "rows", "--config", cfg, "nope")
	if code != exitUsage || !strings.Contains(stderr, "its tables: form_abc") {
		t.Errorf("unknown table: exit %d, %s", code, stderr)
	}
	code, _, stderr = execute(t, "rows", "--config", cfg, "abc", "--columns", "nope")
	if code != exitUsage || !strings.Contains(stderr, "submission_id, submission_time, answer, score") {
		t.Errorf("unknown column: exit %d, %s", code, stderr)
	}
}
