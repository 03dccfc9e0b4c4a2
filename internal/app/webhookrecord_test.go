package app

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
)

// TestWebhooksRecordBytes: the record is written as it always was, one
// key per source (the forms by form, the bookings' one registration), and
// reads back the same.
func TestWebhooksRecordBytes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	// The record as the state holds it since webhooks were first recorded.
	const stored = `{"forms":{"f1":{"id":"11","url":"aa","registered":"2026-01-02T03:04:05.000000006Z"},"id":{"id":"12","url":"bb","registered":"2026-01-02T03:04:05.000000006Z"}},"scheduling":{"id":"u-1","url":"cc","registered":"2026-01-02T03:04:05.000000006Z"}}`
	var w Webhooks
	if err := json.Unmarshal([]byte(stored), &w); err != nil {
		t.Fatal(err)
	}
	if got := w.Streams[poller.SourceForms]; len(got) != 2 || got["f1"].ID != "11" || got["id"].ID != "12" || !got["f1"].Registered.Equal(at) {
		t.Fatalf("the forms read %+v", got)
	}
	if got, ok := w.recorded("scheduling", ""); !ok || got.ID != "u-1" || got.URL != "cc" {
		t.Fatalf("the bookings read %+v", got)
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != stored {
		t.Errorf("written as\n%s\nwant\n%s", b, stored)
	}
	w.forget(poller.SourceForms, "f1")
	w.forget(poller.SourceForms, "id")
	if b, _ = json.Marshal(w); string(b) != `{"scheduling":{"id":"u-1","url":"cc","registered":"2026-01-02T03:04:05.000000006Z"}}` {
		t.Errorf("without forms, written as %s", b)
	}
	w.forget("scheduling", "")
	if !w.empty() {
		t.Errorf("nothing left, yet not empty: %+v", w)
	}
}
