package formsim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
)

// deliver posts each new submission to every webhook of the form, in the
// background: best effort, one attempt, bounded by Config.WebhookTimeout and
// by Close. The body is the envelope the service sends in practice:
// {"formId", "formName", "submission"}. Callers hold s.mu (which orders
// wg.Add before Close's Wait).
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
	if len(urls) == 0 {
		return
	}
	slices.Sort(urls) // map order is random; delivery order need not be
	view := f.view
	refs = slices.Clone(refs)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, ref := range refs {
			b := append([]byte(`{"formId":`), appendString(nil, view.id)...)
			b = append(b, `,"formName":`...)
			b = appendString(b, view.name)
			b = append(b, `,"submission":`...)
			b, _ = view.appendSubmission(b, ref, renderOpts{})
			b = append(b, '}')
			for _, u := range urls {
				ok := s.post(s.ctx, u, b)
				s.mu.Lock()
				if ok {
					s.stats.WebhooksDelivered++
				} else {
					s.stats.WebhookFailures++
				}
				s.mu.Unlock()
			}
		}
	}()
}

// post makes one delivery; it reports whether the receiver answered 2xx.
// The URL may carry a receiver's secret, so it is never logged.
func (s *Server) post(ctx context.Context, url string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hookClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
