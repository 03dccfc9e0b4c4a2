package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// reloadWait is how long these tests wait for what should happen.
const reloadWait = 20 * time.Second

// bucketConfig is a configuration of accounts on baseURL, in dir, whose
// state lies in the bucket at stateURL, split by account. Its schedule
// runs no pass in a test but the first.
func bucketConfig(t *testing.T, dir, baseURL, stateURL, accounts string) *config.Config {
	t.Helper()
	raw := fmt.Sprintf("source: {base_url: %q}\nsync: {safety_lag: 0s, schedule: \"@every 1h\", jitter: 0s}\nsink: {parquet: {path: out}}\nstate: {url: %q}\nserver: {addr: \"127.0.0.1:0\"}\naccounts:\n%s", baseURL, stateURL, accounts)
	path := filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) (string, bool) { return testkit.APIKey, k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// reloadHarness is `syncd run` of an App in this process: a daemon whose
// reloads (on hangup) apply next.
type reloadHarness struct {
	a      *App
	logs   *observer.ObservedLogs
	hangup chan struct{}
}

// runReloading opens cfg on a bucket state and runs the daemon until the
// test ends; a hangup reloads next.
func runReloading(t *testing.T, cfg, next *config.Config) *reloadHarness {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	ctx := context.Background()
	a, err := Open(ctx, cfg, zap.New(core), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	h := &reloadHarness{a: a, logs: logs, hangup: make(chan struct{})}
	stopping := make(chan struct{})
	load := func() (*config.Config, error) { return next, nil }
	opts, err := a.DaemonOptions(ctx, stopping, "test", load, h.hangup, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, opts) }()
	t.Cleanup(func() {
		close(stopping)
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return h
}

// waitLogs waits until the log holds n messages msg.
func (h *reloadHarness) waitLogs(t *testing.T, msg string, n int) {
	t.Helper()
	deadline := time.Now().Add(reloadWait)
	for h.logs.FilterMessage(msg).Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d log lines %q; the log has %d", n, msg, h.logs.FilterMessage(msg).Len())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitClosed waits for acct to close.
func awaitClosed(t *testing.T, acct *Account, why string) {
	t.Helper()
	select {
	case <-acct.Closed():
	case <-time.After(reloadWait):
		t.Fatalf("timed out waiting for the account to close: %s", why)
	}
}

// TestReloadKeepsTheClaimOfAChangedAccount: a reload that changes an
// account opens it again on the claim of its state it held; closing the
// account it replaced does not give that claim back, and the reopened
// account's passes write its state.
func TestReloadKeepsTheClaimOfAChangedAccount(t *testing.T) {
	lake := lakes.Start(t, "gs")
	sim := testkit.StartSim(t, formsim.Config{Seed: 21, Forms: 2, Submissions: 20})
	ids := sim.FormIDs()
	dir := t.TempDir()
	stateURL := lake.URL("team/syncd-state")
	cfg := bucketConfig(t, dir, sim.BaseURL, stateURL, `  - {name: acme, api_key: "${KEY}"}
`)
	next := bucketConfig(t, dir, sim.BaseURL, stateURL, fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", exclude: [%s]}
`, ids[1]))
	ns := namespaceOf(t, cfg, "acme")
	h := runReloading(t, cfg, next)
	h.waitLogs(t, "form synced", 2) // the first pass, of both forms

	old := h.a.Account("acme")
	h.hangup <- struct{}{}
	awaitClosed(t, old, "a reload replaced it")
	// The new account's first pass (of ids[0]) has reported, well or not.
	deadline := time.Now().Add(reloadWait)
	for h.logs.FilterMessage("form synced").Len()+h.logs.FilterMessage("form sync failed").Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the first pass of the reloaded account")
		}
		time.Sleep(10 * time.Millisecond)
	}

	acct := h.a.Account("acme")
	if acct == old {
		t.Fatal("the reload did not open the changed account again")
	}
	if owned := h.a.Store.(*state.Sharded).Owned(); !slices.Contains(owned, ns) {
		t.Errorf("after a reload changed account acme, this syncd holds the lease of %q, not of acme's state", owned)
	}
	if _, err := sim.SubmitNow(ids[0]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the submission's millisecond
	for _, r := range acct.Pass(context.Background(), acct.Jobs, false) {
		if r.Err != nil {
			t.Errorf("a pass of the reloaded account, form %s: %v", r.Stream, r.Err)
		}
	}
	st, err := h.a.Store.Get(context.Background(), streamOf(t, acct, acct.Job(ids[0])).Key())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(sim.ExpectedIDs(ids[0]))); st.Rows != want {
		t.Errorf("the state counts %d rows of form %s, want %d", st.Rows, ids[0], want)
	}
}

// TestReloadWaitsForATriggeredPass: a reload that replaces an account
// while a pass a webhook delivery triggered runs on it closes the account
// (its sink, its claim on the state) only once that pass has ended, and
// the pass commits what it fetched.
func TestReloadWaitsForATriggeredPass(t *testing.T) {
	lake := lakes.Start(t, "gs")
	// While blocked names a form, its first listing of submissions waits
	// for open: the triggered pass is then in flight.
	var blocked atomic.Pointer[string]
	entered, open := make(chan struct{}, 1), make(chan struct{})
	var openOnce sync.Once
	unblock := func() { openOnce.Do(func() { close(open) }) }
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 22, Forms: 2, Submissions: 20}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f := blocked.Load(); f != nil && strings.HasSuffix(r.URL.Path, "/forms/"+*f+"/submissions") {
				select {
				case entered <- struct{}{}:
					<-open
				default: // not the first: let it through
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	t.Cleanup(unblock) // before the simulator stops (cleanups run last first)
	ids := sim.FormIDs()
	dir := t.TempDir()
	stateURL := lake.URL("team/syncd-state")
	cfg := bucketConfig(t, dir, sim.BaseURL, stateURL, `  - {name: acme, api_key: "${KEY}"}
`)
	// The reload drops ids[0] from the account: only the triggered pass of
	// the replaced account syncs it.
	next := bucketConfig(t, dir, sim.BaseURL, stateURL, fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", exclude: [%s]}
`, ids[0]))
	h := runReloading(t, cfg, next)
	h.waitLogs(t, "form synced", 2) // the first pass, of both forms

	old := h.a.Account("acme")
	if _, err := sim.SubmitNow(ids[0]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the submission's millisecond
	blocked.Store(&ids[0])
	type outcome struct{ busy, ok bool }
	triggered := make(chan outcome, 1)
	go func() {
		out := h.a.triggeredPass(context.Background(), webhook.Stream{Account: "acme", Source: poller.SourceForms, Stream: ids[0]}, nil)
		triggered <- outcome{busy: out.Busy, ok: out.OK}
	}()
	select {
	case <-entered:
	case <-time.After(reloadWait):
		t.Fatal("timed out waiting for the triggered pass to list the form's submissions")
	}

	h.hangup <- struct{}{}
	h.waitLogs(t, "configuration reloaded", 1)
	// The daemon has let go of the replaced account's entries; the
	// account must stay open while the triggered pass runs.
	closedEarly := false
	select {
	case <-old.Closed():
		closedEarly = true
	case <-time.After(2 * time.Second):
	}
	unblock()
	var got outcome
	select {
	case got = <-triggered:
	case <-time.After(reloadWait):
		t.Fatal("timed out waiting for the triggered pass to end")
	}
	if closedEarly {
		t.Errorf("a reload closed the replaced account acme while a pass a delivery triggered was running on it")
	}
	if got.busy || !got.ok {
		t.Errorf("the triggered pass on the replaced account: busy %v, ok %v; want it to end well", got.busy, got.ok)
	}
	awaitClosed(t, old, "its triggered pass ended after a reload replaced it")
	st, err := h.a.Store.Get(context.Background(), streamOf(t, old, old.Job(ids[0])).Key())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(sim.ExpectedIDs(ids[0]))); st.Rows != want {
		t.Errorf("the state counts %d rows of form %s, want %d", st.Rows, ids[0], want)
	}
}

// streamOf is acct's stream of job; the test fails when it has none.
func streamOf(t *testing.T, acct *Account, job poller.Job) poller.Stream {
	t.Helper()
	s, err := acct.Stream(job)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
