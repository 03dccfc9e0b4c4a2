package formsim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/simhook"
)

// deliver hands each new submission to every webhook of the form, for
// delivery in the background (simhook: best effort, one attempt per copy,
// bounded by Config.WebhookTimeout and by Close, with the delivery faults).
// The body is the envelope the service sends in practice,
// {"formId", "formName", "submission"}; the bare shape (the submission
// alone, as the contract words it) goes out at Faults.BareRate. Callers
// hold s.mu.
func (s *Server) deliver(f *formState, refs []rowRef) {
	s.journalCreated(f, refs)
	if s.closed || len(refs) == 0 || len(s.hooks) == 0 {
		return
	}
	var urls []string
	for _, h := range s.hooks {
		if h.formID == f.view.id {
			urls = append(urls, h.url)
		}
	}
	slices.Sort(urls) // map order is random; the order of fault draws must not be
	for _, ref := range refs {
		if len(urls) == 0 {
			break
		}
		bare, _ := f.view.appendSubmission(nil, ref, renderOpts{})
		env := append([]byte(`{"formId":`), appendString(nil, f.view.id)...)
		env = append(env, `,"formName":`...)
		env = appendString(env, f.view.name)
		env = append(env, `,"submission":`...)
		env = append(append(env, bare...), '}')
		for _, u := range urls {
			s.hooksOut.Send(simhook.Message{URL: u, Body: env, Bare: bare})
		}
	}
}

// Webhook is a registration as the admin endpoints show it. URL may carry
// the receiver's secret: it belongs in admin output only, never in a log.
type Webhook struct {
	ID     int64  `json:"id"`
	FormID string `json:"formId"`
	URL    string `json:"url"`
}

// Webhooks lists the registered webhooks by id.
func (s *Server) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Webhook, 0, len(s.hooks))
	for id, h := range s.hooks {
		out = append(out, Webhook{ID: id, FormID: h.formID, URL: h.url})
	}
	slices.SortFunc(out, func(a, b Webhook) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ForgetWebhook deletes a registration behind its owner's back, as the
// service does when it loses one: deliveries stop and the owner is not
// told. It reports whether the webhook existed.
func (s *Server) ForgetWebhook(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hooks[id]
	delete(s.hooks, id)
	return ok
}

// SetWebhookFaults replaces the delivery faults for deliveries from now on.
func (s *Server) SetWebhookFaults(f simhook.Faults) error { return s.hooksOut.SetFaults(f) }

// WebhookFaults returns the delivery faults.
func (s *Server) WebhookFaults() simhook.Faults { return s.hooksOut.Faults() }

// DrainWebhooks waits until every delivery so far has been attempted and
// answered (delays included), or ctx ends.
func (s *Server) DrainWebhooks(ctx context.Context) error { return s.hooksOut.Drain(ctx) }

// Submitted is a submission SubmitNow created.
type Submitted struct {
	FormID         string    `json:"formId"`
	SubmissionID   string    `json:"submissionId"`
	SubmissionTime time.Time `json:"submissionTime"` // creation time, ms precision, Config.Now's clock
}

// SubmitNow adds one finished submission to the form at Config.Now and
// delivers it to the form's webhooks, as a person submitting the form
// does; the time lets a test measure latency from creation to warehouse.
func (s *Server) SubmitNow(formID string) (Submitted, error) {
	now := time.UnixMilli(s.nowMs()).UTC()
	ids, err := s.Insert(formID, now)
	if err != nil {
		return Submitted{}, err
	}
	return Submitted{FormID: formID, SubmissionID: ids[0], SubmissionTime: now}, nil
}

// AdminPrefix prefixes the simulator's admin endpoints, outside BasePath
// and without authentication (a loopback test tool):
//
//	GET    /_admin/webhooks                    registrations [{"id","formId","url"}]
//	DELETE /_admin/webhooks/{id}               forget one behind the owner's back: 204, 404
//	GET    /_admin/webhook-faults              delivery faults
//	PUT    /_admin/webhook-faults              replace them: {"drop_rate","duplicate_rate",
//	                                           "delay_min","delay_max","bare_rate"} (400 names a bad knob)
//	GET    /_admin/stats                       counters, deliveries under "Webhooks"
//	POST   /_admin/forms/{formId}/submissions  one submission now, delivered:
//	                                           201 {"formId","submissionId","submissionTime"}
//	POST   /_admin/forms/{formId}/submissions/{submissionId}/edit
//	                                           edit one as a person does: its lastUpdatedAt
//	                                           moves to now, its submissionTime stays: 204, 404
//
// Multi serves the same for each account under /_admin/accounts/{apiKey}/,
// and PUT /_admin/webhook-faults there sets every account's.
const AdminPrefix = "/_admin/"

func (s *Server) routeAdmin() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_admin/webhooks", func(w http.ResponseWriter, _ *http.Request) { adminJSON(w, http.StatusOK, s.Webhooks()) })
	mux.HandleFunc("DELETE /_admin/webhooks/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			adminError(w, http.StatusBadRequest, "webhook id must be a number, as /webhook/create returned it")
			return
		}
		if !s.ForgetWebhook(id) {
			adminError(w, http.StatusNotFound, "no webhook "+strconv.FormatInt(id, 10))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_admin/webhook-faults", func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusOK, s.WebhookFaults())
	})
	mux.HandleFunc("PUT /_admin/webhook-faults", func(w http.ResponseWriter, r *http.Request) {
		f, err := readFaults(r)
		if err == nil {
			err = s.SetWebhookFaults(f)
		}
		if err != nil {
			adminError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_admin/stats", func(w http.ResponseWriter, _ *http.Request) { adminJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("POST /_admin/forms/{formId}/submissions", func(w http.ResponseWriter, r *http.Request) {
		sub, err := s.SubmitNow(r.PathValue("formId"))
		if err != nil {
			adminError(w, http.StatusNotFound, err.Error())
			return
		}
		adminJSON(w, http.StatusCreated, sub)
	})
	mux.HandleFunc("POST /_admin/forms/{formId}/submissions/{submissionId}/edit", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Edit(r.PathValue("formId"), r.PathValue("submissionId")); err != nil {
			adminError(w, http.StatusNotFound, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// readFaults decodes a PUT /_admin/webhook-faults body.
func readFaults(r *http.Request) (simhook.Faults, error) {
	var f simhook.Faults
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("body must be a JSON object of webhook fault knobs: %w", err)
	}
	return f, nil
}

func adminJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		adminError(w, http.StatusInternalServerError, "encode: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func adminError(w http.ResponseWriter, status int, text string) {
	writeMsg(w, msg(status, strings.TrimSpace(text)), "")
}
