package app

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestReloadExcludingAFailingFormClearsReadiness: a reload that excludes a
// failing form stops syncing it, so the form no longer keeps /readyz
// failing, and its series go ("the series of an account or stream that a
// reload removes are dropped").
func TestReloadExcludingAFailingFormClearsReadiness(t *testing.T) {
	var failing atomic.Pointer[string]
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 32, Forms: 2, Submissions: 5}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f := failing.Load(); f != nil && strings.Contains(r.URL.Path, "/forms/"+*f+"/") {
				http.Error(w, `{"message":"bad request"}`, http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	ids := sim.FormIDs()
	failing.Store(&ids[1])
	dir := t.TempDir()
	sync := "  schedule: \"@every 1h\"\n  jitter: 0s\n"
	cfg := accountsConfig(t, dir, sim.BaseURL, sync, `  - {name: acme, api_key: "${KEY}"}
`)
	cfg.Server.Addr = "127.0.0.1:0"
	next := accountsConfig(t, dir, sim.BaseURL, sync, fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", exclude: [%s]}
`, ids[1]))
	next.Server.Addr = "127.0.0.1:0"
	h := runReloading(t, cfg, next)
	h.waitLogs(t, "form sync failed", 1)
	if what, _ := h.a.Metrics.Unready(0); what == "" {
		t.Fatal("setup: the failing form is not reported")
	}
	h.hangup <- struct{}{}
	h.waitLogs(t, "configuration reloaded", 1)
	h.waitLogs(t, "form synced", 2) // the reloaded account's first pass, of ids[0]
	// The excluded form goes once that pass has been reported.
	deadline := time.Now().Add(reloadWait)
	for {
		what, lastErr := h.a.Metrics.Unready(0)
		if what == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a reload excluded form %s, /readyz still fails on: %s: %s", ids[1], what, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mfs, err := h.a.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "syncd_pass_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && strings.HasSuffix(l.GetValue(), ids[1]) {
					t.Errorf("the excluded form's series syncd_pass_failures_total{stream=%q} is still served", l.GetValue())
				}
			}
		}
	}
}
