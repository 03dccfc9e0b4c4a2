package schedsim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// apiError writes the error envelope of the API's HttpExceptionFilter.
func apiError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status":    "error",
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"path":      r.URL.Path,
		"error":     map[string]string{"code": code, "message": msg},
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// fault answers a 5xx for a share rate of requests.
func (s *Server) fault(w http.ResponseWriter, share float64) bool {
	if share <= 0 {
		return false
	}
	s.mu.Lock()
	hit := s.rnd.Float64() < share
	code := []int{500, 502, 503}[s.rnd.IntN(3)]
	if hit {
		s.stats.Faults++
	}
	s.mu.Unlock()
	if hit {
		http.Error(w, `{"status":"error","error":{"code":"InternalServerErrorException","message":"simulated fault"}}`, code)
	}
	return hit
}

// api wraps a /v2/ handler: faults, bearer token (401 when missing, unknown
// or expired), rate limit per token (429 with Retry-After), then the scope
// the endpoint needs (403) unless the token is unscoped (legacy).
func (s *Server) api(scope string, h func(w http.ResponseWriter, r *http.Request, g *grant)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.fault(w, s.cfg.FaultRate) {
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		g := s.access[tok]
		expired := g != nil && !s.cfg.Now().Before(g.expiry)
		var lim *rate.Limiter
		if g != nil && !expired && s.cfg.RateLimit > 0 {
			lim = s.limiters[tok]
			if lim == nil {
				burst := s.cfg.RateBurst
				if burst <= 0 {
					burst = max(1, int(math.Ceil(s.cfg.RateLimit)))
				}
				lim = rate.NewLimiter(rate.Limit(s.cfg.RateLimit), burst)
				s.limiters[tok] = lim
			}
		}
		s.mu.Unlock()
		switch {
		case !ok || tok == "" || g == nil:
			apiError(w, r, http.StatusUnauthorized, "UnauthorizedException", "Invalid Access Token.")
			return
		case expired:
			apiError(w, r, http.StatusUnauthorized, "UnauthorizedException", "ACCESS_TOKEN_IS_EXPIRED")
			return
		}
		if lim != nil {
			if res := lim.Reserve(); res.Delay() > 0 {
				res.Cancel()
				s.count(func(st *Stats) { st.Throttled++; s.users[g.user].stats.Throttled++ })
				w.Header().Set("Retry-After", "1")
				apiError(w, r, http.StatusTooManyRequests, "ThrottlerException", "ThrottlerException: Too Many Requests")
				return
			}
		}
		s.admitted(g.user, time.Now())
		if len(g.scopes) > 0 && !HasScope(g.scopes, scope) {
			apiError(w, r, http.StatusForbidden, "ForbiddenException", fmt.Sprintf(
				"insufficient_scope: token does not have the required scopes. Required: %s. Token has: %s", scope, strings.Join(g.scopes, ", ")))
			return
		}
		h(w, r, g)
	}
}

func (s *Server) handleMe(w http.ResponseWriter, _ *http.Request, g *grant) {
	u := s.users[g.user].User // users never changes after New
	writeJSON(w, map[string]any{"status": "success", "data": map[string]any{
		"id": u.ID, "username": u.Username, "email": u.Email, "name": u.Name,
		"avatarUrl": nil, "bio": nil, "timeFormat": 24, "defaultScheduleId": 1,
		"weekStart": "Monday", "timeZone": u.TimeZone, "organizationId": nil,
	}})
}

// bookingQuery is GET /v2/bookings' query, parsed.
type bookingQuery struct {
	take, skip                  int
	afterUpdated, beforeUpdated *time.Time
	afterCreated, beforeCreated *time.Time
	sortUpdated, sortCreated    string
	statuses                    []string
}

func parseBookingQuery(r *http.Request) (bookingQuery, error) {
	q := r.URL.Query()
	bq := bookingQuery{take: 100}
	if v := q.Get("take"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 250 {
			return bq, fmt.Errorf("take must be a number from 1 to 250")
		}
		bq.take = n
	}
	if v := q.Get("skip"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return bq, fmt.Errorf("skip must be a number of at least 0")
		}
		bq.skip = n
	}
	for _, d := range []struct {
		name string
		dst  **time.Time
	}{{"afterUpdatedAt", &bq.afterUpdated}, {"beforeUpdatedAt", &bq.beforeUpdated}, {"afterCreatedAt", &bq.afterCreated}, {"beforeCreatedAt", &bq.beforeCreated}} {
		if v := q.Get(d.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return bq, fmt.Errorf("%s must be a valid ISO 8601 date", d.name)
			}
			*d.dst = &t
		}
	}
	for _, srt := range []struct {
		name string
		dst  *string
	}{{"sortUpdatedAt", &bq.sortUpdated}, {"sortCreated", &bq.sortCreated}} {
		if v := q.Get(srt.name); v != "" {
			if v != "asc" && v != "desc" {
				return bq, fmt.Errorf("%s must be either \"asc\" or \"desc\"", srt.name)
			}
			*srt.dst = v
		}
	}
	if v := q.Get("status"); v != "" {
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if !slices.Contains([]string{"upcoming", "recurring", "past", "cancelled", "unconfirmed"}, st) {
				return bq, fmt.Errorf("Invalid status. Allowed are upcoming, recurring, past, cancelled, unconfirmed")
			}
			bq.statuses = append(bq.statuses, st)
		}
	}
	return bq, nil
}

// category is the status filter a booking falls under.
func category(b *booking, now time.Time) []string {
	switch {
	case b.Status == "cancelled" || b.Status == "rejected":
		return []string{"cancelled"}
	case b.Status == "pending":
		return []string{"unconfirmed"}
	case b.End.Before(now):
		return []string{"past"}
	case b.RecurringUID != "":
		return []string{"upcoming", "recurring"}
	default:
		return []string{"upcoming"}
	}
}

func (bq *bookingQuery) match(b *booking, now time.Time) bool {
	if bq.afterUpdated != nil && (b.UpdatedAt == nil || b.UpdatedAt.Before(*bq.afterUpdated)) {
		return false
	}
	if bq.beforeUpdated != nil && (b.UpdatedAt == nil || b.UpdatedAt.After(*bq.beforeUpdated)) {
		return false
	}
	if bq.afterCreated != nil && b.CreatedAt.Before(*bq.afterCreated) {
		return false
	}
	if bq.beforeCreated != nil && b.CreatedAt.After(*bq.beforeCreated) {
		return false
	}
	if len(bq.statuses) > 0 {
		hit := false
		for _, c := range category(b, now) {
			hit = hit || slices.Contains(bq.statuses, c)
		}
		return hit
	}
	return true
}

// compareTimes orders by t (nil last, as PostgreSQL's NULLS LAST for asc).
func compareTimes(a, b *time.Time, desc bool) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	c := a.Compare(*b)
	if desc {
		c = -c
	}
	return c
}

func (s *Server) handleBookings(w http.ResponseWriter, r *http.Request, g *grant) {
	if v := r.Header.Get("cal-api-version"); v != APIVersion {
		apiError(w, r, http.StatusBadRequest, "BadRequestException",
			fmt.Sprintf("cal-api-version header must be %s (got %q); the simulator refuses the older shape", APIVersion, v))
		return
	}
	bq, err := parseBookingQuery(r)
	if err != nil {
		apiError(w, r, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.BookingRequests++
	if s.cfg.ChurnRate > 0 && s.rnd.Float64() < s.cfg.ChurnRate {
		s.churn(g.user)
	}
	now := s.cfg.Now()
	var hits []*booking
	for _, b := range s.bookings {
		if b.owner == g.user && bq.match(b, now) {
			hits = append(hits, b)
		}
	}
	slices.SortStableFunc(hits, func(a, b *booking) int {
		if bq.sortUpdated != "" {
			if c := compareTimes(a.UpdatedAt, b.UpdatedAt, bq.sortUpdated == "desc"); c != 0 {
				return c
			}
		}
		if bq.sortCreated != "" {
			if c := compareTimes(&a.CreatedAt, &b.CreatedAt, bq.sortCreated == "desc"); c != 0 {
				return c
			}
		}
		return compareTimes(&a.Start, &b.Start, false)
	})
	total := len(hits)
	lo, hi := min(bq.skip, total), min(bq.skip+bq.take, total)
	page := hits[lo:hi]
	data := make([]map[string]any, len(page))
	for i, b := range page {
		data[i] = s.render(b)
	}
	writeJSON(w, map[string]any{
		"status": "success",
		"data":   data,
		"pagination": map[string]any{
			"totalItems":      total,
			"remainingItems":  max(0, total-hi),
			"returnedItems":   len(page),
			"itemsPerPage":    bq.take,
			"currentPage":     bq.skip/bq.take + 1,
			"totalPages":      (total + bq.take - 1) / bq.take,
			"hasNextPage":     hi < total,
			"hasPreviousPage": bq.skip > 0,
		},
	})
}
