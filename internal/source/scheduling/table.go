package scheduling

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// Lineage and version column names. _batch_id, _synced_at and _deleted are
// every table's managed columns (internal/table); the version columns are
// the design's append-only versioning: a change is a new row, and the
// latest version per uid (tombstones dropped) is the current booking.
const (
	ColBatchID     = tablepkg.ColBatchID
	ColSyncedAt    = tablepkg.ColSyncedAt
	ColVersionTime = "_version_time"
	ColDeleted     = tablepkg.ColDeleted
)

// Table is the default name of the bookings table.
const Table = "bookings"

var ts = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func str(name string, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: nullable}
}

var attendeeType = arrow.StructOf(
	str("name", false), str("email", true), str("display_email", true), str("time_zone", false),
	str("language", true), arrow.Field{Name: "absent", Type: arrow.FixedWidthTypes.Boolean},
	str("phone_number", true), str("seat_uid", true),
)

// seatType is what a seated booking's attendee answered (JSON text, whole),
// by seat. A column of its own, not two more fields of attendeeType: files
// written before it then differ from later ones by a column, which readers
// fill with nulls (DuckDB's union_by_name, BigQuery's ALLOW_FIELD_ADDITION),
// where a struct that gained fields cannot be read beside the old one.
var seatType = arrow.StructOf(
	str("seat_uid", false), str("booking_fields_responses", true), str("metadata", true),
)

var hostType = arrow.StructOf(
	arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}, str("name", false), str("email", true),
	str("display_email", true), str("username", true), str("time_zone", false),
)

// column indexes in BookingsSchema.
const (
	cID = iota
	cUID
	cTitle
	cDescription
	cStatus
	cStart
	cEnd
	cDuration
	cEventTypeID
	cEventTypeSlug
	cLocation
	cMeetingURL
	cAbsentHost
	cAttendees
	cHosts
	cGuests
	cSeats
	cResponses
	cMetadata
	cCancellationReason
	cCancelledBy
	cReschedulingReason
	cRescheduledBy
	cRescheduledFrom
	cRescheduledTo
	cRecurringUID
	cICSUID
	cRating
	cCreatedAt
	cUpdatedAt
	cBatchID
	cSyncedAt
	cVersionTime
	cDeleted
)

// BookingsSchema is the bookings table: one typed column per booking field
// (timestamps UTC microseconds; attendees, hosts and a seated booking's
// seats as lists of structs; booking field responses and metadata as JSON
// text, whole), then lineage and version columns.
func BookingsSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		str("uid", false),
		str("title", false),
		str("description", true),
		str("status", false),
		{Name: "start_time", Type: ts},
		{Name: "end_time", Type: ts},
		{Name: "duration_minutes", Type: arrow.PrimitiveTypes.Int32},
		{Name: "event_type_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		str("event_type_slug", true),
		str("location", true),
		str("meeting_url", true),
		{Name: "absent_host", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "attendees", Type: arrow.ListOf(attendeeType)},
		{Name: "hosts", Type: arrow.ListOf(hostType)},
		{Name: "guests", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "seats", Type: arrow.ListOf(seatType), Nullable: true},
		str("booking_fields_responses", true),
		str("metadata", true),
		str("cancellation_reason", true),
		str("cancelled_by_email", true),
		str("rescheduling_reason", true),
		str("rescheduled_by_email", true),
		str("rescheduled_from_uid", true),
		str("rescheduled_to_uid", true),
		str("recurring_booking_uid", true),
		str("ics_uid", true),
		{Name: "rating", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "created_at", Type: ts},
		{Name: "updated_at", Type: ts, Nullable: true},
		tablepkg.BatchIDField(),
		tablepkg.SyncedAtField(),
		{Name: ColVersionTime, Type: ts},
		tablepkg.DeletedField(false),
	}, nil)
}

// Lineage is what every row of a batch records about the batch.
type Lineage struct {
	BatchID  string
	SyncedAt time.Time
}

// RecordBuilder appends bookings to an Arrow record of BookingsSchema. Not
// safe for concurrent use.
type RecordBuilder struct {
	b    *array.RecordBuilder
	rows int
}

// NewRecordBuilder returns an empty builder; Release it when done.
func NewRecordBuilder(mem memory.Allocator) *RecordBuilder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &RecordBuilder{b: array.NewRecordBuilder(mem, BookingsSchema())}
}

// Release frees the builder's buffers.
func (rb *RecordBuilder) Release() { rb.b.Release() }

// Len is the number of rows appended since the last NewRecord.
func (rb *RecordBuilder) Len() int { return rb.rows }

func micros(t time.Time) arrow.Timestamp { return arrow.Timestamp(t.UTC().UnixMicro()) }

func appendStr(b array.Builder, s *string) {
	sb := b.(*array.StringBuilder)
	if s == nil {
		sb.AppendNull()
		return
	}
	sb.Append(*s)
}

// appendJSON appends JSON text kept whole, null for nil.
func appendJSON(b array.Builder, raw []byte) {
	sb := b.(*array.StringBuilder)
	if raw == nil {
		sb.AppendNull()
		return
	}
	sb.Append(string(raw))
}

// Append adds one version row of b. deleted marks a tombstone (the API has
// no deletion of bookings today; a cancellation is a status).
func (rb *RecordBuilder) Append(b *Booking, lin Lineage, deleted bool) error {
	switch {
	case b == nil:
		return errors.New("scheduling: append: nil booking")
	case lin.BatchID == "" || lin.SyncedAt.IsZero():
		return fmt.Errorf("scheduling: append booking %s: lineage lacks a batch id or sync time", b.UID)
	case b.UID == "" || b.Start.IsZero() || b.End.IsZero() || b.CreatedAt.IsZero():
		return fmt.Errorf("scheduling: append booking %q: uid, start, end and createdAt are required", b.UID)
	}
	f := rb.b.Field
	f(cID).(*array.Int64Builder).Append(b.ID)
	f(cUID).(*array.StringBuilder).Append(b.UID)
	f(cTitle).(*array.StringBuilder).Append(b.Title)
	appendStr(f(cDescription), b.Description)
	f(cStatus).(*array.StringBuilder).Append(b.Status)
	f(cStart).(*array.TimestampBuilder).Append(micros(b.Start))
	f(cEnd).(*array.TimestampBuilder).Append(micros(b.End))
	f(cDuration).(*array.Int32Builder).Append(b.Duration)
	if b.EventTypeID != nil {
		f(cEventTypeID).(*array.Int64Builder).Append(*b.EventTypeID)
	} else {
		f(cEventTypeID).AppendNull()
	}
	appendStr(f(cEventTypeSlug), b.EventTypeSlug)
	appendStr(f(cLocation), b.Location)
	appendStr(f(cMeetingURL), b.MeetingURL)
	f(cAbsentHost).(*array.BooleanBuilder).Append(b.AbsentHost)

	al := f(cAttendees).(*array.ListBuilder)
	al.Append(true)
	as := al.ValueBuilder().(*array.StructBuilder)
	for _, a := range b.Attendees {
		as.Append(true)
		as.FieldBuilder(0).(*array.StringBuilder).Append(a.Name)
		appendStr(as.FieldBuilder(1), a.Email)
		appendStr(as.FieldBuilder(2), a.DisplayEmail)
		as.FieldBuilder(3).(*array.StringBuilder).Append(a.TimeZone)
		appendStr(as.FieldBuilder(4), a.Language)
		as.FieldBuilder(5).(*array.BooleanBuilder).Append(a.Absent)
		appendStr(as.FieldBuilder(6), a.PhoneNumber)
		appendStr(as.FieldBuilder(7), a.SeatUID)
	}
	hl := f(cHosts).(*array.ListBuilder)
	hl.Append(true)
	hs := hl.ValueBuilder().(*array.StructBuilder)
	for _, h := range b.Hosts {
		hs.Append(true)
		hs.FieldBuilder(0).(*array.Int64Builder).Append(h.ID)
		hs.FieldBuilder(1).(*array.StringBuilder).Append(h.Name)
		appendStr(hs.FieldBuilder(2), h.Email)
		appendStr(hs.FieldBuilder(3), h.DisplayEmail)
		appendStr(hs.FieldBuilder(4), h.Username)
		hs.FieldBuilder(5).(*array.StringBuilder).Append(h.TimeZone)
	}
	gl := f(cGuests).(*array.ListBuilder)
	if b.Guests == nil {
		gl.AppendNull()
	} else {
		gl.Append(true)
		for _, g := range b.Guests {
			gl.ValueBuilder().(*array.StringBuilder).Append(g)
		}
	}
	sl := f(cSeats).(*array.ListBuilder)
	if !b.Seated() {
		sl.AppendNull()
	} else {
		sl.Append(true)
		ss := sl.ValueBuilder().(*array.StructBuilder)
		for _, a := range b.Attendees {
			if a.SeatUID == nil {
				continue
			}
			ss.Append(true)
			ss.FieldBuilder(0).(*array.StringBuilder).Append(*a.SeatUID)
			appendJSON(ss.FieldBuilder(1), a.BookingFieldsResponses)
			appendJSON(ss.FieldBuilder(2), a.Metadata)
		}
	}
	appendJSON(f(cResponses), b.BookingFieldsResponses)
	appendJSON(f(cMetadata), b.Metadata)
	appendStr(f(cCancellationReason), b.CancellationReason)
	appendStr(f(cCancelledBy), b.CancelledByEmail)
	appendStr(f(cReschedulingReason), b.ReschedulingReason)
	appendStr(f(cRescheduledBy), b.RescheduledByEmail)
	appendStr(f(cRescheduledFrom), b.RescheduledFromUID)
	appendStr(f(cRescheduledTo), b.RescheduledToUID)
	appendStr(f(cRecurringUID), b.RecurringBookingUID)
	appendStr(f(cICSUID), b.ICSUID)
	if b.Rating != nil {
		f(cRating).(*array.Int32Builder).Append(*b.Rating)
	} else {
		f(cRating).AppendNull()
	}
	f(cCreatedAt).(*array.TimestampBuilder).Append(micros(b.CreatedAt))
	if b.UpdatedAt != nil {
		f(cUpdatedAt).(*array.TimestampBuilder).Append(micros(*b.UpdatedAt))
	} else {
		f(cUpdatedAt).AppendNull()
	}
	f(cBatchID).(*array.StringBuilder).Append(lin.BatchID)
	f(cSyncedAt).(*array.TimestampBuilder).Append(micros(lin.SyncedAt))
	f(cVersionTime).(*array.TimestampBuilder).Append(micros(b.VersionTime()))
	f(cDeleted).(*array.BooleanBuilder).Append(deleted)
	rb.rows++
	return nil
}

// NewRecord returns the rows appended so far as a record (the caller
// releases it) and empties the builder.
func (rb *RecordBuilder) NewRecord() arrow.RecordBatch {
	rb.rows = 0
	return rb.b.NewRecordBatch()
}
