package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/syncd-dev/syncd/internal/poller"
)

// TestReloadMovingAStreamToAnotherEntryKeepsItsCounters: a reload that
// moves a stream from one entry to another (an account that listed no
// forms now lists them: "acme/sync.schedule" becomes "acme/schedule of
// form f1") keeps syncing the stream, so its counters go on from where they
// were, while the series of a stream that no entry syncs any more go.
func TestReloadMovingAStreamToAnotherEntryKeepsItsCounters(t *testing.T) {
	all := Entry{ID: "acme/sync.schedule", Name: "sync.schedule", Version: "1", Schedule: "@every 1s",
		Pass: func(context.Context) []poller.Result {
			return []poller.Result{
				{Account: "acme", Source: "forms", Stream: "f1", Rows: 1},
				{Account: "acme", Source: "forms", Stream: "f2", Rows: 1},
			}
		}}
	h := start(t, []Entry{all})
	f1 := `syncd_rows_written_total{account="acme",source="forms",stream="f1"}`
	f2 := `syncd_rows_written_total{account="acme",source="forms",stream="f2"}`
	eventually(t, "three passes counted", func() bool { return h.scrape(t, f1) >= 3 })
	before := h.scrape(t, f1)

	started, release := make(chan struct{}), make(chan struct{})
	one := Entry{ID: "acme/schedule of form f1", Name: "schedule of form f1", Version: "2", Schedule: "@every 1h",
		Pass: func(context.Context) []poller.Result {
			close(started)
			<-release // a pass takes a while
			return []poller.Result{{Account: "acme", Source: "forms", Stream: "f1", Rows: 1}}
		}}
	h.setReload(func(context.Context) ([]Entry, error) { return []Entry{one}, nil })
	h.hangup(t, "ok")
	recv(t, "the new entry's first pass", started)
	after := h.scrape(t, f1)
	if after < before {
		t.Errorf("%s went from %v to %v on a reload, while the stream is still synced", f1, before, after)
	}

	close(release)
	// Once the new entry's first pass has reported, f2 is synced by no entry.
	eventually(t, "the series of f2, synced no more, dropped", func() bool { return h.scrape(t, f2) == -1 })
	if got := h.scrape(t, f1); got < after+1 {
		t.Errorf("%s is %v after the new entry's first pass, want at least %v", f1, got, after+1)
	}
}

// TestReloadKeepsTheStreamsOfAnAccountWhoseListingFails: while listing an
// account's forms fails, a reload cannot tell which of its streams are
// still synced; it keeps their series, so that their counters do not reset
// once the listing works again.
func TestReloadKeepsTheStreamsOfAnAccountWhoseListingFails(t *testing.T) {
	rows := func(account, stream string) func(context.Context) []poller.Result {
		return func(context.Context) []poller.Result {
			return []poller.Result{{Account: account, Source: "forms", Stream: stream, Rows: 1}}
		}
	}
	acme := Entry{ID: "acme/sync.schedule", Name: "sync.schedule", Version: "1", Schedule: "@every 1h", Pass: rows("acme", "f1")}
	other := Entry{ID: "other/sync.schedule", Name: "sync.schedule", Version: "1", Schedule: "@every 1h", Pass: rows("other", "g1")}
	h := start(t, []Entry{acme, other})
	f1 := `syncd_rows_written_total{account="acme",source="forms",stream="f1"}`
	g1 := `syncd_rows_written_total{account="other",source="forms",stream="g1"}`
	eventually(t, "both first passes counted", func() bool { return h.scrape(t, f1) == 1 && h.scrape(t, g1) == 1 })

	// acme's new key is refused; other is removed.
	acme.Version = "2"
	acme.Pass = func(context.Context) []poller.Result {
		return []poller.Result{{Account: "acme", Source: "forms", Err: errors.New("401 unauthorized")}}
	}
	h.setReload(func(context.Context) ([]Entry, error) { return []Entry{acme}, nil })
	h.hangup(t, "ok")
	// other's series go once acme's new entry has reported its first pass.
	eventually(t, "the removed account's series dropped", func() bool { return h.scrape(t, g1) == -1 })
	if got := h.scrape(t, f1); got != 1 {
		t.Errorf("%s is %v after a reload whose pass could not list acme's forms, want 1", f1, got)
	}
}
