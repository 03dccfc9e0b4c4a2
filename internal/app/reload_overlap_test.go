package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// A reload that changes an account must not start a pass of a stream
// while the replaced account's pass of that same stream is still running
// ("never two passes of one form at once").
func TestReloadNeverRunsAStreamTwiceAtOnce(t *testing.T) {
	var target atomic.Pointer[string]
	var inflight, overlap atomic.Int32
	open := make(chan struct{})
	var openOnce sync.Once
	unblock := func() { openOnce.Do(func() { close(open) }) }
	first := make(chan struct{}, 1)
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 31, Forms: 2, Submissions: 20}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f := target.Load(); f != nil && strings.HasSuffix(r.URL.Path, "/forms/"+*f+"/submissions") {
				if inflight.Add(1) > 1 {
					overlap.Add(1)
				}
				defer inflight.Add(-1)
				select {
				case first <- struct{}{}:
					<-open // the first pass of the form is held here
				default:
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	t.Cleanup(unblock)
	ids := sim.FormIDs()
	target.Store(&ids[0])
	dir := t.TempDir()
	cfg := accountsConfig(t, dir, sim.BaseURL, "  schedule: \"@every 1h\"\n  jitter: 0s\n", fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", forms: [{id: %s}]}
`, ids[0]))
	cfg.Server.Addr = "127.0.0.1:0"
	next := accountsConfig(t, dir, sim.BaseURL, "  schedule: \"@every 1h\"\n  jitter: 0s\n", fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", forms: [{id: %s}, {id: %s}]}
`, ids[0], ids[1]))
	next.Server.Addr = "127.0.0.1:0"
	h := runReloading(t, cfg, next)
	select {
	case <-first:
	case <-time.After(reloadWait):
		t.Fatal("the first pass never listed the form's submissions")
	}
	h.hangup <- struct{}{} // add a form to account acme: the account is opened again
	h.waitLogs(t, "configuration reloaded", 1)
	deadline := time.Now().Add(5 * time.Second)
	for overlap.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	unblock()
	if n := overlap.Load(); n > 0 {
		t.Errorf("form %s: %d request(s) of a second pass ran while the first pass of the same form was still running", ids[0], n)
	}
	// Both passes have reported.
	deadline = time.Now().Add(reloadWait)
	for h.logs.FilterMessage("form synced").Len()+h.logs.FilterMessage("form sync failed").Len()+h.logs.FilterMessage("pass skipped: the previous pass of this stream is still running").Len() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, e := range h.logs.All() {
		if strings.HasPrefix(e.Message, "form sync") {
			t.Logf("%s %v", e.Message, e.ContextMap())
		}
	}
	acct := h.a.Account("acme")
	st, err := h.a.Store.Get(context.Background(), streamOf(t, acct, acct.Job(ids[0])).Key())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(sim.ExpectedIDs(ids[0]))); st.Rows != want {
		t.Errorf("the state counts %d rows of form %s, want %d", st.Rows, ids[0], want)
	}
	d := testkit.OpenDuck(t)
	testkit.CheckExactlyOnce(t, d.IDCounts(t, dir+"/out/account=acme", streamOf(t, acct, acct.Job(ids[0])).Table()), sim.ExpectedIDs(ids[0]))
	t.Logf("skipped log lines: %d", h.logs.FilterMessage("pass skipped: the previous pass of this stream is still running").Len())
}
