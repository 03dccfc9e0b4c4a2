package formsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/forms"
)

type wireSubmission struct {
	SubmissionID   string         `json:"submissionId"`
	SubmissionTime string         `json:"submissionTime"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	Questions      []forms.Answer `json:"questions"`
	Calculations   []any          `json:"calculations"`
	URLParameters  []any          `json:"urlParameters"`
	Quiz           map[string]any `json:"quiz"`
	EditLink       string         `json:"editLink,omitempty"`
}

func wire(sub *submission, editLink bool) wireSubmission {
	ts := sub.t.UTC().Format(forms.DateLayout)
	w := wireSubmission{SubmissionID: sub.id, SubmissionTime: ts, LastUpdatedAt: ts, Questions: sub.answers,
		Calculations: []any{}, URLParameters: []any{}, Quiz: map[string]any{}}
	if editLink {
		w.EditLink = "https://forms.example.com/edit/" + sub.id
	}
	return w
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

// admit applies auth, the rate limit and injected faults; it reports
// whether the request goes on to its handler.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (bool, Faults) {
	s.mu.Lock()
	f := s.faults
	s.stats.Requests++
	status := 0
	if r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
		status = http.StatusUnauthorized
	} else if s.cfg.RateLimit > 0 {
		now := time.Now()
		if s.lastTick.IsZero() {
			s.tokens = 1
		} else {
			s.tokens = min(1, s.tokens+now.Sub(s.lastTick).Seconds()*s.cfg.RateLimit)
		}
		s.lastTick = now
		if s.tokens < 1 {
			status = http.StatusTooManyRequests
			s.stats.RateLimited++
		} else {
			s.tokens--
		}
	}
	if status == 0 && f.ErrorRate > 0 && s.rng.Float64() < f.ErrorRate {
		status = []int{500, 502, 503}[s.rng.IntN(3)]
		s.stats.InjectedErrors++
	}
	if status != 0 {
		s.stats.ByStatus[status]++
	}
	s.mu.Unlock()
	if f.Latency > 0 {
		select {
		case <-time.After(f.Latency):
		case <-r.Context().Done():
			return false, f
		}
	}
	switch status {
	case 0:
		return true, f
	case http.StatusUnauthorized:
		fail(w, status, "Invalid API key")
	case http.StatusTooManyRequests:
		fail(w, status, "Rate limit exceeded")
	default:
		fail(w, status, "Internal server error")
	}
	return false, f
}

// ServeHTTP routes the documented endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, BasePath+"/")
	if !ok {
		fail(w, http.StatusNotFound, "not found")
		return
	}
	ok, faults := s.admit(w, r)
	if !ok {
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "forms" && r.Method == http.MethodGet:
		s.mu.Lock()
		out := make([]map[string]any, 0, len(s.forms))
		for _, f := range s.forms {
			out = append(out, map[string]any{"formId": f.meta.ID, "name": f.meta.Name, "tags": []string{}})
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	case len(parts) == 2 && parts[0] == "forms" && r.Method == http.MethodGet:
		m, ok := s.Form(parts[1])
		if !ok {
			fail(w, http.StatusNotFound, "Form not found")
			return
		}
		writeJSON(w, http.StatusOK, m)
	case len(parts) == 3 && parts[0] == "forms" && parts[2] == "submissions" && r.Method == http.MethodGet:
		s.list(w, r, parts[1], faults)
	case len(parts) == 3 && parts[0] == "forms" && parts[2] == "submissions" && r.Method == http.MethodPost:
		s.create(w, r, parts[1])
	case len(parts) == 4 && parts[0] == "forms" && parts[2] == "submissions" && r.Method == http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		if f := s.form(parts[1]); f != nil {
			for _, sub := range f.subs {
				if sub.id == parts[3] && !sub.deleted {
					writeJSON(w, http.StatusOK, map[string]any{"submission": wire(sub, r.URL.Query().Get("includeEditLink") == "true")})
					return
				}
			}
		}
		fail(w, http.StatusNotFound, "Submission not found")
	case len(parts) == 4 && parts[0] == "forms" && parts[2] == "submissions" && r.Method == http.MethodDelete:
		if err := s.Delete(parts[1], parts[3]); err != nil {
			fail(w, http.StatusNotFound, "Submission not found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	default:
		fail(w, http.StatusNotFound, "not found")
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, formID string, faults Faults) {
	q := r.URL.Query()
	limit, offset := 50, 0
	var err error
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 150 {
			fail(w, http.StatusBadRequest, "limit must be between 1 and 150")
			return
		}
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			fail(w, http.StatusBadRequest, "offset must be a non-negative integer")
			return
		}
	}
	var after, before *time.Time
	for name, dst := range map[string]**time.Time{"afterDate": &after, "beforeDate": &before} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				fail(w, http.StatusBadRequest, name+" must be an ISO 8601 date-time")
				return
			}
			*dst = &t
		}
	}
	if st := q.Get("status"); st == "in_progress" {
		writeJSON(w, http.StatusOK, map[string]any{"responses": []any{}, "totalResponses": 0, "pageCount": 0})
		return
	}
	desc := q.Get("sort") == "desc"
	editLink := q.Get("includeEditLink") == "true"
	search := q.Get("search")

	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.form(formID)
	if f == nil {
		fail(w, http.StatusNotFound, "Form not found")
		return
	}
	var match []*submission
	for _, sub := range f.subs {
		if sub.deleted || !s.inRange(sub.t, after, before) {
			continue
		}
		if search != "" && !strings.Contains(string(mustJSON(sub.answers)), search) {
			continue
		}
		match = append(match, sub)
	}
	if desc {
		for i, j := 0, len(match)-1; i < j; i, j = i+1, j-1 {
			match[i], match[j] = match[j], match[i]
		}
	}
	page := []wireSubmission{}
	for i := offset; i < len(match) && len(page) < limit; i++ {
		page = append(page, wire(match[i], editLink))
	}
	s.stats.PagesServed++
	s.stats.SubmissionsServed += int64(len(page))
	for i := 0; i < faults.ArrivalsPerPage; i++ {
		f.subs = append(f.subs, s.newSubmission(f, s.cfg.Now().UTC().Truncate(time.Millisecond)))
	}
	if faults.ArrivalsPerPage > 0 {
		f.sort()
	}
	writeJSON(w, http.StatusOK, map[string]any{"responses": page, "totalResponses": len(match), "pageCount": (len(match) + limit - 1) / limit})
}

func (s *Server) inRange(t time.Time, after, before *time.Time) bool {
	if after != nil && (t.Before(*after) || (!s.cfg.InclusiveDates && t.Equal(*after))) {
		return false
	}
	if before != nil && (t.After(*before) || (!s.cfg.InclusiveDates && t.Equal(*before))) {
		return false
	}
	return true
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func (s *Server) create(w http.ResponseWriter, r *http.Request, formID string) {
	var body struct {
		Submissions []struct {
			SubmissionTime *time.Time `json:"submissionTime"`
		} `json:"submissions"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		fail(w, http.StatusBadRequest, "body must be JSON {\"submissions\": [...]}")
		return
	}
	if len(body.Submissions) > 10 {
		fail(w, http.StatusBadRequest, "at most 10 submissions per request")
		return
	}
	times := make([]time.Time, len(body.Submissions))
	for i, sub := range body.Submissions {
		times[i] = s.cfg.Now()
		if sub.SubmissionTime != nil {
			times[i] = *sub.SubmissionTime
		}
	}
	ids, err := s.Insert(formID, times...)
	if err != nil {
		fail(w, http.StatusNotFound, "Form not found")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.form(formID)
	var out []wireSubmission
	for _, sub := range f.subs {
		for _, id := range ids {
			if sub.id == id {
				out = append(out, wire(sub, false))
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"submissions": out})
}
