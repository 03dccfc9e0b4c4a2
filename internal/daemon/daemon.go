// Package daemon is `syncd run`: cron entries per stream (a pass at start,
// then on each schedule), replaced live when the configuration is reloaded,
// the HTTP server of /metrics, /healthz, /readyz and /status, and a clean
// stop that lets the batches in flight commit.
package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
)

// Entry is one cron entry: a schedule and the pass it runs (of every
// stream of a source, or of one form on a schedule of its own).
type Entry struct {
	// ID is the entry's identity across reloads, such as
	// "acme/sync.schedule"; "" is Name. A reload keeps, replaces or removes
	// entries by ID.
	ID string
	// Version changes when the configuration that built the entry changes;
	// a reload replaces an entry whose Version changed and keeps one whose
	// Version did not.
	Version  string
	Name     string // names the schedule in errors: "sync.schedule", "schedule of form X"
	Schedule string // a cron spec, UTC
	Pass     func(ctx context.Context) []poller.Result
	// Close, if set, releases what the entry holds (an account's sink). The
	// daemon calls it once when it is done with the entry, after its pass in
	// flight has ended: when a reload removes or replaces it, at stop, or
	// at once for an entry it does not take (a reload that fails its checks,
	// or an entry whose ID and Version are already running).
	Close func()
}

func (e Entry) id() string {
	if e.ID == "" {
		return e.Name
	}
	return e.ID
}

// Options are what the daemon runs: its entries, and where it reports.
type Options struct {
	// Stopping closes when a signal asks the daemon to stop: no new pass
	// starts, and the batches in flight may commit.
	Stopping <-chan struct{}
	Version  string
	Addr     string // where /metrics, /healthz, /readyz and /status are served
	// UnreadyAfter is how long a stream may fail before /readyz fails;
	// Jitter delays each scheduled pass by up to it; Grace is how long the
	// batches in flight have at a stop (logged).
	UnreadyAfter, Jitter, Grace time.Duration
	Entries                     []Entry
	Status                      http.Handler // GET /status
	Metrics                     *metrics.Metrics
	Log                         *zap.Logger
	// Reload, if set, builds the entries afresh from the configuration; the
	// daemon calls it on a signal on Hangup or Watch. On an error the
	// entries running keep running.
	Reload func(ctx context.Context) ([]Entry, error)
	// Hangup signals a SIGHUP (the caller wires the signal); Watch signals
	// that the configuration file changed (see WatchFile). Either may be nil.
	Hangup, Watch <-chan struct{}
	// Handlers are served beside /status and /metrics, by path (the
	// connect page, the webhook receiver).
	Handlers map[string]http.Handler
	// Stop, if set, is called once no scheduled pass starts any more, and
	// before the daemon waits for the passes in flight: it stops what
	// starts passes besides the schedule (the webhooks' bell) and waits for
	// the passes it started.
	Stop func()
}

// ConfigError is a configuration the daemon cannot run with (an address in
// use, a bad schedule): the operator's to fix.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error { return &ConfigError{Err: err} }

// Run runs each entry's pass at start and then on its schedule, serving
// /metrics, /healthz, /readyz and /status, until opts.Stopping closes or
// ctx ends. The engine refuses a second pass of a stream that is still
// running, so a pass that overruns its slot is skipped and counted, not
// stacked. On a signal on opts.Hangup or opts.Watch it reloads the entries
// through opts.Reload: new ones are added and run a first pass at once,
// removed ones are taken off the schedule (a pass in flight finishes), and
// changed ones are replaced.
func Run(ctx context.Context, opts Options) error {
	log, m := opts.Log, opts.Metrics
	d := &daemon{opts: opts, log: log, m: m, cron: cron.New(cron.WithLocation(time.UTC)),
		entries: map[string]*running{}, orphans: map[stream]bool{}}
	scheds, err := parse(opts.Entries)
	if err != nil {
		closeAll(opts.Entries)
		return configError(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/status", opts.Status)
	for path, h := range opts.Handlers {
		mux.Handle(path, h)
	}
	mux.Handle("/", m.Handler(func() error { return nil }, opts.UnreadyAfter))
	srv := &http.Server{
		Addr:              opts.Addr,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		closeAll(opts.Entries)
		return configError(fmt.Errorf("server.addr %s: %w: choose a free address", opts.Addr, err))
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", zap.Error(err))
		}
	}()
	log.Info("serving /metrics, /healthz, /readyz, /status", zap.String(logkey.Addr, ln.Addr().String()))

	for i, e := range opts.Entries {
		d.add(ctx, e, scheds[i], nil)
	}
	log.Info("syncd running", zap.Int(logkey.Entries, len(opts.Entries)), zap.String(logkey.Version, opts.Version))
	d.cron.Start()
	hangup, watch := opts.Hangup, opts.Watch
loop:
	for {
		select {
		case <-opts.Stopping:
			break loop
		case <-ctx.Done():
			break loop
		case _, ok := <-hangup:
			if !ok {
				hangup = nil // closed: no more signals, rather than a reload per turn
				continue
			}
			d.reload(ctx, "SIGHUP")
		case _, ok := <-watch:
			if !ok {
				watch = nil
				continue
			}
			d.reload(ctx, "the configuration file changed")
		}
	}
	log.Info("stopping: no new passes; batches in flight may commit", zap.Duration(logkey.Grace, opts.Grace))
	<-d.cron.Stop().Done()
	if opts.Stop != nil {
		opts.Stop()
	}
	d.mu.Lock()
	d.stopping = true
	for _, r := range d.entries {
		d.remove(r, false)
	}
	d.mu.Unlock()
	d.work.Wait()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	log.Info("stopped cleanly")
	return nil
}

// daemon is the state of one Run: the entries on the schedule.
type daemon struct {
	opts Options
	log  *zap.Logger
	m    *metrics.Metrics
	cron *cron.Cron
	// work counts the first passes and the Close calls Run started itself;
	// the scheduled passes are cron's, which its Stop waits for.
	work sync.WaitGroup

	mu      sync.Mutex
	entries map[string]*running // by ID: the entries on the schedule
	// orphans are what the entries that reloads removed or replaced
	// reported. Each goes once no pass that may still report it is left
	// (unsettled is 0) and no entry on the schedule reports it: a stream
	// may have moved to an entry whose first pass has not ended yet.
	orphans   map[stream]bool
	unsettled int  // first passes of added entries, passes in flight of removed ones, reloads being applied
	stopping  bool // nothing is forgotten at the stop
}

// running is an entry on the schedule, or removed with a pass in flight.
type running struct {
	e    Entry
	cron cron.EntryID
	gone chan struct{} // closed when removed: a pass waiting for its jitter gives up

	// Guarded by daemon.mu.
	inflight int
	removed  bool
	forget   bool // at the finish, what it reported joins the orphans
	// seen are the accounts and streams the entry's passes reported, so that
	// a removed entry's series and health go once no running entry reports
	// them, and a listing that now succeeds clears its account.
	seen map[stream]bool
	// listing is, by account, the error of listing its forms in its last
	// pass (nil: listed); the map is not written once set.
	listing map[string]error
}

// stream is an account's stream; stream "" with source "" is the account.
type stream struct{ account, source, stream string }

// parse checks every entry's schedule and that no two share an ID, before
// any is taken: a reload is taken whole or not at all.
func parse(entries []Entry) ([]cron.Schedule, error) {
	scheds := make([]cron.Schedule, len(entries))
	ids := make(map[string]bool, len(entries))
	for i, e := range entries {
		if e.id() == "" {
			return nil, fmt.Errorf("entry %d has neither an ID nor a name", i)
		}
		if ids[e.id()] {
			return nil, fmt.Errorf("two entries %q", e.id())
		}
		ids[e.id()] = true
		s, err := cron.ParseStandard(e.Schedule)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		scheds[i] = s
	}
	return scheds, nil
}

func closeAll(entries []Entry) {
	for _, e := range entries {
		if e.Close != nil {
			e.Close()
		}
	}
}

// add puts e on the schedule and starts its first pass, without jitter's
// wait for the next slot. seen carries over the accounts of the entry it
// replaces, so that its passes clear their listing failures. It is called
// from Run's goroutine only.
func (d *daemon) add(ctx context.Context, e Entry, s cron.Schedule, seen map[stream]bool) {
	r := &running{e: e, gone: make(chan struct{}), seen: seen}
	if r.seen == nil {
		r.seen = map[stream]bool{}
	}
	r.cron = d.cron.Schedule(s, cron.FuncJob(func() { d.pass(ctx, r) }))
	d.mu.Lock()
	d.entries[e.id()] = r
	d.unsettled++ // until the first pass has reported the streams it syncs
	d.mu.Unlock()
	d.work.Add(1)
	go func() {
		defer d.work.Done()
		d.pass(ctx, r)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.settle()
	}()
}

// remove takes r off the schedule; the finish follows once its pass in
// flight, if any, has ended. forget says whether what it reported then
// joins the orphans (a reload's removal or replacement; not at stop). d.mu
// is held.
func (d *daemon) remove(r *running, forget bool) {
	d.cron.Remove(r.cron)
	delete(d.entries, r.e.id())
	r.removed, r.forget = true, forget
	close(r.gone)
	if forget {
		d.unsettled++ // until its pass in flight has reported
	}
	if r.inflight == 0 {
		d.finish(r)
	}
}

// finish ends a removed entry whose pass has ended: what it reported joins
// the orphans, and its Close runs on a goroutine of its own, so that a
// slow Close holds up neither a reload nor a pass's goroutine. d.mu is
// held.
func (d *daemon) finish(r *running) {
	if r.forget {
		maps.Copy(d.orphans, r.seen)
		d.settle()
	}
	if r.e.Close == nil {
		return
	}
	d.work.Add(1)
	go func() {
		defer d.work.Done()
		r.e.Close()
	}()
}

// settle ends one unsettled pass or reload. The last one drops the series
// and health of the orphans that no entry on the schedule reports. d.mu is
// held.
func (d *daemon) settle() {
	d.unsettled--
	if d.unsettled > 0 || d.stopping {
		return
	}
	live := d.list()
	for k := range d.orphans {
		if slices.ContainsFunc(live, func(o *running) bool { return o.seen[k] }) {
			continue
		}
		if k.stream == "" && k.source == "" {
			d.m.ForgetAccount(k.account)
			continue
		}
		// While listing the account's forms fails, whether it still syncs
		// the stream is unknown: the entry listing them keeps it, so that
		// its counters do not reset when the listing succeeds again.
		if i := slices.IndexFunc(live, func(o *running) bool { return o.listing[k.account] != nil }); i >= 0 {
			live[i].seen[k] = true
			continue
		}
		d.m.ForgetStream(k.account, k.source, k.stream)
	}
	clear(d.orphans)
}

func (d *daemon) list() []*running {
	out := make([]*running, 0, len(d.entries))
	for _, r := range d.entries {
		out = append(out, r)
	}
	return out
}

// pass runs one pass of r, unless the daemon is stopping or r was removed.
func (d *daemon) pass(ctx context.Context, r *running) {
	select {
	case <-d.opts.Stopping:
		return
	case <-r.gone:
		return
	default:
	}
	if d.opts.Jitter > 0 {
		select {
		case <-time.After(rand.N(d.opts.Jitter)):
		case <-d.opts.Stopping:
			return
		case <-r.gone:
			return
		case <-ctx.Done():
			return
		}
	}
	d.mu.Lock()
	if r.removed {
		d.mu.Unlock()
		return
	}
	r.inflight++
	d.mu.Unlock()
	results := r.e.Pass(ctx)
	d.observe(r, results)
	d.mu.Lock()
	defer d.mu.Unlock()
	r.inflight--
	if r.removed && r.inflight == 0 {
		d.finish(r)
	}
}

// reload builds the entries afresh and applies the difference by ID. why
// says what asked for it, in the log.
func (d *daemon) reload(ctx context.Context, why string) {
	log := d.log.With(zap.String(logkey.Reason, why))
	if d.opts.Reload == nil {
		log.Warn("configuration reload asked for, but this daemon cannot reload: restart it to apply a change")
		return
	}
	entries, err := d.opts.Reload(ctx)
	if err == nil {
		var scheds []cron.Schedule
		if scheds, err = parse(entries); err == nil {
			d.apply(ctx, log, entries, scheds)
			d.m.ObserveReload(nil)
			return
		}
		closeAll(entries)
	}
	d.m.ObserveReload(err)
	log.Error("configuration reload failed; the entries running keep running", zap.Error(err))
}

// apply adds, replaces and removes entries so that the schedule is entries.
func (d *daemon) apply(ctx context.Context, log *zap.Logger, entries []Entry, scheds []cron.Schedule) {
	// No orphan goes before every entry of this reload is on the schedule.
	d.mu.Lock()
	d.unsettled++
	d.mu.Unlock()
	var added, changed, removed, kept int
	want := make(map[string]bool, len(entries))
	for i, e := range entries {
		id := e.id()
		want[id] = true
		d.mu.Lock()
		old := d.entries[id]
		if old != nil && old.e.Version == e.Version {
			d.mu.Unlock()
			kept++
			if e.Close != nil {
				e.Close() // the running entry stays; this copy of it is not taken
			}
			continue
		}
		var seen map[stream]bool
		if old != nil {
			// Its streams are orphans until the successor's first pass
			// reports those it still syncs; its accounts are the successor's.
			seen = maps.Clone(old.seen)
			maps.DeleteFunc(seen, func(k stream, _ bool) bool { return k.source != "" || k.stream != "" })
			d.remove(old, true)
		}
		d.mu.Unlock()
		d.add(ctx, e, scheds[i], seen)
		if old != nil {
			changed++
			log.Info("entry changed", zap.String(logkey.ID, id), zap.String(logkey.FromVersion, old.e.Version),
				zap.String(logkey.Version, e.Version), zap.String(logkey.Schedule, e.Schedule))
		} else {
			added++
			log.Info("entry added", zap.String(logkey.ID, id), zap.String(logkey.Version, e.Version), zap.String(logkey.Schedule, e.Schedule))
		}
	}
	d.mu.Lock()
	for id, r := range d.entries {
		if !want[id] {
			removed++
			d.remove(r, true)
			log.Info("entry removed; its data stays where it is", zap.String(logkey.ID, id), zap.String(logkey.Version, r.e.Version))
		}
	}
	d.settle()
	d.mu.Unlock()
	log.Info("configuration reloaded", zap.Int(logkey.Added, added), zap.Int(logkey.Changed, changed),
		zap.Int(logkey.Removed, removed), zap.Int(logkey.Unchanged, kept))
}

// observe reports a pass's results in the metrics and the log, and notes
// the accounts and streams r reported.
func (d *daemon) observe(r *running, results []poller.Result) {
	log, m := d.log, d.m
	// By account: the error listing its forms, nil when the pass listed
	// them, or reported the account without listing (one form's entry).
	listing := map[string]error{}
	d.mu.Lock()
	for k := range r.seen {
		if k.source == "" && k.stream == "" {
			listing[k.account] = nil
		}
	}
	for _, res := range results {
		a := accountOf(res)
		r.seen[stream{account: a}] = true
		if res.Stream == "" {
			listing[a] = res.Err
			continue
		}
		if _, ok := listing[a]; !ok {
			listing[a] = nil
		}
		r.seen[stream{account: a, source: res.Source, stream: res.Stream}] = true
	}
	r.listing = listing
	d.mu.Unlock()
	for a, err := range listing {
		m.ForAccount(a).ObserveFailure(err)
	}
	Report(log, m, results)
}

// Report reports the results of a pass of streams in the metrics and the
// log: a scheduled pass's, or one a webhook delivery triggered.
func Report(log *zap.Logger, m *metrics.Metrics, results []poller.Result) {
	for _, res := range results {
		if res.Stream == "" {
			continue // the source itself failed (listing the forms): logged where it failed
		}
		if res.Interrupted {
			continue // stopping; the next start takes it from there
		}
		a := accountOf(res)
		if errors.Is(res.Err, poller.ErrBusy) {
			m.ForAccount(a).ObserveSkipped(res.Source, res.Stream)
			log.Warn("pass skipped: the previous pass of this stream is still running",
				zap.String(logkey.Account, a), zap.String(logkey.Stream, res.Stream))
			continue
		}
		m.ObservePass(metrics.Pass{Account: a, Source: res.Source, Stream: res.Stream, Rows: res.Rows, Bytes: res.Bytes,
			Batches: res.Batches, Misfits: res.Misfits, Discarded: res.Discarded, ReconciledWindows: res.ReconciledWindows,
			Versions: res.Versions, Tombstones: res.Tombstones, Duration: res.Duration, CoveredEnd: res.CoveredEnd, Err: res.Err,
			Maintained: res.Maintained, MaintainFailed: res.MaintainErr != nil})
		if res.Err != nil {
			log.Error("form sync failed", zap.String(logkey.Account, a), zap.String(logkey.Stream, res.Stream), zap.Error(res.Err))
			continue
		}
		log.Info("form synced", zap.String(logkey.Account, a), zap.String(logkey.Stream, res.Stream), zap.Int64(logkey.Rows, res.Rows),
			zap.Int(logkey.Batches, res.Batches), zap.Int64(logkey.Requests, res.Requests), zap.Duration(logkey.Duration, res.Duration))
	}
}

func accountOf(r poller.Result) string {
	if r.Account == "" {
		return metrics.DefaultAccount
	}
	return r.Account
}

// WatchFile signals on the channel it returns when the content of the file
// at path changes, reading it every interval until ctx ends. It compares
// the content's hash, not the modification time: a Kubernetes ConfigMap
// mount changes by swapping a symlink, and a touch changes nothing that a
// reload would see. A file that cannot be read is no change: the next read
// that succeeds is compared with the last one that did. Signals that the
// receiver has not taken yet are merged into one.
func WatchFile(ctx context.Context, path string, every time.Duration) <-chan struct{} {
	ch := make(chan struct{}, 1)
	last, known := hashFile(path)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sum, ok := hashFile(path)
			if !ok || (known && sum == last) {
				continue
			}
			last, known = sum, true
			select {
			case ch <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return ch
}

// hashFile is the hash of the file's content, following symlinks; false
// when it cannot be read.
func hashFile(path string) ([sha256.Size]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}
