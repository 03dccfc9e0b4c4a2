package schema

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/marcboeker/go-duckdb"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// writeParquet builds subs over tab with the real Builder (naming its
// columns through names, if set), encodes them with
// parquetsink.EncodeRecords into root/form_f1/submission_date=2024-02-01/b1.parquet,
// and returns root and the final table.
func writeParquet(t *testing.T, tab *Table, names *Names, subs ...*forms.Submission) (string, *Table, Stats) {
	t.Helper()
	b := NewBuilder(tab, memory.NewGoAllocator())
	defer b.Release()
	if names != nil {
		b.ShareNames(names)
	}
	for _, s := range subs {
		if err := b.Append(s, testLin); err != nil {
			t.Fatal(err)
		}
	}
	rec, out, st := b.Finish()
	defer rec.Release()
	root := t.TempDir()
	dir := filepath.Join(root, "form_f1", "submission_date=2024-02-01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "b1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs := sink.Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}
	batch := sink.Batch{ID: "b1", Stream: "f1", Table: "form_f1", WindowStart: testTime, WindowEnd: testTime.Add(time.Hour), SchemaFingerprint: out.Fingerprint(), TimeColumn: ColSubmissionTime}
	if _, err := parquetsink.EncodeRecords(f, recs, batch, nil, parquetsink.EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	return root, out, st
}

func scanOf(root string) string {
	return fmt.Sprintf("read_parquet('%s', hive_partitioning = true, union_by_name = true)", filepath.Join(root, "form_f1", "**", "*.parquet"))
}

func openDuck(t *testing.T) *sql.DB {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A question whose name folds to a partition folder's key gets another
// column name: a reader's hive_partitioning would give that column the
// folder's value, replacing the answers.
func TestQuestionNamedLikeAPartitionKey(t *testing.T) {
	for _, name := range []string{"Submission date", "submission_month", "Version date", "version month"} {
		tab := mustNew(t, form(q("q1", name, "ShortAnswer")))
		col := tab.Sources[0].Column
		if slices.Contains(partitionKeys, col) {
			t.Fatalf("question %q has column %s, a partition key", name, col)
		}
		root, _, _ := writeParquet(t, tab, nil, sub("s1", ans("q1", "ShortAnswer", `"my answer"`)))
		var got string
		if err := openDuck(t).QueryRow("SELECT " + col + " FROM " + scanOf(root)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "my answer" {
			t.Errorf("question %q: column %s reads back as %q", name, col, got)
		}
	}
	// The keys are the sink's: its layouts' folders.
	for _, l := range []parquetsink.Layout{parquetsink.LayoutDay, parquetsink.LayoutMonth} {
		for _, timeCol := range []string{ColSubmissionTime, "_version_time"} {
			key, _, _ := strings.Cut(l.Dir(parquetsink.Prefix(timeCol), "x"), "=")
			if !slices.Contains(partitionKeys, key) {
				t.Errorf("partition key %s (layout %s, time column %s) is not reserved", key, l, timeCol)
			}
		}
	}
}

// A number a column would hold as another number is kept, as written, in
// its __v_json companion; read back by DuckDB, every value is the one sent.
func TestNumbersReadBackAsSent(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Amount", "NumberInput"), q("q2", "Score", "OpinionScale")))
	sent := []struct{ amount, score string }{
		{`9007199254740993`, `9007199254740993.0`},
		{`12345678901234567890`, `12345678901234567.5`},
		{`1e-400`, `4.0000000000000001`},
		{`0.1`, `7`},
	}
	var subs []*forms.Submission
	for i, v := range sent {
		subs = append(subs, sub(fmt.Sprintf("s%d", i), ans("q1", "NumberInput", v.amount), ans("q2", "OpinionScale", v.score)))
	}
	root, _, _ := writeParquet(t, tab, nil, subs...)
	rows, err := openDuck(t).Query(`SELECT submission_id,
		coalesce(amount::VARCHAR, amount__v_json), coalesce(CAST(score AS VARCHAR), score__v_json)
		FROM ` + scanOf(root) + " ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := [][2]string{
		{"9007199254740993", "9007199254740993"}, // whole: typed exactly
		{"12345678901234567890", "12345678901234567.5"},
		{"1e-400", "4.0000000000000001"},
		{"0.1", "7"},
	}
	i := 0
	for ; rows.Next(); i++ {
		var id, amount, score string
		if err := rows.Scan(&id, &amount, &score); err != nil {
			t.Fatal(err)
		}
		if amount != want[i][0] || score != want[i][1] {
			t.Errorf("%s: read back amount %s, score %s; sent %s, %s", id, amount, score, sent[i].amount, sent[i].score)
		}
	}
	if err := rows.Err(); err != nil || i != len(want) {
		t.Fatalf("read %d rows: %v", i, err)
	}
}

// -0 next to 0 in a double column keeps its sign.
func TestNegativeZeroReadsBack(t *testing.T) {
	tab := mustNew(t, form(q("q1", "N", "NumberInput")))
	var subs []*forms.Submission
	for i := range 300 {
		v := `0`
		if i%2 == 1 {
			v = `-0`
		}
		subs = append(subs, sub(fmt.Sprintf("s%03d", i), ans("q1", "NumberInput", v)))
	}
	root, _, _ := writeParquet(t, tab, nil, subs...)
	var neg int
	if err := openDuck(t).QueryRow("SELECT count(*) FROM " + scanOf(root) + " WHERE signbit(n)").Scan(&neg); err != nil {
		t.Fatal(err)
	}
	if neg != 150 {
		t.Errorf("%d of 150 -0 answers read back with their sign", neg)
	}
}

// NUL in a string answer reads back.
func TestNULInAStringReadsBack(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Text", "ShortAnswer")))
	root, _, _ := writeParquet(t, tab, nil, sub("s1", ans("q1", "ShortAnswer", `"a\u0000b"`)))
	var got string
	if err := openDuck(t).QueryRow("SELECT text FROM " + scanOf(root)).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "a\x00b" {
		t.Errorf("got %q", got)
	}
}

// Two windows of a pass (a backfill's concurrency) build on copies of one
// table; each meets a different question that the metadata does not list,
// both named "Email". Sharing the pass's Names, they give the two columns
// different names, so that each batch's file holds each question under
// the name the merged table gives it.
func TestConcurrentWindowsNameNewQuestionsApart(t *testing.T) {
	tab := mustNew(t, form(q("qB", "Email", "EmailInput")))
	names := NewNames(tab)
	s1 := sub("s1", forms.Answer{ID: "qA", Name: "Email", Type: "ShortAnswer", Value: []byte(`"answer of qA"`)})
	s2 := sub("s2", forms.Answer{ID: "qC", Name: "Email", Type: "ShortAnswer", Value: []byte(`"answer of qC"`)},
		forms.Answer{ID: "qA", Name: "Email", Type: "ShortAnswer", Value: []byte(`"qA again"`)})
	root1, built1, _ := writeParquet(t, tab, names, s1)
	root2, built2, _ := writeParquet(t, tab, names, s2)
	pin := tab.Merge(built1).Merge(built2)
	byID := map[string]string{}
	for _, s := range pin.Sources {
		byID[s.ID] = s.Column
	}
	if byID["qA"] == byID["qC"] || byID["qA"] == "" || byID["qC"] == "" {
		t.Fatalf("pinned columns %v", byID)
	}
	dst := filepath.Join(root1, "form_f1", "submission_date=2024-02-02")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root2, "form_f1", "submission_date=2024-02-01", "b1.parquet"), filepath.Join(dst, "b2.parquet")); err != nil {
		t.Fatal(err)
	}
	rows, err := openDuck(t).Query(fmt.Sprintf("SELECT submission_id, %s, %s FROM %s ORDER BY 1", byID["qA"], byID["qC"], scanOf(root1)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][2]sql.NullString{}
	for rows.Next() {
		var id string
		var a, c sql.NullString
		if err := rows.Scan(&id, &a, &c); err != nil {
			t.Fatal(err)
		}
		got[id] = [2]sql.NullString{a, c}
	}
	if g := got["s1"]; g[0].String != "answer of qA" || g[1].Valid {
		t.Errorf("s1: qA %v, qC %v", g[0], g[1])
	}
	if g := got["s2"]; g[0].String != "qA again" || g[1].String != "answer of qC" {
		t.Errorf("s2: qA %v, qC %v", g[0], g[1])
	}
}
