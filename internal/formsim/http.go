package formsim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// response is a handler's answer, written by ServeHTTP.
type response struct {
	status int
	body   []byte
	buf    *[]byte // pooled buffer behind body, returned after writing
	allow  string  // Allow header of a 405
}

func msg(status int, text string) response {
	b := append([]byte(`{"message":`), appendString(nil, text)...)
	return response{status: status, body: append(b, '}')}
}

func (s *Server) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

func (s *Server) putBuf(p *[]byte) {
	if cap(*p) > 8<<20 { // let an outsized buffer (a huge search page) go
		return
	}
	*p = (*p)[:0]
	s.bufs.Put(p)
}

// ServeHTTP answers the documented endpoints under BasePath, and the admin
// endpoints under AdminPrefix (webhook.go). Order of checks: path, API key
// (401), rate limit (429), injected faults, delays, then the endpoint
// itself.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		s.admin.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	s.mu.Unlock()

	rest, ok := strings.CutPrefix(r.URL.Path, BasePath+"/")
	if !ok {
		s.write(w, msg(http.StatusNotFound, "Not found"), "")
		return
	}
	if !s.authorized(r) {
		s.write(w, msg(http.StatusUnauthorized, "Unauthorized: missing or invalid API key"), "")
		return
	}
	s.mu.Lock()
	faults := s.faults
	s.mu.Unlock()
	if s.limiter != nil && !s.limiter.Allow() {
		s.mu.Lock()
		s.stats.RateLimited++
		s.mu.Unlock()
		s.write(w, msg(http.StatusTooManyRequests, "Rate limit exceeded"), retryAfter(faults.RetryAfter))
		return
	}
	read := r.Method == http.MethodGet
	s.mu.Lock()
	d := s.decide(&faults, read)
	s.mu.Unlock()
	if d.delay > 0 && !s.sleep(r.Context(), d.delay) {
		return // the client left; nobody reads an answer
	}
	switch {
	case d.status == http.StatusTooManyRequests:
		s.write(w, msg(d.status, "Rate limit exceeded"), retryAfter(faults.RetryAfter))
		return
	case d.status != 0:
		s.write(w, msg(d.status, http.StatusText(d.status)), "")
		return
	}
	resp := s.route(r, rest, &faults)
	if read && resp.status == http.StatusOK && (d.truncate || d.malformed) {
		s.mu.Lock()
		switch {
		case d.truncate && len(resp.body) > 1:
			resp.body = resp.body[:1+s.rng.IntN(len(resp.body)-1)]
			s.inject(FaultTruncated, true)
		case d.malformed:
			resp.body = []byte("<html><body><h1>502 Bad Gateway</h1><p>upstream sent garbage</p></body></html>")
			s.inject(FaultMalformed, true)
		}
		s.mu.Unlock()
	}
	s.write(w, resp, "")
}

func retryAfter(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func (s *Server) write(w http.ResponseWriter, resp response, retry string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(resp.body)))
	if retry != "" {
		h.Set("Retry-After", retry)
	}
	if resp.allow != "" {
		h.Set("Allow", resp.allow)
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body) // a client that left is not an error of ours
	if resp.buf != nil {
		s.putBuf(resp.buf)
	}
	s.mu.Lock()
	s.stats.ByStatus[resp.status]++
	s.mu.Unlock()
}

func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.APIKey)) == 1
}

// sleep waits d; false when the client went away first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
	case <-ctx.Done():
		return false
	}
	return true
}

func (s *Server) route(r *http.Request, rest string, f *Faults) response {
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if slices.Contains(parts, "") {
		return msg(http.StatusNotFound, "Not found")
	}
	method := func(allow string) (response, bool) {
		if slices.Contains(strings.Split(allow, ", "), r.Method) {
			return response{}, true
		}
		resp := msg(http.StatusMethodNotAllowed, "Method "+r.Method+" not allowed")
		resp.allow = allow
		return resp, false
	}
	switch {
	case len(parts) == 1 && parts[0] == "forms":
		if resp, ok := method("GET"); !ok {
			return resp
		}
		return s.listForms()
	case len(parts) == 2 && parts[0] == "forms":
		if resp, ok := method("GET"); !ok {
			return resp
		}
		return s.getForm(parts[1], f)
	case len(parts) == 3 && parts[0] == "forms" && parts[2] == "submissions":
		if resp, ok := method("GET, POST"); !ok {
			return resp
		}
		if r.Method == http.MethodPost {
			return s.createSubmissions(r, parts[1])
		}
		return s.listSubmissions(r.URL.Query(), parts[1], f)
	case len(parts) == 4 && parts[0] == "forms" && parts[2] == "submissions":
		if resp, ok := method("GET, DELETE"); !ok {
			return resp
		}
		if r.Method == http.MethodDelete {
			return s.deleteSubmission(parts[1], parts[3])
		}
		return s.getSubmission(r.URL.Query(), parts[1], parts[3], f)
	case len(parts) == 2 && parts[0] == "webhook" && (parts[1] == "create" || parts[1] == "delete"):
		if resp, ok := method("POST"); !ok {
			return resp
		}
		if parts[1] == "create" {
			return s.createWebhook(r)
		}
		return s.deleteWebhook(r)
	}
	return msg(http.StatusNotFound, "Not found")
}

func (s *Server) listForms() response {
	p := s.getBuf()
	b := append(*p, '[')
	s.mu.Lock()
	for i, f := range s.forms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"formId":`...)
		b = appendString(b, f.view.id)
		b = append(b, `,"name":`...)
		b = appendString(b, f.view.name)
		b = append(b, `,"tags":[`...)
		for j, t := range f.tags {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t)
		}
		b = append(b, "]}"...)
	}
	s.mu.Unlock()
	b = append(b, ']')
	*p = b
	return response{status: http.StatusOK, body: b, buf: p}
}

func (s *Server) getForm(formID string, fl *Faults) response {
	s.mu.Lock()
	f := s.byID[formID]
	if f == nil {
		s.mu.Unlock()
		return msg(http.StatusNotFound, "Form not found")
	}
	s.stats.MetadataReads++
	f.metaReads++
	if n := int64(fl.MetadataChurnEvery); n > 0 && f.metaReads > 1 && (f.metaReads-1)%n == 0 {
		s.churnMetadata(f)
	}
	view := f.view
	s.mu.Unlock()
	b, err := json.Marshal(view.meta)
	if err != nil { // a forms.Form always marshals; this is a bug
		return msg(http.StatusInternalServerError, "encode form: "+err.Error())
	}
	return response{status: http.StatusOK, body: b}
}

// listParams are the parsed query of GET /forms/{formId}/submissions.
type listParams struct {
	limit, offset int
	lo, hi        int64 // submission time range [lo, hi), Unix ms
	mask          classMask
	desc          bool
	editLink      bool
	search        string
}

func (s *Server) parseList(q url.Values) (listParams, error) {
	p := listParams{limit: 50, lo: minTime, hi: maxTime, mask: 1 << classFinished}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 150 {
			return p, errors.New("limit must be an integer between 1 and 150")
		}
		p.limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, errors.New("offset must be a non-negative integer")
		}
		p.offset = n
	}
	if v := q.Get("afterDate"); v != "" {
		t, err := parseDate(v)
		if err != nil {
			return p, errors.New("afterDate must be a date-time like 2024-01-31T12:00:00.000Z")
		}
		if p.lo = floorMs(t) + 1; s.cfg.InclusiveDates {
			p.lo = ceilMs(t)
		}
	}
	if v := q.Get("beforeDate"); v != "" {
		t, err := parseDate(v)
		if err != nil {
			return p, errors.New("beforeDate must be a date-time like 2024-01-31T12:00:00.000Z")
		}
		if p.hi = ceilMs(t); s.cfg.InclusiveDates {
			p.hi = floorMs(t) + 1
		}
	}
	preview, err := parseBool(q, "includePreview")
	if err != nil {
		return p, err
	}
	switch q.Get("status") {
	case "", "finished":
		if preview {
			p.mask |= 1 << classPreview
		}
	case "in_progress":
		p.mask = 1 << classInProgress
	default:
		return p, errors.New("status must be finished or in_progress")
	}
	switch q.Get("sort") {
	case "", "asc":
	case "desc":
		p.desc = true
	default:
		return p, errors.New("sort must be asc or desc")
	}
	if p.editLink, err = parseBool(q, "includeEditLink"); err != nil {
		return p, err
	}
	p.search = q.Get("search")
	return p, nil
}

// parseDate accepts the documented layout first, then any RFC 3339 form.
func parseDate(v string) (time.Time, error) {
	if t, err := time.Parse(forms.DateLayout, v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

func parseBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New(name + " must be true or false")
	}
	return b, nil
}

func (s *Server) listSubmissions(q url.Values, formID string, fl *Faults) response {
	p, err := s.parseList(q)
	if err != nil {
		return msg(http.StatusBadRequest, err.Error())
	}
	opts := renderOpts{editLink: p.editLink, badRate: fl.BadValueRate}
	var (
		view  *formView
		refs  []rowRef
		total int
	)
	s.mu.Lock()
	f := s.byID[formID]
	if f == nil {
		s.mu.Unlock()
		return msg(http.StatusNotFound, "Form not found")
	}
	view = f.view
	if p.search == "" {
		total = f.rows.countRange(p.mask, p.lo, p.hi)
		start, n := pageWindow(total, p.offset, p.limit, p.desc)
		recs := f.rows.page(make([]rec, 0, n), p.mask, p.lo, p.hi, start, n)
		refs = make([]rowRef, len(recs))
		for i, r := range recs {
			refs[i] = f.ref(r)
		}
	} else {
		refs, total = s.search(f, view, &p, opts) // releases and retakes mu
	}
	if p.desc {
		slices.Reverse(refs)
	}
	s.journalPage(f, q, &p, refs)
	s.stats.PagesServed++
	s.stats.SubmissionsServed += int64(len(refs))
	s.changeWhilePaging(f, fl)
	s.mu.Unlock()

	buf := s.getBuf()
	b := append(*buf, `{"responses":[`...)
	bad := 0
	for i, ref := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		var n int
		b, n = view.appendSubmission(b, ref, opts)
		bad += n
	}
	b = append(b, `],"totalResponses":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"pageCount":`...)
	b = strconv.AppendInt(b, int64((total+p.limit-1)/p.limit), 10)
	b = append(b, '}')
	*buf = b
	if bad > 0 {
		s.bad.Add(int64(bad))
	}
	return response{status: http.StatusOK, body: b, buf: buf}
}

// pageWindow turns (offset, limit, order) into an ascending skip and count:
// a descending page is the mirror image of an ascending one.
func pageWindow(total, offset, limit int, desc bool) (skip, n int) {
	if offset >= total {
		return 0, 0
	}
	n = min(limit, total-offset)
	if desc {
		return total - offset - n, n
	}
	return offset, n
}

// search filters the rows in range by the text of their answers. The rows
// are snapshotted under mu and matched outside it (matching renders every
// candidate's answers); the caller holds mu on entry and on return.
func (s *Server) search(f *formState, view *formView, p *listParams, opts renderOpts) ([]rowRef, int) {
	var cands []rowRef
	f.rows.walk(p.mask, p.lo, p.hi, 0, func(r rec, _ *block) bool {
		cands = append(cands, f.ref(r))
		return true
	}, false)
	s.mu.Unlock()

	needle := foldASCII(nil, appendStringBody(nil, p.search))
	var text, folded []byte
	matched := cands[:0]
	for _, ref := range cands {
		seed := view.rowSeed(ref.r.ord)
		rr := newRng(seed)
		c := valueCtx{t: ref.r.t, who: person{rr.intn(len(firstNames)), rr.intn(len(lastNames))}}
		text, _ = view.appendQuestions(text[:0], ref, opts, &c, seed, true)
		folded = foldASCII(folded[:0], text)
		if bytes.Contains(folded, needle) {
			matched = append(matched, ref)
		}
	}
	start, n := pageWindow(len(matched), p.offset, p.limit, p.desc)
	page := slices.Clone(matched[start : start+n])

	s.mu.Lock()
	for i := range page { // edits may have happened meanwhile
		page[i].updated = f.edited[page[i].r.ord]
	}
	return page, len(matched)
}

// foldASCII appends src with A-Z lowered: search ignores ASCII case.
func foldASCII(dst, src []byte) []byte {
	for _, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func (s *Server) getSubmission(q url.Values, formID, id string, fl *Faults) response {
	editLink, err := parseBool(q, "includeEditLink")
	if err != nil {
		return msg(http.StatusBadRequest, err.Error())
	}
	s.mu.Lock()
	f := s.byID[formID]
	if f == nil {
		s.mu.Unlock()
		return msg(http.StatusNotFound, "Form not found")
	}
	ref, ok := s.lookup(f, id)
	view := f.view
	s.mu.Unlock()
	if !ok {
		return msg(http.StatusNotFound, "Submission not found")
	}
	buf := s.getBuf()
	b := append(*buf, `{"submission":`...)
	b, bad := view.appendSubmission(b, ref, renderOpts{editLink: editLink, badRate: fl.BadValueRate})
	b = append(b, '}')
	*buf = b
	if bad > 0 {
		s.bad.Add(int64(bad))
	}
	return response{status: http.StatusOK, body: b, buf: buf}
}

const maxBody = 1 << 20

func decodeBody(r *http.Request, v any) (int, error) {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, errors.New("request body is larger than 1 MiB")
		}
		return http.StatusBadRequest, errors.New("request body must be a JSON object")
	}
	return 0, nil
}

func (s *Server) createSubmissions(r *http.Request, formID string) response {
	var body struct {
		Submissions *[]forms.NewSubmission `json:"submissions"`
	}
	if status, err := decodeBody(r, &body); err != nil {
		return msg(status, err.Error())
	}
	if body.Submissions == nil {
		return msg(http.StatusBadRequest, `body must be {"submissions": [...]}`)
	}
	subs := *body.Submissions
	if len(subs) > forms.MaxCreateBatch {
		return msg(http.StatusBadRequest, "at most 10 submissions per request")
	}

	s.mu.Lock()
	f := s.byID[formID]
	if f == nil {
		s.mu.Unlock()
		return msg(http.StatusNotFound, "Form not found")
	}
	view := f.view
	rows := make([]*createdRow, len(subs))
	now := s.nowMs()
	for i, sub := range subs {
		cr, err := newCreated(view, &sub, now)
		if err != nil {
			s.mu.Unlock()
			return msg(http.StatusBadRequest, "submissions["+strconv.Itoa(i)+"]: "+err.Error())
		}
		rows[i] = cr
	}
	refs := make([]rowRef, len(rows))
	for i, cr := range rows {
		refs[i] = f.add(cr)
	}
	s.stats.Created += int64(len(refs))
	s.deliver(f, refs)
	s.mu.Unlock()

	buf := s.getBuf()
	b := append(*buf, `{"submissions":[`...)
	for i, ref := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = view.appendSubmission(b, ref, renderOpts{})
	}
	b = append(b, "]}"...)
	*buf = b
	return response{status: http.StatusOK, body: b, buf: buf}
}

// newCreated validates one item of a create call against the form.
func newCreated(view *formView, sub *forms.NewSubmission, now int64) (*createdRow, error) {
	cr := &createdRow{t: now, updated: now, answers: map[string]json.RawMessage{}}
	if sub.SubmissionTime != nil {
		cr.t = floorMs(*sub.SubmissionTime)
		cr.updated = max(cr.t, now)
	}
	if sub.LastUpdatedAt != nil {
		cr.updated = floorMs(*sub.LastUpdatedAt)
	}
	compact := func(raw json.RawMessage) json.RawMessage {
		if len(raw) == 0 {
			return json.RawMessage("null")
		}
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil { // the decoder already validated it
			return json.RawMessage("null")
		}
		return b.Bytes()
	}
	for _, a := range sub.Questions {
		if view.question(a.ID) < 0 {
			return nil, errors.New("the form has no question " + strconv.Quote(a.ID))
		}
		cr.answers[a.ID] = compact(a.Value)
	}
	cr.urlParams = slices.Clone(sub.URLParameters)
	entries := func(es []forms.SchedulingEntry, fs []field, what string) (map[string]json.RawMessage, error) {
		m := map[string]json.RawMessage{}
		for _, e := range es {
			if !slices.ContainsFunc(fs, func(f field) bool { return f.ID == e.ID }) {
				return nil, errors.New("the form has no " + what + " field " + strconv.Quote(e.ID))
			}
			m[e.ID] = compact(e.Value)
		}
		return m, nil
	}
	var err error
	if cr.sched, err = entries(sub.Scheduling, view.sched, "scheduling"); err != nil {
		return nil, err
	}
	pays := make([]forms.SchedulingEntry, len(sub.Payments))
	for i, p := range sub.Payments {
		pays[i] = forms.SchedulingEntry{ID: p.ID, Value: p.Value}
	}
	if cr.pays, err = entries(pays, view.pays, "payment"); err != nil {
		return nil, err
	}
	return cr, nil
}

func (s *Server) deleteSubmission(formID, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.byID[formID]
	if f == nil {
		return msg(http.StatusNotFound, "Form not found")
	}
	if !s.deleteRow(f, id) {
		return msg(http.StatusNotFound, "Submission not found")
	}
	return response{status: http.StatusOK, body: []byte("{}")}
}

func (s *Server) createWebhook(r *http.Request) response {
	var body struct {
		FormID string `json:"formId"`
		URL    string `json:"url"`
	}
	if status, err := decodeBody(r, &body); err != nil {
		return msg(status, err.Error())
	}
	if body.FormID == "" || body.URL == "" {
		return msg(http.StatusBadRequest, "formId and url are required")
	}
	u, err := url.Parse(body.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return msg(http.StatusBadRequest, "url must be an absolute http(s) URL")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[body.FormID] == nil {
		return msg(http.StatusNotFound, "Form not found")
	}
	id := s.nextHook
	s.nextHook += 1 + s.rng.Int64N(50)
	s.hooks[id] = webhook{formID: body.FormID, url: body.URL}
	b := strconv.AppendInt([]byte(`{"id":`), id, 10)
	return response{status: http.StatusOK, body: append(b, '}')}
}

func (s *Server) deleteWebhook(r *http.Request) response {
	var body struct {
		WebhookID json.RawMessage `json:"webhookId"`
	}
	if status, err := decodeBody(r, &body); err != nil {
		return msg(status, err.Error())
	}
	// Documented as a string; official clients send a number: take both.
	raw := bytes.TrimSpace(body.WebhookID)
	var text string
	if len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &text)
	} else {
		text = string(raw)
	}
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return msg(http.StatusBadRequest, "webhookId must be a webhook id (a string or a number)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.hooks[id]; !ok {
		return msg(http.StatusNotFound, "Webhook not found")
	}
	delete(s.hooks, id)
	return response{status: http.StatusOK, body: []byte("{}")}
}
