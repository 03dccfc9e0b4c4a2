package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
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
// never their URLs (a forms URL holds its path token).
type Webhooks struct {
	Forms      map[string]Registered `json:"forms,omitempty"`
	Scheduling *Registered           `json:"scheduling,omitempty"`
}

// Registered is one webhook syncd registered.
type Registered struct {
	// ID is the service's id: a number for the Forms API, a string (a
	// UUID) for the scheduling API.
	ID string `json:"id"`
	// URL identifies the URL registered (a hash: the URL holds the token):
	// a changed public_url or secret registers again.
	URL        string    `json:"url"`
	Registered time.Time `json:"registered"`
}

func urlHash(u string) string {
	h := sha256.Sum256([]byte(u))
	return hex.EncodeToString(h[:8])
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
	if w.Forms == nil {
		w.Forms = map[string]Registered{}
	}
	return w, nil
}

// SaveWebhooks stores the account's webhook record durably (none: deleted).
func SaveWebhooks(ctx context.Context, store state.Store, namespace string, w Webhooks) error {
	var raw []byte
	if len(w.Forms) > 0 || w.Scheduling != nil {
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
// sure the account's forms (those jobs lists) and bookings have their
// webhooks: a failure to register is logged, and the pass polls as always.
func (acct *Account) withWebhooks(jobs func(context.Context) ([]poller.Job, error), bookings bool) func(context.Context) []poller.Result {
	if !acct.app.Cfg.Sync.Webhooks.Enabled() {
		return func(ctx context.Context) []poller.Result { return acct.Pass(ctx, jobs, bookings) }
	}
	return func(ctx context.Context) []poller.Result {
		listed := func(ctx context.Context) ([]poller.Job, error) {
			list, err := jobs(ctx)
			if err == nil {
				acct.noteForms(list)
				acct.registerForms(ctx, list)
			}
			return list, err
		}
		if bookings && acct.Scheduling != nil {
			acct.registerScheduling(ctx)
		}
		start := time.Now()
		results := acct.Pass(ctx, listed, bookings)
		acct.reregisterSilent(ctx, results, start)
		return results
	}
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
	var silent []poller.Job
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
			silent = append(silent, acct.Job(form))
		}
	}
	acct.seenMu.Unlock()
	if len(silent) == 0 {
		return
	}
	for _, j := range silent {
		acct.Log.Info("a scheduled pass found new submissions that no delivery announced since the previous one: registering the form's webhook again",
			zap.String(logkey.Stream, j.Stream))
	}
	acct.registerFormsAgain(ctx, silent)
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

// registerForms registers a webhook for each form of list that has none
// (or one with another URL: public_url or the secret changed). The Forms
// API cannot list webhooks: the state's record is what syncd knows.
func (acct *Account) registerForms(ctx context.Context, list []poller.Job) {
	acct.registerFormsWith(ctx, list, false)
}

// registerFormsAgain registers new webhooks for the forms of list and
// deletes their previous ones.
func (acct *Account) registerFormsAgain(ctx context.Context, list []poller.Job) {
	acct.registerFormsWith(ctx, list, true)
}

func (acct *Account) registerFormsWith(ctx context.Context, list []poller.Job, again bool) {
	client := acct.formsClient()
	if client == nil || len(list) == 0 {
		return
	}
	acct.regMu.Lock()
	defer acct.regMu.Unlock()
	ns := acct.Cfg.Namespace()
	rec, err := LoadWebhooks(ctx, acct.app.Store, ns)
	if err != nil {
		acct.Log.Warn("webhooks not registered; polling goes on", zap.Error(err))
		return
	}
	w := acct.app.Cfg.Sync.Webhooks
	for _, job := range list {
		u := formsource.WebhookURL(w.PublicURL, acct.app.webhookSecret(), acct.Name, job.Stream)
		old, ok := rec.Forms[job.Stream]
		if ok && old.URL == urlHash(u) && !again {
			continue
		}
		id, err := client.CreateWebhook(ctx, job.Stream, u)
		if err != nil {
			acct.Log.Warn("registering the form's webhook failed; its submissions arrive by polling, and the next pass tries again",
				zap.String(logkey.Stream, job.Stream), zap.Error(err))
			continue
		}
		rec.Forms[job.Stream] = Registered{ID: strconv.FormatInt(id, 10), URL: urlHash(u), Registered: time.Now().UTC()}
		if err := SaveWebhooks(ctx, acct.app.Store, ns, rec); err != nil {
			acct.Log.Warn("the form's webhook was registered but could not be recorded; removing it", zap.String(logkey.Stream, job.Stream), zap.Error(err))
			_ = client.DeleteWebhook(ctx, id)
			return
		}
		acct.Log.Info("webhook registered", zap.String(logkey.Stream, job.Stream), zap.Int64(logkey.WebhookID, id))
		if ok {
			// The old URL no longer verifies, or the webhook went silent:
			// remove it (a lost one is gone already).
			if err := deleteFormsWebhook(ctx, client, old.ID); err != nil {
				acct.Log.Warn("removing the form's previous webhook failed", zap.String(logkey.Stream, job.Stream), zap.String(logkey.WebhookID, old.ID), zap.Error(err))
			}
		}
	}
}

// registerScheduling makes sure the account's scheduling user has syncd's
// webhook: listed by the API (it re-registers one that disappeared), with
// syncd's URL. A sign-in without WEBHOOK_WRITE gets one clear line per
// process, and the bookings are polled as always.
func (acct *Account) registerScheduling(ctx context.Context) {
	c := acct.Scheduling.Client
	acct.regMu.Lock()
	defer acct.regMu.Unlock()
	if acct.noHookScope {
		return
	}
	ns := acct.Cfg.Namespace()
	rec, err := LoadWebhooks(ctx, acct.app.Store, ns)
	if err != nil {
		acct.Log.Warn("webhooks not registered; polling goes on", zap.Error(err))
		return
	}
	u := scheduling.WebhookURL(acct.app.Cfg.Sync.Webhooks.PublicURL, acct.Name)
	signing := scheduling.SigningSecret(acct.app.webhookSecret(), acct.Name)
	// The URL does not change with the secret: the record's hash covers both.
	ident := urlHash(u + "\x00" + signing)
	if old := rec.Scheduling; old != nil && old.URL == ident {
		list, err := c.ListWebhooks(ctx)
		if err == nil && slices.ContainsFunc(list, func(h scheduling.Webhook) bool { return h.ID == old.ID && h.SubscriberURL == u && h.Active }) {
			return
		}
		var se *oauth.ScopeError
		if err != nil && !errors.As(err, &se) {
			acct.Log.Warn("listing the scheduling webhooks failed; the next pass tries again", zap.Error(err))
			return
		}
		if err != nil {
			return // no WEBHOOK_READ: the record is all syncd can know
		}
		acct.Log.Info("the bookings webhook disappeared; registering it again", zap.String(logkey.WebhookID, old.ID))
		_ = c.DeleteWebhook(ctx, old.ID) // inactive, or another URL: gone either way
	} else if old != nil {
		_ = c.DeleteWebhook(ctx, old.ID) // public_url or the secret changed
	}
	id, err := c.CreateWebhook(ctx, u, signing)
	var ae *scheduling.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		// The user has a webhook at this URL that the state does not know
		// (a state restored or reset): its secret may be another's; it is
		// replaced.
		if list, lerr := c.ListWebhooks(ctx); lerr == nil {
			for _, h := range list {
				if h.SubscriberURL == u {
					_ = c.DeleteWebhook(ctx, h.ID)
				}
			}
			id, err = c.CreateWebhook(ctx, u, signing)
		}
	}
	var se *oauth.ScopeError
	if errors.As(err, &se) {
		acct.noHookScope = true
		acct.Log.Warn("the scheduling sign-in lacks WEBHOOK_WRITE: bookings arrive by polling only; sign in again with that scope for webhooks", zap.String(logkey.Account, acct.Name))
		return
	}
	if err != nil {
		acct.Log.Warn("registering the bookings webhook failed; bookings arrive by polling, and the next pass tries again", zap.Error(err))
		return
	}
	rec.Scheduling = &Registered{ID: id, URL: ident, Registered: time.Now().UTC()}
	if err := SaveWebhooks(ctx, acct.app.Store, ns, rec); err != nil {
		acct.Log.Warn("the bookings webhook was registered but could not be recorded; removing it", zap.Error(err))
		_ = c.DeleteWebhook(ctx, id)
		return
	}
	acct.Log.Info("webhook registered", zap.String(logkey.Source, "scheduling"), zap.String(logkey.WebhookID, id))
}

// webhookPresence is where a delivery's stream is synced: Here when this
// process has the account open (it owns it) and the stream is one of its,
// Elsewhere when another replica of a shared state owns it.
func (a *App) webhookPresence(s webhook.Stream) webhook.Presence {
	has := func(acct *Account) bool {
		if s.Source == scheduling.Name {
			return acct.Scheduling != nil
		}
		return acct.Cfg.HasForms() || acct.Cfg.FormsOAuth
	}
	if acct := a.Account(s.Account); acct != nil {
		if !has(acct) || (s.Source == poller.SourceForms && !acct.hasForm(s.Stream)) {
			return webhook.Unknown
		}
		return webhook.Here
	}
	if !a.shared {
		return webhook.Unknown
	}
	for _, ac := range a.Current().AccountList() {
		if ac.Name == s.Account {
			if (s.Source == scheduling.Name && ac.Scheduling) || (s.Source == poller.SourceForms && !slices.Contains(ac.Exclude, s.Stream)) {
				return webhook.Elsewhere
			}
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
	if s.Source == scheduling.Name {
		if acct.Scheduling == nil {
			return webhook.Outcome{}
		}
		none := func(context.Context) ([]poller.Job, error) { return nil, nil }
		results = acct.Pass(ctx, none, true)
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
		if s.Source == poller.SourceForms && r.Source == poller.SourceForms && r.Stream != "" {
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
		if acct := a.Account(s.Account); acct != nil && s.Source == poller.SourceForms {
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

// WebhookRows are the webhooks of a record, sorted.
func WebhookRows(account string, w Webhooks) []WebhookRow {
	var out []WebhookRow
	for form, r := range w.Forms {
		out = append(out, WebhookRow{Account: account, Source: poller.SourceForms, Stream: form, ID: r.ID, Registered: r.Registered})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	if r := w.Scheduling; r != nil {
		out = append(out, WebhookRow{Account: account, Source: scheduling.Name, Stream: "bookings", ID: r.ID, Registered: r.Registered})
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
	for _, row := range WebhookRows(acct.Name, rec) {
		var derr error
		if r, ok := acct.sourceAccount(row.Source).(source.WebhookRemover); ok {
			derr = r.RemoveWebhook(ctx, row.ID)
		} else {
			derr = fmt.Errorf("account %s no longer reads %s: its webhook %s stays registered; remove it at the service", acct.Name, row.Source, row.ID)
		}
		if derr != nil {
			errs = append(errs, fmt.Errorf("remove the webhook of %s %s: %w", row.Source, row.Stream, derr))
			continue
		}
		if row.Source == scheduling.Name {
			rec.Scheduling = nil
		} else {
			delete(rec.Forms, row.Stream)
		}
		removed = append(removed, row)
	}
	if err := SaveWebhooks(ctx, acct.app.Store, ns, rec); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// deleteFormsWebhook deletes a Forms API webhook by its recorded id; one
// gone already is not an error (formsource.DeleteWebhook).
func deleteFormsWebhook(ctx context.Context, client *forms.Client, id string) error {
	return formsource.DeleteWebhook(ctx, client, id)
}
