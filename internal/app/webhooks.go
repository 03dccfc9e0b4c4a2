package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/table"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// webhooksSecret is where an account's webhook registrations live in the
// state store, beside its streams (a store split by account keeps them
// with the account).
const webhooksSecret = "webhooks"

// WebhooksSecret is the state record of the webhooks of the account of
// namespace.
func WebhooksSecret(namespace string) string { return table.StreamKey(namespace, webhooksSecret) }

// Webhooks are the webhooks syncd registered for one account: their ids,
// never their URLs (a forms URL holds its path token). In the state each
// source is a key of one JSON object: a per-stream source's value is its
// streams' registrations by stream id, an account-wide source's value is
// its one registration ({"forms":{"<form>":{...}},"scheduling":{...}}).
type Webhooks struct {
	// Streams are the webhooks of one stream each, by source and stream id
	// (the forms, one per form).
	Streams map[string]map[string]Registered
	// AccountWide are the webhooks of all an account's streams of a
	// source, by source (the bookings).
	AccountWide map[string]Registered
}

// Registered is one webhook syncd registered.
type Registered struct {
	// ID is the service's id: a number for the Forms API, a string (a
	// UUID) for the scheduling API.
	ID string `json:"id"`
	// URL identifies the URL registered (source.WebhookRegistrar's
	// WebhookIdent, a hash: the URL holds the token): a changed public_url
	// or secret registers again.
	URL        string    `json:"url"`
	Registered time.Time `json:"registered"`
}

// recorded is the registration of src's stream (""; its account-wide one).
func (w Webhooks) recorded(src, stream string) (Registered, bool) {
	if stream == "" {
		r, ok := w.AccountWide[src]
		return r, ok
	}
	r, ok := w.Streams[src][stream]
	return r, ok
}

// record sets the registration of src's stream (""; its account-wide one).
func (w *Webhooks) record(src, stream string, r Registered) {
	if stream == "" {
		if w.AccountWide == nil {
			w.AccountWide = map[string]Registered{}
		}
		w.AccountWide[src] = r
		return
	}
	if w.Streams == nil {
		w.Streams = map[string]map[string]Registered{}
	}
	if w.Streams[src] == nil {
		w.Streams[src] = map[string]Registered{}
	}
	w.Streams[src][stream] = r
}

// forget drops the registration of src's stream (""; its account-wide one).
func (w *Webhooks) forget(src, stream string) {
	if stream == "" {
		delete(w.AccountWide, src)
		return
	}
	delete(w.Streams[src], stream)
	if len(w.Streams[src]) == 0 {
		delete(w.Streams, src)
	}
}

// empty reports whether w records no webhook.
func (w Webhooks) empty() bool {
	for _, m := range w.Streams {
		if len(m) > 0 {
			return false
		}
	}
	return len(w.AccountWide) == 0
}

// MarshalJSON writes one key per source, in order, as the record has
// always been written (a source without webhooks is left out).
func (w Webhooks) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(w.Streams)+len(w.AccountWide))
	for src, m := range w.Streams {
		if len(m) > 0 {
			out[src] = m
		}
	}
	for src, r := range w.AccountWide {
		if _, dup := out[src]; dup {
			return nil, fmt.Errorf("the webhooks of %s are recorded both per stream and for the account", src)
		}
		out[src] = r
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the record: a source's value with a string "id" is
// its account-wide registration; otherwise it maps stream ids to theirs
// (a registration's value is an object, never a string).
func (w *Webhooks) UnmarshalJSON(b []byte) error {
	var bySource map[string]json.RawMessage
	if err := json.Unmarshal(b, &bySource); err != nil {
		return err
	}
	*w = Webhooks{}
	for src, raw := range bySource {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if fields == nil {
			continue // null
		}
		if id, ok := fields["id"]; ok && len(id) > 0 && id[0] == '"' {
			var r Registered
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
			w.record(src, "", r)
			continue
		}
		var streams map[string]Registered
		if err := json.Unmarshal(raw, &streams); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		for stream, r := range streams {
			w.record(src, stream, r)
		}
	}
	return nil
}

// LoadWebhooks reads the account's webhook record (empty when none).
func LoadWebhooks(ctx context.Context, store state.Store, namespace string) (Webhooks, error) {
	raw, err := store.GetSecret(ctx, WebhooksSecret(namespace))
	if err != nil {
		return Webhooks{}, fmt.Errorf("read the webhooks of the state: %w", err)
	}
	var w Webhooks
	if raw != nil {
		if err := json.Unmarshal(raw, &w); err != nil {
			return Webhooks{}, fmt.Errorf("the webhooks record of the state cannot be read (%v): run `syncd webhooks remove`, and the next pass registers them again", err)
		}
	}
	return w, nil
}

// SaveWebhooks stores the account's webhook record durably (none: deleted).
func SaveWebhooks(ctx context.Context, store state.Store, namespace string, w Webhooks) error {
	var raw []byte
	if !w.empty() {
		var err error
		if raw, err = json.Marshal(w); err != nil {
			return fmt.Errorf("encode the webhooks record: %w", err)
		}
	}
	if err := store.PutSecret(ctx, WebhooksSecret(namespace), raw); err != nil {
		return fmt.Errorf("store the webhooks record: %w", err)
	}
	return nil
}

func (a *App) webhookSecret() []byte { return []byte(a.Cfg.Sync.Webhooks.Secret.Reveal()) }

// withWebhooks is a daemon pass that, with sync.webhooks set, first makes
// sure the account's forms (those jobs lists) and, with others set, its
// other sources have their webhooks: a failure to register is logged, and
// the pass polls as always.
func (acct *Account) withWebhooks(jobs func(context.Context) ([]poller.Job, error), others bool) func(context.Context) []poller.Result {
	if !acct.app.Cfg.Sync.Webhooks.Enabled() {
		return func(ctx context.Context) []poller.Result { return acct.Pass(ctx, jobs, others) }
	}
	return func(ctx context.Context) []poller.Result {
		listed := func(ctx context.Context) ([]poller.Job, error) {
			list, err := jobs(ctx)
			if err == nil {
				acct.noteForms(list)
				acct.registerStreams(ctx, poller.SourceForms, jobStreams(list), false)
			}
			return list, err
		}
		if others {
			acct.registerAccountWide(ctx)
		}
		start := time.Now()
		results := acct.Pass(ctx, listed, others)
		acct.reregisterSilent(ctx, results, start)
		return results
	}
}

// jobStreams are the stream ids (form ids) of jobs.
func jobStreams(jobs []poller.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.Stream
	}
	return ids
}

// noteDelivery records that an authentic delivery of a form arrived.
func (acct *Account) noteDelivery(formID string, at time.Time) {
	acct.seenMu.Lock()
	defer acct.seenMu.Unlock()
	if acct.delivered == nil {
		acct.delivered = map[string]time.Time{}
	}
	if at.After(acct.delivered[formID]) {
		acct.delivered[formID] = at
	}
}

// reregisterSilent registers again the webhook of each form whose
// scheduled pass, started at start, found new submissions while no delivery
// of the form arrived since its previous scheduled pass in this process:
// the Forms API cannot list webhooks, and a webhook the service lost is
// silent. A delivery dropped on the way looks the same; its cost is a
// webhook created and the old one deleted (two requests).
func (acct *Account) reregisterSilent(ctx context.Context, results []poller.Result, start time.Time) {
	var silent []string
	acct.seenMu.Lock()
	if acct.scheduled == nil {
		acct.scheduled = map[string]time.Time{}
	}
	for _, r := range results {
		if r.Source != poller.SourceForms || r.Stream == "" || r.Err != nil || r.Interrupted {
			continue
		}
		_, form := table.SplitStreamKey(r.Stream) // a result names the stream's key: account/form
		prev := acct.scheduled[form]
		acct.scheduled[form] = start
		fresh := r.Rows - r.Versions - r.Tombstones // reconciles' edits and deletions are not announced
		if !prev.IsZero() && fresh > 0 && acct.delivered[form].Before(prev) {
			silent = append(silent, form)
		}
	}
	acct.seenMu.Unlock()
	if len(silent) == 0 {
		return
	}
	for _, form := range silent {
		acct.Log.Info("a scheduled pass found new submissions that no delivery announced since the previous one: registering the form's webhook again",
			zap.String(logkey.Stream, form))
	}
	acct.registerStreams(ctx, poller.SourceForms, silent, true)
}

// noteForms remembers the forms a full listing found, so that a delivery of
// a form the account no longer has is refused.
func (acct *Account) noteForms(list []poller.Job) {
	if len(acct.Cfg.Forms) > 0 {
		return // configured forms: the configuration says which
	}
	set := make(map[string]bool, len(list))
	for _, j := range list {
		set[j.Stream] = true
	}
	acct.seenMu.Lock()
	acct.listed = set
	acct.seenMu.Unlock()
}

// hasForm says whether formID is one of the account's forms, as far as
// this process knows: configured, or in the last listing (before the first
// listing, any form whose token is valid).
func (acct *Account) hasForm(formID string) bool {
	if slices.Contains(acct.Cfg.Exclude, formID) {
		return false
	}
	if len(acct.Cfg.Forms) > 0 {
		return slices.ContainsFunc(acct.Cfg.Forms, func(f config.FormConfig) bool { return f.ID == formID })
	}
	acct.seenMu.Lock()
	defer acct.seenMu.Unlock()
	return acct.listed == nil || acct.listed[formID]
}

// webhookSource is the listed source of that name that registers
// webhooks; nil when none does.
func webhookSource(list []source.Source, name string) source.WebhookSource {
	ws, _ := findSource(list, name).(source.WebhookSource)
	return ws
}

// registerStreams makes sure each of streams (ids) of the account's
// source src has its own webhook (the forms, one per form): registered,
// with the URL the record names, unless again registers new ones (and
// deletes their previous ones). A source whose service cannot list
// webhooks (the Forms API) is known by the state's record alone.
func (acct *Account) registerStreams(ctx context.Context, src string, streams []string, again bool) {
	r, ok := acct.sourceAccount(src).(source.WebhookRegistrar)
	ws := webhookSource(acct.app.sources, src)
	if !ok || ws == nil || len(streams) == 0 {
		return
	}
	acct.regMu.Lock()
	defer acct.regMu.Unlock()
	if acct.noHookScope[src] {
		return
	}
	rec, err := LoadWebhooks(ctx, acct.app.Store, acct.Cfg.Namespace())
	if err != nil {
		acct.Log.Warn("webhooks not registered; polling goes on", zap.Error(err))
		return
	}
	info := ws.Webhooks()
	for _, stream := range streams {
		if !acct.registerWebhook(ctx, &rec, src, r, info, stream, again) {
			return
		}
	}
}

// registerAccountWide makes sure each of the account's other sources
// whose webhook covers all its streams (the bookings) has it: listed by
// the service when it can list them (one that disappeared is registered
// again), with syncd's URL. A sign-in that lacks the scope to register
// gets one clear line per process, and its streams are polled as always.
func (acct *Account) registerAccountWide(ctx context.Context) {
	for _, src := range acct.sources {
		r, ok := src.acct.(source.WebhookRegistrar)
		ws := webhookSource(acct.app.sources, src.name)
		if !ok || ws == nil || ws.Webhooks().Covers == "" {
			continue
		}
		acct.registerOne(ctx, src.name, r, ws.Webhooks())
	}
}

// registerOne is registerAccountWide of one source.
func (acct *Account) registerOne(ctx context.Context, src string, r source.WebhookRegistrar, info source.WebhookInfo) {
	acct.regMu.Lock()
	defer acct.regMu.Unlock()
	if acct.noHookScope[src] {
		return
	}
	rec, err := LoadWebhooks(ctx, acct.app.Store, acct.Cfg.Namespace())
	if err != nil {
		acct.Log.Warn("webhooks not registered; polling goes on", zap.Error(err))
		return
	}
	acct.registerWebhook(ctx, &rec, src, r, info, "", false)
}

// registerWebhook makes sure the webhook of src's stream (""; of all its
// streams) is registered, and records it in rec and the state; the caller
// holds regMu. It reports whether to go on with the source's other
// streams: not when the sign-in lacks the scope, or the record cannot be
// stored.
func (acct *Account) registerWebhook(ctx context.Context, rec *Webhooks, src string, r source.WebhookRegistrar, info source.WebhookInfo, stream string, again bool) bool {
	w := source.Webhook{PublicURL: acct.app.Cfg.Sync.Webhooks.PublicURL, Secret: acct.app.webhookSecret(), Account: acct.Name, Stream: stream}
	ident := r.WebhookIdent(w)
	logStream := zap.Skip()
	if stream != "" {
		logStream = zap.String(logkey.Stream, stream)
	}
	old, ok := rec.recorded(src, stream)
	if ok && old.URL == ident && !again {
		v, lists := r.(source.WebhookVerifier)
		if !lists {
			return true
		}
		exists, err := v.WebhookExists(ctx, w, old.ID)
		if err != nil {
			acct.Log.Warn("checking the webhook at the service failed; the next pass tries again", zap.String(logkey.Source, src), logStream, zap.Error(err))
			return true
		}
		if exists {
			return true
		}
		acct.Log.Info("the webhook disappeared at the service; registering it again", zap.String(logkey.Source, src), logStream, zap.String(logkey.WebhookID, old.ID))
	}
	var oldID string
	if ok {
		oldID = old.ID
	}
	reg, err := r.RegisterWebhook(ctx, w, oldID)
	if errors.Is(err, source.ErrNoWebhookScope) {
		if acct.noHookScope == nil {
			acct.noHookScope = map[string]bool{}
		}
		acct.noHookScope[src] = true
		acct.Log.Warn(cmp.Or(info.NoScope, "the sign-in lacks the scope to register webhooks: the source's streams arrive by polling only"),
			zap.String(logkey.Account, acct.Name), zap.String(logkey.Source, src))
		return false
	}
	if err != nil {
		acct.Log.Warn(cmp.Or(info.Failed, "registering a webhook failed; the stream arrives by polling, and the next pass tries again"),
			zap.String(logkey.Source, src), logStream, zap.Error(err))
		return true
	}
	rec.record(src, stream, Registered{ID: reg.ID, URL: ident, Registered: time.Now().UTC()})
	if err := SaveWebhooks(ctx, acct.app.Store, acct.Cfg.Namespace(), *rec); err != nil {
		acct.Log.Warn("the webhook was registered but could not be recorded; removing it", zap.String(logkey.Source, src), logStream, zap.Error(err))
		if ok {
			rec.record(src, stream, old)
		} else {
			rec.forget(src, stream)
		}
		_ = r.RemoveWebhook(ctx, reg.ID)
		return false
	}
	acct.Log.Info("webhook registered", zap.String(logkey.Source, src), logStream, zap.String(logkey.WebhookID, reg.ID))
	if reg.Stale != "" {
		// The old URL no longer verifies, or the webhook went silent:
		// remove it (a lost one is gone already).
		if err := r.RemoveWebhook(ctx, reg.Stale); err != nil {
			acct.Log.Warn("removing the previous webhook failed", zap.String(logkey.Source, src), logStream, zap.String(logkey.WebhookID, reg.Stale), zap.Error(err))
		}
	}
	return true
}

// webhookPresence is where a delivery's stream is synced: Here when this
// process has the account open (it owns it), the account uses the source
// and the stream is one of its, Elsewhere when another replica of a shared
// state owns it.
func (a *App) webhookPresence(s webhook.Stream) webhook.Presence {
	if acct := a.Account(s.Account); acct != nil {
		// A delivery names a stream only for a webhook per stream: the
		// forms, which the app selects (configured, listed, excluded).
		if acct.sourceAccount(s.Source) == nil || (s.Stream != "" && !acct.hasForm(s.Stream)) {
			return webhook.Unknown
		}
		return webhook.Here
	}
	if !a.shared {
		return webhook.Unknown
	}
	ws := webhookSource(a.sources, s.Source)
	if ws == nil {
		return webhook.Unknown
	}
	for _, ac := range a.Current().AccountList() {
		if ac.Name == s.Account && ws.Receives(ac, s.Stream) {
			return webhook.Elsewhere
		}
	}
	return webhook.Unknown
}

// triggeredPass is the pass a delivery rang for: one form, or the
// bookings, through the same engine, limiter and exactly-once path as a
// scheduled pass. A form's pass also re-reads what of recheck was
// committed before it (submissions imported behind the checkpoint).
func (a *App) triggeredPass(ctx context.Context, s webhook.Stream, recheck []webhook.Window) webhook.Outcome {
	// The Bell runs it on a goroutine of its own, beside the daemon's
	// entries: it holds the account as they do, so that a reload that
	// replaces or removes the account closes it (its sink, its share of the
	// claim on the state) only once this pass has ended.
	acct := a.holdAccount(s.Account)
	if acct == nil {
		return webhook.Outcome{} // released since (a reload, another replica took it)
	}
	defer acct.drop()
	var results []poller.Result
	if s.Stream == "" {
		// The webhook of all the account's streams of a source (the
		// bookings): a pass of them.
		src, ok := acct.openSourceNamed(s.Source)
		if !ok {
			return webhook.Outcome{}
		}
		results = acct.sourcePass(ctx, src)
	} else {
		job := acct.Job(s.Stream)
		for _, w := range recheck {
			job.Recheck = append(job.Recheck, state.Interval{Start: w.Start, End: w.End})
		}
		one := func(context.Context) ([]poller.Job, error) { return []poller.Job{job}, nil }
		results = acct.Pass(ctx, one, false)
	}
	if len(results) == 0 {
		return webhook.Outcome{}
	}
	out := webhook.Outcome{OK: true}
	for _, r := range results {
		if errors.Is(r.Err, poller.ErrBusy) {
			return webhook.Outcome{Busy: true}
		}
		if r.Err != nil || r.Interrupted {
			out.OK = false
		}
		// The form's own result (its key may carry the account's
		// namespace): one form ran, beside no other.
		if s.Stream != "" && r.Source == s.Source && r.Stream != "" {
			for i, w := range recheck {
				if i >= len(r.Rechecked) || !r.Rechecked[i] {
					out.Missed = append(out.Missed, w)
				}
			}
		}
	}
	// Labelled as the pass's other series are: by the stream's key.
	a.Metrics.ObserveTriggered(acct.Name, s.Source, results[len(results)-1].Stream)
	daemon.Report(acct.Log, a.Metrics, results)
	return out
}

// webhookHandler is the receiver and the bell `syncd run` serves with
// sync.webhooks set, and the Stop that ends the bell.
func (a *App) webhookHandler(ctx context.Context) (http.Handler, func()) {
	w := a.Cfg.Sync.Webhooks
	if !w.Enabled() {
		return nil, nil
	}
	bell := &webhook.Bell{
		Lag: a.Cfg.Sync.SafetyLag.D(), Debounce: w.Debounce.D(), Retry: time.Second,
		Run: a.triggeredPass, Now: a.opts.Now,
		Latency: func(s webhook.Stream, d time.Duration) { a.Metrics.ObserveWebhookLatency(s.Source, d) },
		Log:     a.Log.Named("webhook"),
	}
	bell.Start(ctx)
	ring := func(s webhook.Stream, at, announced time.Time) bool {
		if acct := a.Account(s.Account); acct != nil && s.Stream != "" {
			acct.noteDelivery(s.Stream, at)
		}
		return bell.Ring(s, at, announced)
	}
	rc := &webhook.Receiver{
		Secret: a.webhookSecret(), MaxBody: w.MaxBody, Endpoints: webhookEndpoints(a.sources),
		Lookup: a.webhookPresence, Ring: ring, Observe: a.Metrics.ObserveDelivery,
		Now: a.opts.Now, Log: a.Log.Named("webhook"),
	}
	a.Log.Info("receiving webhooks", zap.String(logkey.Path, webhook.PathPrefix), zap.Duration(logkey.Debounce, w.Debounce.D()),
		zap.Duration(logkey.SafetyLag, a.Cfg.Sync.SafetyLag.D()))
	return rc, bell.Close
}

// WebhookRow is one registered webhook, as `syncd webhooks` lists it.
type WebhookRow = status.Webhook

// WebhooksView reads the webhooks registered for the configured accounts
// (current's) from store: what /status?webhooks=1 and `syncd webhooks`
// show.
func WebhooksView(current func() *config.Config, store state.Store) func(ctx context.Context) ([]WebhookRow, error) {
	return func(ctx context.Context) ([]WebhookRow, error) {
		var rows []WebhookRow
		for _, ac := range current().AccountList() {
			rec, err := LoadWebhooks(ctx, store, ac.Namespace())
			if err != nil {
				return nil, fmt.Errorf("account %s: %w", ac.Name, err)
			}
			rows = append(rows, WebhookRows(ac.Name, rec)...)
		}
		return rows, nil
	}
}

// WebhookRows are the webhooks of a record, sorted: those of one stream
// each by source and stream, then those of all an account's streams of a
// source, named as the source names what they cover (the bookings).
func WebhookRows(account string, w Webhooks) []WebhookRow {
	var out []WebhookRow
	for _, e := range webhookEntries(account, w, sourceList()) {
		out = append(out, e.row)
	}
	return out
}

// webhookEntry is a row of the record and where the record keeps it.
type webhookEntry struct {
	row            WebhookRow
	source, stream string // stream "": the source's account-wide webhook
}

// webhookEntries are WebhookRows with where the record keeps each; list
// are the sources, which name what an account-wide webhook covers.
func webhookEntries(account string, w Webhooks, list []source.Source) []webhookEntry {
	var out []webhookEntry
	for src, m := range w.Streams {
		for stream, r := range m {
			out = append(out, webhookEntry{row: WebhookRow{Account: account, Source: src, Stream: stream, ID: r.ID, Registered: r.Registered}, source: src, stream: stream})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].source != out[j].source {
			return out[i].source < out[j].source
		}
		return out[i].stream < out[j].stream
	})
	wide := slices.Sorted(maps.Keys(w.AccountWide))
	for _, src := range wide {
		r := w.AccountWide[src]
		covers := src // a source no longer listed: its name
		if ws := webhookSource(list, src); ws != nil && ws.Webhooks().Covers != "" {
			covers = ws.Webhooks().Covers
		}
		out = append(out, webhookEntry{row: WebhookRow{Account: account, Source: src, Stream: covers, ID: r.ID, Registered: r.Registered}, source: src})
	}
	return out
}

// RemoveWebhooks deletes every webhook syncd registered for the account at
// the services, and forgets those it deleted (or that were gone already).
// It returns the rows removed; a failure keeps the others in the record.
func (acct *Account) RemoveWebhooks(ctx context.Context) ([]WebhookRow, error) {
	acct.regMu.Lock()
	defer acct.regMu.Unlock()
	ns := acct.Cfg.Namespace()
	rec, err := LoadWebhooks(ctx, acct.app.Store, ns)
	if err != nil {
		return nil, err
	}
	var removed []WebhookRow
	var errs []error
	for _, e := range webhookEntries(acct.Name, rec, acct.app.sources) {
		row := e.row
		var derr error
		if r, ok := acct.sourceAccount(e.source).(source.WebhookRemover); ok {
			derr = r.RemoveWebhook(ctx, row.ID)
		} else {
			derr = fmt.Errorf("account %s no longer reads %s: its webhook %s stays registered; remove it at the service", acct.Name, row.Source, row.ID)
		}
		if derr != nil {
			errs = append(errs, fmt.Errorf("remove the webhook of %s %s: %w", row.Source, row.Stream, derr))
			continue
		}
		rec.forget(e.source, e.stream)
		removed = append(removed, row)
	}
	if err := SaveWebhooks(ctx, acct.app.Store, ns, rec); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// openSourceNamed is the account's opened source of that name among its
// other sources (the forms apart).
func (acct *Account) openSourceNamed(name string) (openSource, bool) {
	for _, src := range acct.sources {
		if src.name == name {
			return src, true
		}
	}
	return openSource{}, false
}
