package scheduling

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Booking is one booking as GET /v2/bookings (cal-api-version 2024-08-13)
// renders it: BookingOutput_2024_08_13 and its recurring and seated
// variants in cal.com's packages/platform/types. Optional fields the answer
// may omit are pointers, so an absent value stays null in the output.
type Booking struct {
	ID          int64
	UID         string
	Title       string
	Description *string
	Status      string // accepted, cancelled, rejected, pending
	Start, End  time.Time
	Duration    int32 // minutes
	// EventTypeID is eventType.id (or the deprecated eventTypeId).
	EventTypeID   *int64
	EventTypeSlug *string
	Location      *string
	MeetingURL    *string // deprecated by the API in favour of location
	AbsentHost    bool
	Attendees     []Attendee
	Hosts         []Host
	Guests        []string
	// BookingFieldsResponses is the answer's object as received (JSON):
	// kept whole, because its keys are each event type's own booking fields.
	BookingFieldsResponses json.RawMessage
	Metadata               json.RawMessage
	CancellationReason     *string
	CancelledByEmail       *string
	ReschedulingReason     *string
	RescheduledByEmail     *string
	RescheduledFromUID     *string
	RescheduledToUID       *string
	RecurringBookingUID    *string
	ICSUID                 *string
	Rating                 *int32
	CreatedAt              time.Time
	UpdatedAt              *time.Time
}

// Attendee is one attendee of a booking.
type Attendee struct {
	Name         string
	Email        *string
	DisplayEmail *string
	TimeZone     string
	Language     *string
	Absent       bool
	PhoneNumber  *string
	SeatUID      *string // seated bookings
	// Of a seated booking (SeatedAttendee), which has no responses of its
	// own: the attendee's booking field responses and metadata, JSON
	// objects kept whole as received (compacted); the table keeps them in
	// its seats column.
	BookingFieldsResponses json.RawMessage
	Metadata               json.RawMessage
}

// Seated reports whether b is a seated booking: an attendee has a seat.
func (b *Booking) Seated() bool {
	for _, a := range b.Attendees {
		if a.SeatUID != nil {
			return true
		}
	}
	return false
}

// Host is one host of a booking.
type Host struct {
	ID           int64
	Name         string
	Email        *string
	DisplayEmail *string
	Username     *string
	TimeZone     string
}

// VersionTime is the time of the booking's current version: updatedAt, or
// createdAt for a row never updated (updatedAt null).
func (b *Booking) VersionTime() time.Time {
	if b.UpdatedAt != nil {
		return *b.UpdatedAt
	}
	return b.CreatedAt
}

// BookingError is a booking the client cannot read: it names the booking
// and the field, and the value's problem.
type BookingError struct {
	UID   string // or "#<id>", or "index <n>" when neither is readable
	Field string
	Err   error
}

func (e *BookingError) Error() string {
	return fmt.Sprintf("booking %s: field %s: %v: the scheduling API answered a shape syncd does not know; report it with the booking id", e.UID, e.Field, e.Err)
}

func (e *BookingError) Unwrap() error { return e.Err }

// DecodeBooking reads one booking. Unknown keys are ignored (the API adds
// fields); a known key with a value of the wrong type is a *BookingError.
func DecodeBooking(raw json.RawMessage) (*Booking, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &BookingError{UID: "?", Field: "(booking)", Err: errors.New("not a JSON object")}
	}
	b := &Booking{}
	d := decoder{m: m}
	d.req("uid", &b.UID)
	d.label = b.UID
	if d.label == "" {
		var id int64
		_ = json.Unmarshal(m["id"], &id)
		d.label = fmt.Sprintf("#%d", id)
	}
	d.req("id", &b.ID)
	d.req("title", &b.Title)
	d.opt("description", &b.Description)
	d.req("status", &b.Status)
	d.time("start", &b.Start, true)
	d.time("end", &b.End, true)
	d.opt("duration", &b.Duration)
	d.opt("location", &b.Location)
	d.opt("meetingUrl", &b.MeetingURL)
	d.opt("absentHost", &b.AbsentHost)
	d.opt("guests", &b.Guests)
	d.opt("cancellationReason", &b.CancellationReason)
	d.opt("cancelledByEmail", &b.CancelledByEmail)
	d.opt("reschedulingReason", &b.ReschedulingReason)
	d.opt("rescheduledByEmail", &b.RescheduledByEmail)
	d.opt("rescheduledFromUid", &b.RescheduledFromUID)
	d.opt("rescheduledToUid", &b.RescheduledToUID)
	d.opt("recurringBookingUid", &b.RecurringBookingUID)
	d.opt("icsUid", &b.ICSUID)
	d.opt("rating", &b.Rating)
	d.time("createdAt", &b.CreatedAt, true)
	var upd time.Time
	if d.time("updatedAt", &upd, false) {
		b.UpdatedAt = &upd
	}
	d.object("bookingFieldsResponses", &b.BookingFieldsResponses)
	d.object("metadata", &b.Metadata)
	var et struct {
		ID   *int64  `json:"id"`
		Slug *string `json:"slug"`
	}
	d.opt("eventType", &et)
	b.EventTypeID, b.EventTypeSlug = et.ID, et.Slug
	if b.EventTypeID == nil {
		d.opt("eventTypeId", &b.EventTypeID)
	}
	var atts []struct {
		Name                   string          `json:"name"`
		Email                  *string         `json:"email"`
		DisplayEmail           *string         `json:"displayEmail"`
		TimeZone               string          `json:"timeZone"`
		Language               *string         `json:"language"`
		Absent                 bool            `json:"absent"`
		PhoneNumber            *string         `json:"phoneNumber"`
		SeatUID                *string         `json:"seatUid"`
		BookingFieldsResponses json.RawMessage `json:"bookingFieldsResponses"`
		Metadata               json.RawMessage `json:"metadata"`
	}
	d.opt("attendees", &atts)
	for i, a := range atts {
		at := Attendee(a)
		var err error
		if at.BookingFieldsResponses, err = compactObject(a.BookingFieldsResponses); err != nil {
			d.fail(fmt.Sprintf("attendees[%d].bookingFieldsResponses", i), err)
		}
		if at.Metadata, err = compactObject(a.Metadata); err != nil {
			d.fail(fmt.Sprintf("attendees[%d].metadata", i), err)
		}
		b.Attendees = append(b.Attendees, at)
	}
	var hosts []struct {
		ID           int64   `json:"id"`
		Name         string  `json:"name"`
		Email        *string `json:"email"`
		DisplayEmail *string `json:"displayEmail"`
		Username     *string `json:"username"`
		TimeZone     string  `json:"timeZone"`
	}
	d.opt("hosts", &hosts)
	for _, h := range hosts {
		b.Hosts = append(b.Hosts, Host(h))
	}
	if d.err != nil {
		return nil, d.err
	}
	if b.Duration == 0 && b.End.After(b.Start) {
		b.Duration = int32(b.End.Sub(b.Start) / time.Minute)
	}
	return b, nil
}

// decoder reads fields of one booking, keeping the first error.
type decoder struct {
	m     map[string]json.RawMessage
	label string
	err   error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = &BookingError{UID: d.label, Field: field, Err: err}
	}
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// req decodes a required field.
func (d *decoder) req(field string, dst any) {
	raw, ok := d.m[field]
	if !ok || isNull(raw) {
		d.fail(field, errors.New("missing"))
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		d.fail(field, fmt.Errorf("unexpected value %s", clip(raw)))
	}
}

// opt decodes a field that may be absent or null.
func (d *decoder) opt(field string, dst any) {
	raw, ok := d.m[field]
	if !ok || isNull(raw) {
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		d.fail(field, fmt.Errorf("unexpected value %s", clip(raw)))
	}
}

// time decodes an ISO 8601 timestamp; false when absent or null.
func (d *decoder) time(field string, dst *time.Time, required bool) bool {
	raw, ok := d.m[field]
	if !ok || isNull(raw) {
		if required {
			d.fail(field, errors.New("missing"))
		}
		return false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.fail(field, fmt.Errorf("not a date string: %s", clip(raw)))
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.fail(field, fmt.Errorf("not an ISO 8601 date: %q", s))
		return false
	}
	*dst = t.UTC()
	return true
}

// object keeps a JSON object as received; null and absent stay nil.
func (d *decoder) object(field string, dst *json.RawMessage) {
	obj, err := compactObject(d.m[field])
	if err != nil {
		d.fail(field, err)
		return
	}
	*dst = obj
}

// compactObject is raw compacted if it is a JSON object, nil if it is null
// or empty (absent), and an error otherwise.
func compactObject(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '{' {
		return nil, fmt.Errorf("not an object: %s", clip(raw))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func clip(raw json.RawMessage) string {
	const n = 60
	s := string(raw)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
