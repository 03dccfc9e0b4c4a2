package schedsim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/syncd-dev/syncd/internal/simhook"
)

// User webhooks of API v2, as cal.com's source has them
// (apps/api/v2/src/modules/webhooks: webhooks.controller.ts,
// inputs/webhook.input.ts, outputs/webhook.output.ts and
// user-webhook.output.ts, user-webhooks.service.ts,
// guards/is-user-webhook-guard.ts; delivery in
// packages/features/webhooks/lib/sendPayload.ts):
//
//	POST   /v2/webhooks        WEBHOOK_WRITE  {"subscriberUrl", "triggers": [...], "active", "secret"?, "payloadTemplate"?}
//	                                          → 201 {"status":"success","data":{webhook}}
//	GET    /v2/webhooks        WEBHOOK_READ   ?skip&take (default 250) → {"status":"success","data":[...]}, the token user's only
//	GET    /v2/webhooks/{id}   WEBHOOK_READ   → {"status":"success","data":{webhook}}
//	DELETE /v2/webhooks/{id}   WEBHOOK_WRITE  → {"status":"success","data":{the deleted webhook}}
//
// where a webhook is {"id", "subscriberUrl", "triggers", "active",
// "payloadTemplate", "secret", "userId"}. As in the source:
//   - the id is a string (the Webhook table's id is a String, a UUID),
//     although the output DTO declares a number: clients must take both;
//   - the output exposes the secret the client set (null when none), so a
//     client must not log these answers;
//   - one webhook per (user, subscriberUrl): a second is 409 "Webhook with
//     this subscriber url already exists for this user";
//   - another user's webhook is 403 (the ownership guard refuses), an
//     unknown id 404.
//
// A delivery is POST subscriberUrl with Content-Type application/json, body
// {"triggerEvent", "createdAt", "payload"} and header X-Cal-Signature-256:
// the lowercase hex HMAC-SHA256 of the raw body keyed by the secret, or the
// literal "no-secret-provided" when the webhook has no secret. The payload
// is the CalendarEvent shape of sendPayload (uid, bookingId, status in
// capitals, startTime, endTime, organizer, attendees, ...), not the API's
// booking output: it has no updatedAt and calls the id bookingId. Events:
// BOOKING_CREATED (admin or churn creations), BOOKING_CANCELLED, and
// BOOKING_RESCHEDULED for the new booking (rescheduleUid names the old
// one; no BOOKING_CANCELLED is sent for it, as in Cal.com). Inactive
// webhooks and triggers not subscribed get nothing.
//
// Where the simulator differs: no PATCH, no payloadTemplate rendering (the
// template is stored and shown; deliveries keep the default body), loopback
// subscriber URLs are allowed (the real API refuses private addresses), no
// retries, and the faults of Config.WebhookFaults.

// Scopes of the webhook endpoints.
const (
	ScopeWebhookRead  = "WEBHOOK_READ"
	ScopeWebhookWrite = "WEBHOOK_WRITE"
)

// PathWebhooks is the user webhooks collection.
const PathWebhooks = "/v2/webhooks"

// SignatureHeader carries a delivery's signature.
const SignatureHeader = "X-Cal-Signature-256"

// NoSecretSignature is the signature header of a webhook without a secret.
const NoSecretSignature = "no-secret-provided"

// Triggers the simulator delivers.
const (
	TriggerBookingCreated     = "BOOKING_CREATED"
	TriggerBookingRescheduled = "BOOKING_RESCHEDULED"
	TriggerBookingCancelled   = "BOOKING_CANCELLED"
)

// knownTriggers are the WebhookTriggerEvents values a webhook may
// subscribe to; the simulator delivers only the three booking triggers.
var knownTriggers = []string{
	"BOOKING_CANCELLED", "BOOKING_CREATED", "BOOKING_RESCHEDULED", "BOOKING_REQUESTED", "BOOKING_REJECTED",
	"BOOKING_PAYMENT_INITIATED", "BOOKING_PAID", "BOOKING_NO_SHOW_UPDATED", "BOOKING_CONFIRMED",
	"BOOKING_COMPLETED", "BOOKING_REOPENED", "FORM_SUBMITTED", "MEETING_ENDED", "MEETING_STARTED",
	"RECORDING_READY", "INSTANT_MEETING", "RECORDING_TRANSCRIPTION_GENERATED", "OOO_CREATED",
	"AFTER_HOSTS_CAL_VIDEO_NO_SHOW", "AFTER_GUESTS_CAL_VIDEO_NO_SHOW", "FORM_SUBMITTED_NO_EVENT",
}

// Sign is the X-Cal-Signature-256 value of body for secret.
func Sign(secret string, body []byte) string {
	if secret == "" {
		return NoSecretSignature
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// webhook is one registration.
type webhook struct {
	id       string
	owner    int // index in Server.users
	url      string
	triggers []string
	active   bool
	secret   string
	template *string
}

// output is the webhook as the API shows it (UserWebhookOutputDto).
func (h *webhook) output(userID int64) map[string]any {
	var secret any
	if h.secret != "" {
		secret = h.secret
	}
	return map[string]any{
		"id": h.id, "subscriberUrl": h.url, "triggers": h.triggers, "active": h.active,
		"payloadTemplate": h.template, "secret": secret, "userId": userID,
	}
}

// Webhook is a registration as the admin endpoints show it: no secret,
// only whether one is set. URL may carry the receiver's own secret, so it
// belongs in admin output only, never in a log.
type Webhook struct {
	ID            string   `json:"id"`
	Username      string   `json:"username"`
	UserID        int64    `json:"userId"`
	SubscriberURL string   `json:"subscriberUrl"`
	Triggers      []string `json:"triggers"`
	Active        bool     `json:"active"`
	HasSecret     bool     `json:"hasSecret"`
}

func (s *Server) routeWebhooks() {
	s.mux.HandleFunc("POST "+PathWebhooks, s.api(ScopeWebhookWrite, s.handleCreateWebhook))
	s.mux.HandleFunc("GET "+PathWebhooks, s.api(ScopeWebhookRead, s.handleListWebhooks))
	s.mux.HandleFunc("GET "+PathWebhooks+"/{id}", s.api(ScopeWebhookRead, s.handleWebhook(false)))
	s.mux.HandleFunc("DELETE "+PathWebhooks+"/{id}", s.api(ScopeWebhookWrite, s.handleWebhook(true)))
}

func success(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

func (s *Server) handleCreateWebhook(w http.ResponseWriter, r *http.Request, g *grant) {
	var in struct {
		SubscriberURL   *string   `json:"subscriberUrl"`
		Triggers        *[]string `json:"triggers"`
		Active          *bool     `json:"active"`
		Secret          *string   `json:"secret"`
		PayloadTemplate *string   `json:"payloadTemplate"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil {
		apiError(w, r, http.StatusBadRequest, "BadRequestException", "body must be a JSON object")
		return
	}
	var bad []string
	if in.SubscriberURL == nil {
		bad = append(bad, "subscriberUrl must be a string")
	} else if u, err := url.Parse(*in.SubscriberURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad = append(bad, "subscriberUrl must be an absolute http(s) URL")
	}
	if in.Triggers == nil {
		bad = append(bad, "triggers must be an array")
	} else {
		for _, t := range *in.Triggers {
			if !slices.Contains(knownTriggers, t) {
				bad = append(bad, fmt.Sprintf("each value in triggers must be one of the following values: %s (got %q)", "BOOKING_CREATED, BOOKING_RESCHEDULED, BOOKING_CANCELLED, ...", t))
				break
			}
		}
	}
	if in.Active == nil {
		bad = append(bad, "active must be a boolean value")
	}
	if len(bad) > 0 {
		apiError(w, r, http.StatusBadRequest, "BadRequestException", bad[0])
		return
	}
	s.mu.Lock()
	for _, h := range s.hooks {
		if h.owner == g.user && h.url == *in.SubscriberURL {
			s.mu.Unlock()
			apiError(w, r, http.StatusConflict, "ConflictException", "Webhook with this subscriber url already exists for this user")
			return
		}
	}
	h := &webhook{id: s.newHookID(), owner: g.user, url: *in.SubscriberURL, triggers: slices.Clone(*in.Triggers),
		active: *in.Active, template: in.PayloadTemplate}
	if in.Secret != nil {
		h.secret = *in.Secret
	}
	s.hooks = append(s.hooks, h)
	out := h.output(s.users[g.user].ID)
	s.mu.Unlock()
	success(w, http.StatusCreated, out)
}

// newHookID is a version 4 UUID from the webhook source, which is seeded
// on its own so registrations do not shift the bookings' draws. Callers
// hold mu.
func (s *Server) newHookID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(s.hookRnd.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func (s *Server) handleListWebhooks(w http.ResponseWriter, r *http.Request, g *grant) {
	skip, take := 0, 250
	for _, p := range []struct {
		name string
		dst  *int
		min  int
	}{{"skip", &skip, 0}, {"take", &take, 1}} {
		if v := r.URL.Query().Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.min {
				apiError(w, r, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("%s must be a number of at least %d", p.name, p.min))
				return
			}
			*p.dst = n
		}
	}
	s.mu.Lock()
	var mine []map[string]any
	for _, h := range s.hooks {
		if h.owner == g.user {
			mine = append(mine, h.output(s.users[g.user].ID))
		}
	}
	s.mu.Unlock()
	lo, hi := min(skip, len(mine)), min(skip+take, len(mine))
	success(w, http.StatusOK, append([]map[string]any{}, mine[lo:hi]...))
}

// ownedHook finds the webhook of the path for the token's user: 404 when
// unknown, 403 when another user's (the ownership guard refuses).
func (s *Server) ownedHook(w http.ResponseWriter, r *http.Request, g *grant) (int, bool) {
	id := r.PathValue("id")
	i := slices.IndexFunc(s.hooks, func(h *webhook) bool { return h.id == id })
	switch {
	case i < 0:
		apiError(w, r, http.StatusNotFound, "NotFoundException", fmt.Sprintf("Webhook with id %s not found", id))
		return 0, false
	case s.hooks[i].owner != g.user:
		apiError(w, r, http.StatusForbidden, "ForbiddenException", "Forbidden resource")
		return 0, false
	}
	return i, true
}

// handleWebhook answers GET /v2/webhooks/{id}, or DELETE when del: both
// answer the webhook (the deleted one for DELETE).
func (s *Server) handleWebhook(del bool) func(w http.ResponseWriter, r *http.Request, g *grant) {
	return func(w http.ResponseWriter, r *http.Request, g *grant) {
		s.mu.Lock()
		i, ok := s.ownedHook(w, r, g)
		if !ok {
			s.mu.Unlock()
			return
		}
		out := s.hooks[i].output(s.users[g.user].ID)
		if del {
			s.hooks = slices.Delete(s.hooks, i, i+1)
		}
		s.mu.Unlock()
		success(w, http.StatusOK, out)
	}
}

// emit delivers trigger for booking b to every active webhook of its host
// subscribed to it. Callers hold mu.
func (s *Server) emit(trigger string, b *booking, at time.Time, from *booking) {
	if len(s.hooks) == 0 {
		return
	}
	var body []byte
	for _, h := range s.hooks {
		if h.owner != b.owner || !h.active || !slices.Contains(h.triggers, trigger) {
			continue
		}
		if body == nil {
			body, _ = json.Marshal(map[string]any{
				"triggerEvent": trigger,
				"createdAt":    stamp(at),
				"payload":      s.eventPayload(b, from),
			})
		}
		secret := h.secret
		s.hooksOut.Send(simhook.Message{URL: h.url, Body: body, Header: func(body []byte, forged bool) http.Header {
			key := secret
			if forged {
				key = "forged-" + secret // a delivery nobody who knows the secret signed
			}
			return http.Header{"Content-Type": {"application/json"}, SignatureHeader: {Sign(key, body)}}
		}})
	}
}

// eventPayload is b in the CalendarEvent shape of Cal.com's webhook
// payloads; from is the booking a rescheduled one replaces. Callers hold
// mu.
func (s *Server) eventPayload(b *booking, from *booking) map[string]any {
	u := s.users[b.owner].User
	et := eventTypes[0]
	for _, e := range eventTypes {
		if e.id == b.EventTypeID {
			et = e
		}
	}
	atts := make([]map[string]any, len(b.Attendees))
	for i, a := range b.Attendees {
		atts[i] = map[string]any{"name": a.Name, "email": a.Email, "timeZone": a.TimeZone,
			"language": map[string]string{"locale": a.Language}, "utcOffset": utcOffset(a.TimeZone, b.Start)}
	}
	status := map[string]string{"accepted": "ACCEPTED", "cancelled": "CANCELLED", "rejected": "REJECTED", "pending": "PENDING"}[b.Status]
	p := map[string]any{
		"type": b.EventTypeSlug, "title": b.Title, "description": b.Description, "additionalNotes": b.Description,
		"customInputs": map[string]any{}, "startTime": b.Start.UTC().Format(time.RFC3339), "endTime": b.End.UTC().Format(time.RFC3339),
		"organizer": map[string]any{"id": u.ID, "name": u.Name, "email": u.Email, "username": u.Username, "timeZone": u.TimeZone,
			"language": map[string]string{"locale": "en"}, "timeFormat": "h:mma", "utcOffset": utcOffset(u.TimeZone, b.Start)},
		"responses": b.Responses, "userFieldsResponses": map[string]any{}, "attendees": atts, "location": b.Location,
		"destinationCalendar": nil, "hideCalendarNotes": false, "requiresConfirmation": nil, "eventTypeId": b.EventTypeID,
		"seatsShowAttendees": true, "seatsPerTimeSlot": nil, "uid": b.UID, "appsStatus": []any{},
		"eventTitle": et.title, "eventDescription": "", "price": 0, "currency": "usd", "length": et.length,
		"bookingId": b.ID, "metadata": map[string]any{}, "status": status,
	}
	if b.Metadata != nil {
		p["metadata"] = b.Metadata
	}
	if b.Status == "cancelled" {
		p["cancellationReason"] = b.CancellationReason
		p["cancelledBy"] = b.CancelledBy
	}
	if from != nil {
		p["rescheduleId"] = from.ID
		p["rescheduleUid"] = from.UID
		p["rescheduleStartTime"] = from.Start.UTC().Format(time.RFC3339)
		p["rescheduleEndTime"] = from.End.UTC().Format(time.RFC3339)
		p["rescheduledBy"] = b.RescheduledBy
	}
	return p
}

// utcOffset is the zone's offset in minutes at t, 0 when the zone is
// unknown to this machine.
func utcOffset(zone string, t time.Time) int {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return 0
	}
	_, off := t.In(loc).Zone()
	return off / 60
}

// Webhooks lists every registration, of every user, in creation order.
func (s *Server) Webhooks() []Webhook { return s.webhooks(anyUser) }

func (s *Server) webhooks(owner int) []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Webhook{}
	for _, h := range s.hooks {
		if owner != anyUser && h.owner != owner {
			continue
		}
		u := s.users[h.owner]
		out = append(out, Webhook{ID: h.id, Username: u.Username, UserID: u.ID, SubscriberURL: h.url,
			Triggers: slices.Clone(h.triggers), Active: h.active, HasSecret: h.secret != ""})
	}
	return out
}

// ForgetWebhook deletes a registration behind its owner's back, as the
// service losing it: deliveries stop and the owner is not told. It
// reports whether the webhook existed.
func (s *Server) ForgetWebhook(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.hooks)
	s.hooks = slices.DeleteFunc(s.hooks, func(h *webhook) bool { return h.id == id })
	return len(s.hooks) < n
}

// SetWebhookFaults replaces the delivery faults for deliveries from now on.
func (s *Server) SetWebhookFaults(f simhook.Faults) error { return s.hooksOut.SetFaults(f) }

// WebhookFaults returns the delivery faults.
func (s *Server) WebhookFaults() simhook.Faults { return s.hooksOut.Faults() }

// WebhookStats counts deliveries and their injected faults.
func (s *Server) WebhookStats() simhook.Stats { return s.hooksOut.Stats() }

// DrainWebhooks waits until every delivery so far has been attempted and
// answered (delays included), or ctx ends.
func (s *Server) DrainWebhooks(ctx context.Context) error { return s.hooksOut.Drain(ctx) }

// Close ends webhook deliveries in flight (and their delays) and waits for
// them. It does not stop an http.Server serving s.
func (s *Server) Close() error {
	s.hooksOut.Close()
	return nil
}

// Created is a booking CreateBooking made.
type Created struct {
	UID       string    `json:"uid"`
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	CreatedAt time.Time `json:"createdAt"` // Config.Now's clock, ms precision
}

// CreateBooking adds a booking of the default user now, delivers
// BOOKING_CREATED, and returns it with its creation time, so a test can
// measure latency from creation to warehouse.
func (s *Server) CreateBooking() Created { return s.createBooking(0) }

// CreateBooking adds a booking of the user now (see Server.CreateBooking).
func (a *UserAdmin) CreateBooking() Created { return a.s.createBooking(a.u) }

func (s *Server) createBooking(owner int) Created {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.newBooking(s.tick(), owner)
	return Created{UID: b.UID, ID: b.ID, Username: s.users[owner].Username, CreatedAt: b.CreatedAt}
}

// newBooking makes a booking at t and announces it. Callers hold mu.
func (s *Server) newBooking(t time.Time, owner int) *booking {
	b := s.makeBooking(t, owner)
	s.emit(TriggerBookingCreated, b, t, nil)
	return b
}

// routeWebhookAdmin serves the webhook admin endpoints:
//
//	GET    /_admin/webhooks                    every registration (no secrets)
//	GET    /_admin/users/{username}/webhooks   one user's
//	DELETE /_admin/webhooks/{id}               forget one behind its owner's back: 204, 404
//	GET    /_admin/webhook-faults              delivery faults
//	PUT    /_admin/webhook-faults              replace them: {"drop_rate","duplicate_rate","delay_min",
//	                                           "delay_max","bad_signature_rate"} (400 names a bad knob)
//	GET    /_admin/webhook-stats               delivery counters (also "webhooks" in /_admin/stats)
//
// POST /_admin/bookings and /_admin/users/{username}/bookings create a
// booking now and answer {"uid", "id", "username", "createdAt"}.
func (s *Server) routeWebhookAdmin() {
	s.mux.HandleFunc("GET /_admin/webhooks", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Webhooks()) })
	s.mux.HandleFunc("GET /_admin/users/{username}/webhooks", func(w http.ResponseWriter, r *http.Request) {
		i, err := s.userIndex(r.PathValue("username"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, s.webhooks(i))
	})
	s.mux.HandleFunc("DELETE /_admin/webhooks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !s.ForgetWebhook(r.PathValue("id")) {
			http.Error(w, "no webhook "+r.PathValue("id"), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("GET /_admin/webhook-faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.WebhookFaults()) })
	s.mux.HandleFunc("PUT /_admin/webhook-faults", func(w http.ResponseWriter, r *http.Request) {
		var f simhook.Faults
		err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&f)
		if err == nil {
			err = s.SetWebhookFaults(f)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("GET /_admin/webhook-stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.WebhookStats()) })
}
