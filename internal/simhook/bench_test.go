package simhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkDeliveryLatency measures the simulator's own share of a
// webhook's latency: from Send to the loopback receiver holding the body,
// without faults. It reports p50 and p99 in microseconds.
func BenchmarkDeliveryLatency(b *testing.B) {
	got := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- time.Now()
	}))
	defer srv.Close()
	d, err := New(1, 0, Faults{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	body := []byte(`{"formId":"f","formName":"n","submission":{"submissionId":"s"}}`)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		d.Send(Message{URL: srv.URL, Body: body})
		lat = append(lat, (<-got).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
