package scheduling

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" driver

	"github.com/syncd-dev/syncd/internal/schedsim"
)

// Bookings from the simulator → Arrow record → Parquet (pqarrow) → DuckDB:
// every column reads back as it went in, nulls, lists of structs, JSON text
// and microsecond UTC timestamps included.
func TestBookingsRecordRoundTripThroughParquetAndDuckDB(t *testing.T) {
	sim := schedsim.New(schedsim.Config{Seed: 9, Bookings: 40})
	sim.Reschedule(sim.Journal()[3].UID, "moved")
	var bookings []*Booking
	for _, j := range sim.Journal() {
		b, err := DecodeBooking(j.Booking)
		if err != nil {
			t.Fatal(err)
		}
		bookings = append(bookings, b)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rb := NewRecordBuilder(mem)
	defer rb.Release()
	lin := Lineage{BatchID: "bookings-b1", SyncedAt: time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC)}
	for i, b := range bookings {
		if err := rb.Append(b, lin, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.Append(bookings[0], Lineage{}, false); err == nil {
		t.Error("a row without lineage was accepted")
	}
	rec := rb.NewRecord()
	defer rec.Release()
	if rec.NumRows() != int64(len(bookings)) || !rec.Schema().Equal(BookingsSchema()) {
		t.Fatalf("record: %d rows, schema equal %t", rec.NumRows(), rec.Schema().Equal(BookingsSchema()))
	}

	path := filepath.Join(t.TempDir(), "bookings.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(parquet.WithAllocator(mem)), pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(fmt.Sprintf(`SELECT id, uid, status, epoch_us(start_time), epoch_us(end_time), duration_minutes,
		event_type_id, len(attendees), attendees[1].name, attendees[1].email, attendees[1].phone_number, hosts[1].id, hosts[1].username,
		guests IS NULL, booking_fields_responses, metadata, cancellation_reason, rescheduled_from_uid, rescheduled_to_uid,
		rating, epoch_us(created_at), epoch_us(updated_at), _batch_id, epoch_us(_synced_at), epoch_us(_version_time), _deleted
		FROM read_parquet('%s') ORDER BY id`, path))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var (
			id, start, end, created, synced, version, hostID int64
			dur, natt                                        int
			uid, status, att1, batch, hostUser               string
			etID, updated                                    sql.NullInt64
			rating                                           sql.NullInt32
			email, phone, resp, meta, cancel, from, to       sql.NullString
			guestsNull, deleted                              bool
		)
		if err := rows.Scan(&id, &uid, &status, &start, &end, &dur, &etID, &natt, &att1, &email, &phone, &hostID, &hostUser,
			&guestsNull, &resp, &meta, &cancel, &from, &to, &rating, &created, &updated, &batch, &synced, &version, &deleted); err != nil {
			t.Fatal(err)
		}
		b := bookings[i]
		i++
		ns := func(p *string) sql.NullString {
			if p == nil {
				return sql.NullString{}
			}
			return sql.NullString{String: *p, Valid: true}
		}
		want := fmt.Sprint(b.ID, b.UID, b.Status, b.Start.UnixMicro(), b.End.UnixMicro(), b.Duration, *b.EventTypeID, len(b.Attendees),
			b.Attendees[0].Name, ns(b.Attendees[0].Email), ns(b.Attendees[0].PhoneNumber), b.Hosts[0].ID, *b.Hosts[0].Username,
			b.Guests == nil, ns(strPtr(b.BookingFieldsResponses)), ns(strPtr(b.Metadata)), ns(b.CancellationReason),
			ns(b.RescheduledFromUID), ns(b.RescheduledToUID), b.Rating != nil, b.CreatedAt.UnixMicro(),
			b.UpdatedAt != nil, lin.BatchID, lin.SyncedAt.UnixMicro(), b.VersionTime().UnixMicro(), i == 1)
		gotRating := rating.Valid
		if gotRating && rating.Int32 != *b.Rating {
			t.Errorf("row %d rating %d, want %d", i, rating.Int32, *b.Rating)
		}
		if updated.Valid && updated.Int64 != b.UpdatedAt.UnixMicro() {
			t.Errorf("row %d updated_at %d, want %d", i, updated.Int64, b.UpdatedAt.UnixMicro())
		}
		got := fmt.Sprint(id, uid, status, start, end, dur, etID.Int64, natt, att1, email, phone, hostID, hostUser,
			guestsNull, resp, meta, cancel, from, to, gotRating, created, updated.Valid, batch, synced, version, deleted)
		if got != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, got, want)
		}
		if resp.Valid {
			var a, b2 any
			if json.Unmarshal([]byte(resp.String), &a) != nil || json.Unmarshal(b.BookingFieldsResponses, &b2) != nil || fmt.Sprint(a) != fmt.Sprint(b2) {
				t.Errorf("row %d responses do not round-trip", i)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(bookings) {
		t.Fatalf("%d rows read back, want %d", i, len(bookings))
	}
}

func strPtr(raw json.RawMessage) *string {
	if raw == nil {
		return nil
	}
	s := string(raw)
	return &s
}
