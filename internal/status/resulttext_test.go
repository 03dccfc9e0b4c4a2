package status

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
)

// TestWriteResults: a pass's text names each stream once, spells its
// counts with their noun and ends with the totals.
func TestWriteResults(t *testing.T) {
	end := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	results := []poller.Result{
		{Source: poller.SourceForms, Stream: "vLp2aX", Table: "form_a", Rows: 1, Batches: 1, Requests: 2, Duration: 1500 * time.Millisecond, CoveredEnd: end},
		{Source: poller.SourceForms, Stream: "8fKq2m", Table: "form_b", Err: errors.New("8fKq2m: fetch page: 503")},
		{Source: poller.SourceForms, Account: "acme"},
	}
	results[2].Err = errors.New("list forms: 401")
	var b strings.Builder
	WriteResults(&b, results, 2*time.Second, false)
	want := "ok   vLp2aX -> form_a: 1 row in 1 batch, 2 requests, 1.5s, synced up to 2026-11-30T12:00:00Z\n" +
		"FAIL 8fKq2m: fetch page: 503\n" +
		"FAIL forms of account acme (listing its forms): list forms: 401\n" +
		"2 forms, 2 failed, 1 row, 2s\n"
	if b.String() != want {
		t.Errorf("WriteResults:\n%s\nwant:\n%s", b.String(), want)
	}
}
