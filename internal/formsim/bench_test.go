package formsim

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkServePages measures how fast the simulator serves full pages
// (limit=150, sort=asc) over real loopback HTTP to one client, the way
// syncd pages a window. Reports pages/s and submissions/s; the wide form
// asks every documented question type.
//
//	go test ./internal/formsim -run '^$' -bench ServePages -benchtime 2000x
func BenchmarkServePages(b *testing.B) {
	for _, tc := range []struct {
		name string
		form int
	}{{"wide", 0}, {"narrow", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			s := start(b, testConfig(1, 2, 200_000))
			formID := s.FormIDs()[tc.form]
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			pages := 200_000 / 150
			var bytes int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				u := fmt.Sprintf("%s/forms/%s/submissions?limit=150&sort=asc&offset=%d", s.base, formID, (i%pages)*150)
				req, _ := http.NewRequest(http.MethodGet, u, nil)
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
				bytes += n
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "pages/s")
			b.ReportMetric(float64(b.N*150)/sec, "submissions/s")
			b.ReportMetric(float64(bytes)/float64(b.N*150), "bytes/submission")
		})
	}
}

// BenchmarkAccountMemory measures the heap a simulated account of one
// million submissions per form holds once built.
//
//	go test ./internal/formsim -run '^$' -bench AccountMemory -benchtime 1x
func BenchmarkAccountMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := New(testConfig(1, 3, 1_000_000))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heapMB/3M-submissions")
		runtime.KeepAlive(s)
		_ = s.Close()
	}
}
