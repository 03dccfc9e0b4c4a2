package metrics

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestEveryMetricDocumented: every syncd_ metric the registry holds is in
// the README's metrics table, with its labels.
func TestEveryMetricDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := New(nil)
	// Touch every metric so that each vector has a series to gather.
	m.ObserveRequest("list_submissions", 429, 2, time.Second, nil)
	m.ObservePass(Pass{Source: "forms", Stream: "f", Rows: 1, Bytes: 1, Batches: 1, Misfits: 1, Discarded: 1, Duration: time.Second, CoveredEnd: time.Now(), Maintained: true})
	m.ObservePass(Pass{Source: "forms", Stream: "g", Err: errors.New("x")})
	m.ObserveSkipped("forms", "f")
	m.ObserveDelivery("forms", "accepted")
	m.ObserveTriggered("", "forms", "f")
	m.ObserveWebhookLatency("forms", time.Second)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "syncd_") {
			continue
		}
		seen++
		row := "| `" + name + "` | " + labelsOf(f) + " |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md: the metrics table has no row %q", row)
		}
	}
	if seen < 18 {
		t.Errorf("gathered %d syncd_ metrics, want every one (18)", seen)
	}
}

func labelsOf(f *dto.MetricFamily) string {
	if len(f.GetMetric()) == 0 {
		return ""
	}
	var names []string
	for _, l := range f.GetMetric()[0].GetLabel() {
		names = append(names, "`"+l.GetName()+"`")
	}
	return strings.Join(names, ", ")
}
