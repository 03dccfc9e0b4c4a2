package schedsim

import (
	"encoding/json"
	"fmt"
	"time"
)

// booking is one row of the booking table.
type booking struct {
	owner              int // index in Server.users: the host
	ID                 int64
	UID                string
	Title              string
	Description        string
	Status             string // accepted, cancelled, rejected, pending
	Start, End         time.Time
	EventTypeID        int64
	EventTypeSlug      string
	Location           string
	AbsentHost         bool
	Seated             bool // a seated event type: per-attendee seats and responses
	Attendees          []attendee
	Guests             []string
	Responses          map[string]any
	Metadata           map[string]string
	CancellationReason string
	CancelledBy        string
	ReschedulingReason string
	RescheduledBy      string
	Rescheduled        bool
	FromReschedule     string
	RecurringUID       string
	ICSUID             string
	Rating             *int
	CreatedAt          time.Time
	UpdatedAt          *time.Time // null for rows written before updatedAt existed
}

type attendee struct {
	Name, Email, TimeZone, Language, Phone string
	Absent                                 bool
	// Of a seated booking: the attendee's seat, booking field responses and
	// metadata (SeatedAttendee in cal.com's platform types).
	Seat      string
	Responses map[string]any
	Metadata  map[string]string
}

var (
	firstNames = []string{"Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim", "Margaret"}
	lastNames  = []string{"Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Berners-Lee", "Hamilton"}
	zones      = []string{"Europe/London", "America/New_York", "Asia/Tokyo", "Europe/Berlin", "America/Los_Angeles"}
	eventTypes = []struct {
		id     int64
		slug   string
		title  string
		length int
		seated bool // seatsPerTimeSlot set: attendees book seats
	}{{11, "intro-call", "Intro call", 15, false}, {12, "consultation", "Consultation", 30, false}, {13, "workshop", "Workshop", 90, true}}
	// diets are a seated attendee's answers to the workshop's own booking
	// field, chosen by seat rather than drawn, so that seated bookings take
	// no more random numbers and every seed keeps its data.
	diets     = []string{"none", "vegetarian", "vegan", "gluten-free"}
	locations = []string{"https://cal.com/video/abc", "integrations:daily", "Office, 2nd floor", "+44 20 7946 0000", ""}
)

// seedBookings writes each user's initial bookings: created over the past
// 60 days, a few cancelled or rescheduled since, one in ten with a null
// updatedAt. Users are seeded one after the other from the one source, so
// each has different bookings, and the first user's are those of a
// single-user simulator with the same seed.
func (s *Server) seedBookings() {
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	for u := range s.users {
		s.seedUser(u, now)
	}
	s.last = now.Add(-time.Millisecond)
}

func (s *Server) seedUser(owner int, now time.Time) {
	base := now.Add(-60 * 24 * time.Hour)
	step := 60 * 24 * time.Hour / time.Duration(s.cfg.Bookings+1)
	for i := 0; i < s.cfg.Bookings; i++ {
		created := base.Add(time.Duration(i+1) * step).Truncate(time.Millisecond)
		b := s.makeBooking(created, owner)
		if i%10 == 9 {
			b.UpdatedAt = nil
		}
		switch s.rnd.IntN(10) {
		case 0:
			t := created.Add(time.Duration(s.rnd.IntN(3600)) * time.Second)
			if !t.Before(now) {
				t = now.Add(-time.Millisecond)
			}
			s.cancel(b, t, "Cannot make it")
		case 1:
			b.Status = "pending"
		}
	}
}

// makeBooking adds a new accepted booking of user owner created at t.
// Callers hold mu (or are New).
func (s *Server) makeBooking(t time.Time, owner int) *booking {
	s.nextID++
	et := eventTypes[s.rnd.IntN(len(eventTypes))]
	start := t.Add(time.Duration(1+s.rnd.IntN(21*24)) * time.Hour).Truncate(time.Hour)
	n := 1 + s.rnd.IntN(3)
	atts := make([]attendee, n)
	for j := range atts {
		fn, ln := firstNames[s.rnd.IntN(len(firstNames))], lastNames[s.rnd.IntN(len(lastNames))]
		atts[j] = attendee{
			Name: fn + " " + ln, Email: fmt.Sprintf("%s.%s%d@example.org", fn, ln, s.nextID),
			TimeZone: zones[s.rnd.IntN(len(zones))], Language: "en", Absent: s.rnd.IntN(20) == 0,
		}
		if s.rnd.IntN(3) == 0 {
			atts[j].Phone = fmt.Sprintf("+4477009%05d", s.rnd.IntN(100000))
		}
		if et.seated {
			atts[j].Seat = fmt.Sprintf("seat-%d-%d", s.nextID, j)
			atts[j].Responses = map[string]any{"name": atts[j].Name, "email": atts[j].Email, "dietary": diets[j%len(diets)]}
			if j == 0 {
				atts[j].Metadata = map[string]string{"ticket": fmt.Sprintf("T-%d", s.nextID)}
			}
		}
	}
	ut := t
	b := &booking{
		owner:         owner,
		ID:            s.nextID,
		UID:           fmt.Sprintf("bk%08x%06x", s.rnd.Uint32(), s.nextID),
		Title:         fmt.Sprintf("%s between %s and %s", et.title, s.users[owner].Name, atts[0].Name),
		Description:   []string{"", "Agenda to follow", "Quarterly review — notes in the doc"}[s.rnd.IntN(3)],
		Status:        "accepted",
		Start:         start,
		End:           start.Add(time.Duration(et.length) * time.Minute),
		EventTypeID:   et.id,
		EventTypeSlug: et.slug,
		Seated:        et.seated,
		Location:      locations[s.rnd.IntN(len(locations))],
		Attendees:     atts,
		Responses: map[string]any{
			"name": atts[0].Name, "email": atts[0].Email,
			"notes":   []any{nil, "Looking forward", "Please call me"}[s.rnd.IntN(3)],
			"guests":  []any{},
			"company": map[string]any{"name": "ACME", "size": s.rnd.IntN(500)},
		},
		ICSUID:    fmt.Sprintf("ics-%d@cal.sim", s.nextID),
		CreatedAt: t,
		UpdatedAt: &ut,
	}
	if s.rnd.IntN(4) == 0 {
		b.Guests = []string{fmt.Sprintf("guest%d@example.net", s.nextID)}
	}
	if s.rnd.IntN(5) == 0 {
		b.Metadata = map[string]string{"source": "sim", "campaign": fmt.Sprint(s.rnd.IntN(9))}
	}
	if s.rnd.IntN(6) == 0 {
		r := 1 + s.rnd.IntN(5)
		b.Rating = &r
	}
	s.bookings = append(s.bookings, b)
	s.byUID[b.UID] = b
	return b
}

// cancel marks b cancelled at t.
func (s *Server) cancel(b *booking, t time.Time, reason string) {
	b.Status = "cancelled"
	b.CancellationReason = reason
	b.CancelledBy = s.users[b.owner].Email
	b.UpdatedAt = &t
}

// reschedule moves b: a new booking at the new time, rescheduled from b,
// and b cancelled as rescheduled. Callers hold mu.
func (s *Server) reschedule(b *booking, t time.Time, reason string) *booking {
	nb := s.makeBooking(t, b.owner)
	nb.Title, nb.Description, nb.EventTypeID, nb.EventTypeSlug, nb.Seated = b.Title, b.Description, b.EventTypeID, b.EventTypeSlug, b.Seated
	nb.Attendees, nb.Guests, nb.Responses, nb.Location = b.Attendees, b.Guests, b.Responses, b.Location
	d := b.End.Sub(b.Start)
	nb.Start = b.Start.Add(time.Duration(1+s.rnd.IntN(72)) * time.Hour)
	nb.End = nb.Start.Add(d)
	nb.FromReschedule = b.UID
	nb.ReschedulingReason = reason
	nb.RescheduledBy = s.users[b.owner].Email
	s.cancel(b, t, "")
	b.CancellationReason = ""
	b.Rescheduled = true
	b.ReschedulingReason = reason
	b.RescheduledBy = s.users[b.owner].Email
	return nb
}

// churn makes one random change to owner's bookings, as attendees and
// hosts do. Callers hold mu.
func (s *Server) churn(owner int) {
	t := s.tick()
	var live []*booking
	for _, b := range s.bookings {
		if b.owner == owner && (b.Status == "accepted" || b.Status == "pending") {
			live = append(live, b)
		}
	}
	switch k := s.rnd.IntN(3); {
	case k == 0 || len(live) == 0:
		s.newBooking(t, owner)
	case k == 1:
		b := live[s.rnd.IntN(len(live))]
		s.cancel(b, t, "Plans changed")
		s.emit(TriggerBookingCancelled, b, t, nil)
	default:
		b := live[s.rnd.IntN(len(live))]
		s.emit(TriggerBookingRescheduled, s.reschedule(b, t, "Clash with another meeting"), t, b)
	}
}

// rescheduledTo finds the booking b was moved to.
func (s *Server) rescheduledTo(b *booking) string {
	if !b.Rescheduled {
		return ""
	}
	for _, o := range s.bookings {
		if o.FromReschedule == b.UID {
			return o.UID
		}
	}
	return ""
}

// stamp renders a time as the API does: UTC, milliseconds, Z.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// render is the booking in the shape of BookingOutput_2024_08_13, or of
// GetSeatedBookingOutput_2024_08_13 for a seated one: each attendee carries
// its seatUid, bookingFieldsResponses and metadata, and the booking has no
// bookingFieldsResponses or guests of its own. Callers hold mu.
func (s *Server) render(b *booking) map[string]any {
	u := s.users[b.owner].User
	atts := make([]map[string]any, len(b.Attendees))
	for i, a := range b.Attendees {
		m := map[string]any{"name": a.Name, "email": a.Email, "displayEmail": a.Email, "timeZone": a.TimeZone, "language": a.Language, "absent": a.Absent}
		if a.Phone != "" {
			m["phoneNumber"] = a.Phone
		}
		if b.Seated {
			m["seatUid"], m["bookingFieldsResponses"] = a.Seat, a.Responses
			if a.Metadata != nil {
				m["metadata"] = a.Metadata
			}
		}
		atts[i] = m
	}
	out := map[string]any{
		"id":          b.ID,
		"uid":         b.UID,
		"title":       b.Title,
		"description": b.Description,
		"hosts": []map[string]any{{
			"id": u.ID, "name": u.Name, "email": u.Email, "displayEmail": u.Email, "username": u.Username, "timeZone": u.TimeZone,
		}},
		"status":                 b.Status,
		"start":                  stamp(b.Start),
		"end":                    stamp(b.End),
		"duration":               int(b.End.Sub(b.Start) / time.Minute),
		"eventTypeId":            b.EventTypeID,
		"eventType":              map[string]any{"id": b.EventTypeID, "slug": b.EventTypeSlug},
		"location":               b.Location,
		"absentHost":             b.AbsentHost,
		"createdAt":              stamp(b.CreatedAt),
		"attendees":              atts,
		"bookingFieldsResponses": b.Responses,
		"icsUid":                 b.ICSUID,
	}
	if b.Seated {
		delete(out, "bookingFieldsResponses") // each attendee has its own
	}
	if b.UpdatedAt != nil {
		out["updatedAt"] = stamp(*b.UpdatedAt)
	} else {
		out["updatedAt"] = nil
	}
	opt := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	opt("cancellationReason", b.CancellationReason)
	opt("cancelledByEmail", b.CancelledBy)
	opt("reschedulingReason", b.ReschedulingReason)
	opt("rescheduledByEmail", b.RescheduledBy)
	opt("rescheduledFromUid", b.FromReschedule)
	opt("rescheduledToUid", s.rescheduledTo(b))
	opt("recurringBookingUid", b.RecurringUID)
	if len(b.Guests) > 0 && !b.Seated {
		out["guests"] = b.Guests
	}
	if b.Metadata != nil {
		out["metadata"] = b.Metadata
	}
	if b.Rating != nil {
		out["rating"] = *b.Rating
	}
	return out
}

// renderJSON is render encoded; the journal compares it with what clients
// stored.
func (s *Server) renderJSON(b *booking) json.RawMessage {
	raw, _ := json.Marshal(s.render(b))
	return raw
}
