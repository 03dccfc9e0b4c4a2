package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
)

// wait is how long a test waits for what should happen: generous, as CI
// machines are slow; no test asserts on speed.
const wait = 20 * time.Second

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// probe is an entry whose passes and Close the test watches.
type probe struct {
	id, version string
	passes      atomic.Int32
	ran         chan int32    // each pass's number, as it starts
	block       chan struct{} // if set, the first pass waits for it to close
	returned    atomic.Bool   // the blocked first pass has returned
	closes      atomic.Int32
	closed      chan struct{} // closed by the first Close
	// closedAfterPass: at Close, the first pass had returned
	closedAfterPass atomic.Bool
	account         string
}

func newProbe(id, version string) *probe {
	return &probe{id: id, version: version, ran: make(chan int32, 1000), closed: make(chan struct{})}
}

func (p *probe) entry(schedule string) Entry {
	return Entry{ID: p.id, Version: p.version, Name: "entry " + p.id, Schedule: schedule,
		Pass: func(ctx context.Context) []poller.Result {
			n := p.passes.Add(1)
			p.ran <- n
			if n == 1 && p.block != nil {
				<-p.block
				p.returned.Store(true)
			}
			return []poller.Result{{Account: p.account, Source: "forms", Stream: p.id, Rows: 1}}
		},
		Close: func() {
			if p.closes.Add(1) == 1 {
				p.closedAfterPass.Store(p.block == nil || p.returned.Load())
				close(p.closed)
			}
		},
	}
}

func (p *probe) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

// harness is a running daemon.
type harness struct {
	m      *metrics.Metrics
	logs   *observer.ObservedLogs
	hup    chan struct{}
	stop   chan struct{}
	done   chan error
	addr   string
	once   sync.Once
	reload atomic.Pointer[func(context.Context) ([]Entry, error)]
}

// start runs the daemon with entries; the test sets what reloads return
// with setReload.
func start(t *testing.T, entries []Entry) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{m: metrics.New(nil), logs: logs, hup: make(chan struct{}), stop: make(chan struct{}), done: make(chan error, 1)}
	opts := Options{
		Stopping: h.stop, Version: "test", Addr: "127.0.0.1:0", UnreadyAfter: 0,
		Entries: entries, Status: http.NotFoundHandler(), Metrics: h.m, Log: zap.New(core),
		Reload: func(ctx context.Context) ([]Entry, error) {
			f := h.reload.Load()
			if f == nil {
				return nil, errors.New("no reload set")
			}
			return (*f)(ctx)
		},
		Hangup: h.hup,
	}
	go func() { h.done <- Run(context.Background(), opts) }()
	eventually(t, "the server's address in the log", func() bool {
		for _, e := range logs.FilterMessage("serving /metrics, /healthz, /readyz, /status").All() {
			h.addr, _ = e.ContextMap()["addr"].(string)
		}
		return h.addr != ""
	})
	t.Cleanup(func() { h.shutdown(t) })
	return h
}

func (h *harness) setReload(f func(context.Context) ([]Entry, error)) { h.reload.Store(&f) }

// hangup sends a SIGHUP and waits until the reload it asked for is counted.
func (h *harness) hangup(t *testing.T, result string) {
	t.Helper()
	series := `syncd_config_reloads_total{result="` + result + `"}`
	before := h.scrape(t, series)
	select {
	case h.hup <- struct{}{}:
	case <-time.After(wait):
		t.Fatal("the daemon did not take the SIGHUP")
	}
	eventually(t, series+" to rise", func() bool { return h.scrape(t, series) > before })
}

// shutdown stops the daemon and waits for Run to return.
func (h *harness) shutdown(t *testing.T) {
	t.Helper()
	h.once.Do(func() {
		close(h.stop)
		if err := recv(t, "Run to return", h.done); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// scrape reads a series from /metrics: -1 when it is absent.
func (h *harness) scrape(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return -1
}

func (h *harness) logged(msg, id string) bool {
	for _, e := range h.logs.FilterMessage(msg).All() {
		if e.ContextMap()["id"] == id {
			return true
		}
	}
	return false
}

func TestReloadAddsAnEntryAndRunsItsFirstPass(t *testing.T) {
	a, b := newProbe("a", "1"), newProbe("b", "1")
	h := start(t, []Entry{a.entry("@every 1h")})
	recv(t, "a's first pass", a.ran)

	aAgain := newProbe("a", "1") // the copy a reload builds of an entry that did not change
	h.setReload(func(context.Context) ([]Entry, error) {
		return []Entry{aAgain.entry("@every 1h"), b.entry("@every 1h")}, nil
	})
	h.hangup(t, "ok")
	recv(t, "b's first pass", b.ran)
	if !h.logged("entry added", "b") {
		t.Error(`no "entry added" line for b`)
	}
	recv(t, "the untaken copy of a closed", aAgain.closed)
	if n := aAgain.passes.Load(); n != 0 {
		t.Errorf("the untaken copy of a ran %d passes", n)
	}
	if a.isClosed() {
		t.Error("a, unchanged, was closed by the reload")
	}

	h.shutdown(t)
	if !a.isClosed() || !b.isClosed() {
		t.Errorf("at stop: a closed %v, b closed %v; want both", a.isClosed(), b.isClosed())
	}
	if a.closes.Load() != 1 || b.closes.Load() != 1 || aAgain.closes.Load() != 1 {
		t.Errorf("closes: a %d, b %d, a's copy %d; want 1 each", a.closes.Load(), b.closes.Load(), aAgain.closes.Load())
	}
}

func TestReloadRemovesAnEntryAfterItsPass(t *testing.T) {
	a, b := newProbe("a", "1"), newProbe("b", "1")
	b.block = make(chan struct{})
	b.account = "acme"
	h := start(t, []Entry{a.entry("@every 1h"), b.entry("@every 1s")})
	recv(t, "b's first pass", b.ran)

	h.setReload(func(context.Context) ([]Entry, error) { return []Entry{a.entry("@every 1h")}, nil })
	h.hangup(t, "ok")
	if !h.logged("entry removed; its data stays where it is", "b") {
		t.Error(`no "entry removed" line for b`)
	}
	if b.isClosed() {
		t.Fatal("b closed while its pass was running")
	}
	close(b.block)
	recv(t, "b closed", b.closed)
	if !b.closedAfterPass.Load() {
		t.Error("b closed before its pass returned")
	}
	// Its series go with it, once its last pass is reported.
	eventually(t, "b's series dropped", func() bool {
		return h.scrape(t, `syncd_rows_written_total{account="acme",source="forms",stream="b"}`) == -1
	})

	// b's schedule fired every second; removed, it runs no more passes.
	n := b.passes.Load()
	time.Sleep(2500 * time.Millisecond)
	if m := b.passes.Load(); m != n {
		t.Errorf("b ran %d passes after it was removed", m-n)
	}
	h.shutdown(t)
	if b.closes.Load() != 1 {
		t.Errorf("b closed %d times, want 1", b.closes.Load())
	}
}

func TestReloadReplacesAChangedEntry(t *testing.T) {
	v1, v2 := newProbe("a", "1"), newProbe("a", "2")
	h := start(t, []Entry{v1.entry("@every 1h")})
	recv(t, "v1's first pass", v1.ran)

	h.setReload(func(context.Context) ([]Entry, error) { return []Entry{v2.entry("@every 1h")}, nil })
	h.hangup(t, "ok")
	recv(t, "v2's first pass", v2.ran)
	recv(t, "v1 closed", v1.closed)
	if !h.logged("entry changed", "a") {
		t.Error(`no "entry changed" line for a`)
	}
	if v2.isClosed() {
		t.Error("v2 closed while it is the running entry")
	}
	h.shutdown(t)
	if !v2.isClosed() {
		t.Error("v2 not closed at stop")
	}
	if v1.passes.Load() != 1 {
		t.Errorf("v1 ran %d passes, want 1", v1.passes.Load())
	}
}

func TestFailingReloadKeepsTheEntries(t *testing.T) {
	a := newProbe("a", "1")
	h := start(t, []Entry{a.entry("@every 1s")})
	recv(t, "a's first pass", a.ran)

	h.setReload(func(context.Context) ([]Entry, error) { return nil, errors.New("accounts[2].name: empty") })
	h.hangup(t, "error")

	// A reload whose entries fail the daemon's checks is refused whole, and
	// the entries it built are closed.
	bad, dup := newProbe("b", "1"), newProbe("b", "1")
	h.setReload(func(context.Context) ([]Entry, error) {
		return []Entry{bad.entry("not a schedule"), dup.entry("@every 1h")}, nil
	})
	h.hangup(t, "error")
	recv(t, "the refused entry closed", bad.closed)
	recv(t, "the refused entry closed", dup.closed)
	if bad.passes.Load() != 0 || dup.passes.Load() != 0 {
		t.Error("an entry of a refused reload ran")
	}
	if n := len(h.logs.FilterMessage("configuration reload failed; the entries running keep running").All()); n != 2 {
		t.Errorf("%d lines of a failed reload, want 2", n)
	}

	// a keeps running on its schedule, and is not closed.
	n := a.passes.Load()
	eventually(t, "a's next scheduled pass", func() bool { return a.passes.Load() > n })
	if a.isClosed() {
		t.Error("a closed by a failed reload")
	}
}

func TestObserveLabelsAccountsAndSkips(t *testing.T) {
	failing := Entry{ID: "acme/sync.schedule", Name: "sync.schedule", Schedule: "@every 1h",
		Pass: func(context.Context) []poller.Result {
			return []poller.Result{
				{Account: "acme", Source: "forms", Stream: "f1", Err: errors.New("403 forbidden")},
				{Account: "acme", Source: "forms", Stream: "f2", Err: poller.ErrBusy},
			}
		}}
	h := start(t, []Entry{failing})
	eventually(t, "the skipped pass counted", func() bool {
		return h.scrape(t, `syncd_passes_skipped_total{account="acme",source="forms",stream="f2"}`) == 1
	})
	eventually(t, "the failure counted", func() bool {
		return h.scrape(t, `syncd_pass_failures_total{account="acme",source="forms",stream="f1"}`) == 1
	})
	resp, err := http.Get("http://" + h.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "stream f1 of account acme") {
		t.Errorf("/readyz: %d %q; want 503 naming f1 of acme", resp.StatusCode, body)
	}
}

func TestRunRefusesABadSchedule(t *testing.T) {
	a := newProbe("a", "1")
	err := Run(context.Background(), Options{Addr: "127.0.0.1:0", Entries: []Entry{a.entry("every now and then")},
		Metrics: metrics.New(nil), Log: zap.NewNop(), Status: http.NotFoundHandler()})
	var cfgErr *ConfigError
	if !errors.As(err, &cfgErr) {
		t.Fatalf("Run: %v, want a ConfigError", err)
	}
	if !a.isClosed() {
		t.Error("the entry of a refused start was not closed")
	}
}

func TestWatchFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "syncd.yaml")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("syncd.yaml", "accounts: [a]\n")
	ch := WatchFile(ctx, path, 10*time.Millisecond)

	// A touch, and a rewrite of the same content, are no change.
	write("syncd.yaml", "accounts: [a]\n")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("signalled for the same content")
	case <-time.After(300 * time.Millisecond):
	}

	write("syncd.yaml", "accounts: [a, b]\n")
	recv(t, "a signal for new content", ch)
}

// TestWatchFileSymlinkSwap: a Kubernetes ConfigMap mount changes by
// pointing a symlink at a new directory; the file's own name never changes.
func TestWatchFileSymlinkSwap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	for name, content := range map[string]string{"v1": "accounts: [a]\n", "v2": "accounts: [a, b]\n"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "syncd.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "syncd.yaml"), filepath.Join(dir, "syncd.yaml")); err != nil {
		t.Fatal(err)
	}
	ch := WatchFile(ctx, filepath.Join(dir, "syncd.yaml"), 10*time.Millisecond)

	// Swap ..data atomically, as the kubelet does.
	if err := os.Symlink("v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	recv(t, "a signal for the swapped content", ch)
}

// TestStopAndHandlers: a handler of Options.Handlers is served beside
// /metrics, and Options.Stop runs once at the stop, after the schedule
// stopped and before Run returns.
func TestStopAndHandlers(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	stopping := make(chan struct{})
	var stops atomic.Int32
	done := make(chan error, 1)
	opts := Options{
		Stopping: stopping, Version: "test", Addr: "127.0.0.1:0",
		Status: http.NotFoundHandler(), Metrics: metrics.New(nil), Log: zap.New(core),
		Handlers: map[string]http.Handler{"/webhooks/": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })},
		Stop:     func() { stops.Add(1) },
	}
	go func() { done <- Run(context.Background(), opts) }()
	var addr string
	eventually(t, "the server's address in the log", func() bool {
		for _, e := range logs.FilterMessage("serving /metrics, /healthz, /readyz, /status").All() {
			addr, _ = e.ContextMap()["addr"].(string)
		}
		return addr != ""
	})
	resp, err := http.Post("http://"+addr+"/webhooks/forms/a/b/c", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST /webhooks/...: %d, want the handler's 202", resp.StatusCode)
	}
	if stops.Load() != 0 {
		t.Fatal("Stop ran before the stop")
	}
	close(stopping)
	if err := recv(t, "Run to return", done); err != nil {
		t.Fatal(err)
	}
	if n := stops.Load(); n != 1 {
		t.Errorf("Stop ran %d times, want once", n)
	}
}
