// Package bench measures syncd's speed and memory. The conversion
// benchmarks here run in-process; the end-to-end scenarios (backfill RSS,
// rate-limited throughput, incremental passes) are in bench/e2e. Results and
// the commands that produced them: bench/RESULTS.md.
package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/marcboeker/go-duckdb" // the anchor: DuckDB's own JSON -> Parquet

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
)

const (
	benchKey  = "sk_bench_KEY"
	pageSize  = 150
	batchRows = 15_000 // one batch: 100 full pages
)

// corpus is one form's metadata and batchRows submissions as the simulator
// serves them: the raw JSON pages, exactly what syncd reads off the wire.
type corpus struct {
	form      *forms.Form
	pages     [][]byte
	questions int
}

// loadCorpus fetches the pages of the wide form (every documented question
// type) or of the narrowest simulated form over loopback HTTP.
func loadCorpus(tb testing.TB, wide bool) corpus {
	tb.Helper()
	end := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	sim, err := formsim.New(formsim.Config{APIKey: benchKey, Seed: 1, Forms: 8, Submissions: batchRows,
		Start: end.AddDate(0, 0, -30), End: end, Now: func() time.Time { return end }})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer func() { srv.Close(); _ = sim.Close() }()
	get := func(path string) []byte {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+formsim.BasePath+path, nil)
		req.Header.Set("Authorization", "Bearer "+benchKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return body
	}
	// Form 0 is the wide one; of the others take the one with fewest questions.
	var c corpus
	for i, id := range sim.FormIDs() {
		f := new(forms.Form)
		if err := json.Unmarshal(get("/forms/"+id), f); err != nil {
			tb.Fatal(err)
		}
		if (wide && i == 0) || (!wide && i > 0 && (c.form == nil || len(f.Questions) < c.questions)) {
			c.form, c.questions = f, len(f.Questions)
		}
	}
	for off := 0; off < batchRows; off += pageSize {
		c.pages = append(c.pages, get(fmt.Sprintf("/forms/%s/submissions?limit=%d&offset=%d&sort=asc", c.form.ID, pageSize, off)))
	}
	return c
}

// BenchmarkConvert is syncd's path from JSON pages to a committed Parquet
// file: decode, map to the pinned schema, build the Arrow record, encode
// (zstd, the default), fsync and rename into place.
//
//	go test ./bench -run '^$' -bench Convert -benchtime 10x -cpu 1
func BenchmarkConvert(b *testing.B) {
	for _, wide := range []bool{false, true} {
		c := loadCorpus(b, wide)
		tab, _, err := schema.New(c.form, schema.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, codec := range []parquetsink.Compression{parquetsink.CompressionZstd, parquetsink.CompressionSnappy} {
			name := fmt.Sprintf("%s-%dq-%dcols/%s", map[bool]string{false: "narrow", true: "wide"}[wide], c.questions, len(tab.ArrowSchema().Fields()), codec)
			b.Run(name, func(b *testing.B) {
				out := b.TempDir()
				s, err := parquetsink.New(parquetsink.Options{Root: out, Encode: parquetsink.EncodeOptions{Compression: codec}})
				if err != nil {
					b.Fatal(err)
				}
				var wire int
				for _, p := range c.pages {
					wire += len(p)
				}
				var size int64
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					size = convertOnce(b, c, tab, s, i)
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N*batchRows)/sec, "subs/s")
				b.ReportMetric(float64(size)/batchRows, "parquet-B/sub")
				b.ReportMetric(float64(wire)/batchRows, "json-B/sub")
			})
		}
	}
}

func convertOnce(b *testing.B, c corpus, tab *schema.Table, s *parquetsink.Sink, i int) int64 {
	day := time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)
	batch := sink.Batch{ID: fmt.Sprintf("bench-%06d", i), Stream: c.form.ID, Table: "bench",
		WindowStart: day, WindowEnd: day.Add(24 * time.Hour)}
	lin := schema.Lineage{BatchID: batch.ID, SyncedAt: day}
	bld := schema.NewBuilder(tab.Clone(), memory.DefaultAllocator)
	defer bld.Release()
	for _, body := range c.pages {
		page, err := forms.DecodeSubmissionPage(body)
		if err != nil {
			b.Fatal(err)
		}
		for j := range page.Responses {
			if err := bld.Append(&page.Responses[j], lin); err != nil {
				b.Fatal(err)
			}
		}
	}
	rec, built, _ := bld.Finish()
	defer rec.Release()
	batch.SchemaFingerprint = built.Fingerprint()
	n, err := s.Commit(context.Background(), batch, sink.Whole(rec))
	if err != nil {
		b.Fatal(err)
	}
	if rec.NumRows() != batchRows {
		b.Fatalf("%d rows, want %d", rec.NumRows(), batchRows)
	}
	return n
}

// BenchmarkDuckDB is the anchor: DuckDB converting the same JSON pages to
// Parquet, one row per submission, with its own schema inference (answers
// stay a list of structs with a JSON value: less typing work than syncd's
// column per question).
//
//	go test ./bench -run '^$' -bench DuckDB -benchtime 10x
func BenchmarkDuckDB(b *testing.B) {
	for _, wide := range []bool{false, true} {
		c := loadCorpus(b, wide)
		in := b.TempDir()
		for i, p := range c.pages {
			if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("page-%04d.json", i)), p, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		for _, threads := range []int{1, 2} {
			name := fmt.Sprintf("%s-%dq/threads=%d/zstd", map[bool]string{false: "narrow", true: "wide"}[wide], c.questions, threads)
			b.Run(name, func(b *testing.B) {
				db, err := sql.Open("duckdb", "")
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				db.SetMaxOpenConns(1)
				if _, err := db.Exec(fmt.Sprintf("SET threads = %d", threads)); err != nil {
					b.Fatal(err)
				}
				out := b.TempDir()
				glob := strings.ReplaceAll(filepath.Join(in, "*.json"), "'", "''")
				var size int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dst := filepath.Join(out, fmt.Sprintf("out-%d.parquet", i))
					q := fmt.Sprintf(`COPY (SELECT unnest(r) FROM (SELECT unnest(responses) AS r FROM read_json('%s', maximum_object_size = 67108864)))
						TO '%s' (FORMAT parquet, COMPRESSION zstd)`, glob, dst)
					if _, err := db.Exec(q); err != nil {
						b.Fatal(err)
					}
					fi, err := os.Stat(dst)
					if err != nil {
						b.Fatal(err)
					}
					size = fi.Size()
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N*batchRows)/sec, "subs/s")
				b.ReportMetric(float64(size)/batchRows, "parquet-B/sub")
			})
		}
	}
}

// TestDuckDBAnchorCountsEveryRow keeps the anchor honest: DuckDB's query
// yields one row per submission, the same rows syncd converts.
func TestDuckDBAnchorCountsEveryRow(t *testing.T) {
	c := loadCorpus(t, false)
	in := t.TempDir()
	for i, p := range c.pages[:3] {
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("page-%04d.json", i)), p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	q := fmt.Sprintf(`SELECT count(DISTINCT submissionId) FROM (SELECT unnest(r) FROM (SELECT unnest(responses) AS r FROM read_json('%s')))`,
		filepath.Join(in, "*.json"))
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3*pageSize {
		t.Errorf("DuckDB saw %d submissions in 3 pages, want %d", n, 3*pageSize)
	}
}
