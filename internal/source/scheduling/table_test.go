package scheduling

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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

	path := writeParquet(t, mem, rec)
	db := openDuckDB(t)
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

// A seated booking (the simulator's workshops) as the API serves it over
// HTTP → Changes → Arrow record → Parquet → DuckDB: each attendee's
// seatUid reads back in attendees, its bookingFieldsResponses and metadata
// in the booking's seats (by seat) equal to the served JSON; a booking
// without seats has none, and a seated one no responses of its own.
func TestSeatedAttendeesRoundTripThroughParquetAndDuckDB(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 9, Bookings: 40})
	c, _ := e.client(t, "sim-legacy")
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rb := NewRecordBuilder(mem)
	defer rb.Release()
	lin := Lineage{BatchID: "bookings-b1", SyncedAt: time.Now()}
	err := c.Changes(context.Background(), time.Unix(0, 0), time.Now().Add(time.Second), func(b *Booking) error {
		return rb.Append(b, lin, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := rb.NewRecord()
	defer rec.Release()
	path := writeParquet(t, mem, rec)
	db := openDuckDB(t)
	query := func(q string, scan func(*sql.Rows) error) {
		t.Helper()
		rows, err := db.Query(fmt.Sprintf(q, path))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	type booking struct {
		seats         []sql.NullString // attendees' seat_uid, in order
		ownResponses  bool
		seatsNull     bool
		seatResponses map[string]sql.NullString
		seatMetadata  map[string]sql.NullString
	}
	got := map[string]*booking{}
	query(`SELECT uid, booking_fields_responses IS NOT NULL, seats IS NULL FROM read_parquet('%s')`, func(rows *sql.Rows) error {
		var uid string
		b := &booking{seatResponses: map[string]sql.NullString{}, seatMetadata: map[string]sql.NullString{}}
		if err := rows.Scan(&uid, &b.ownResponses, &b.seatsNull); err != nil {
			return err
		}
		got[uid] = b
		return nil
	})
	query(`SELECT uid, i, attendees[i].seat_uid FROM (SELECT *, unnest(range(1, len(attendees) + 1)) AS i FROM read_parquet('%s')) ORDER BY uid, i`, func(rows *sql.Rows) error {
		var (
			uid  string
			i    int
			seat sql.NullString
		)
		if err := rows.Scan(&uid, &i, &seat); err != nil {
			return err
		}
		got[uid].seats = append(got[uid].seats, seat)
		return nil
	})
	seatRows := 0
	query(`SELECT uid, s.seat_uid, s.booking_fields_responses, s.metadata FROM (SELECT uid, unnest(seats) AS s FROM read_parquet('%s'))`, func(rows *sql.Rows) error {
		var (
			uid, seat      string
			resp, metadata sql.NullString
		)
		if err := rows.Scan(&uid, &seat, &resp, &metadata); err != nil {
			return err
		}
		seatRows++
		got[uid].seatResponses[seat], got[uid].seatMetadata[seat] = resp, metadata
		return nil
	})

	// sameJSON: both null, or both JSON of equal value.
	sameJSON := func(got sql.NullString, want json.RawMessage) bool {
		if !got.Valid || want == nil {
			return got.Valid == (want != nil)
		}
		var g, w any
		return json.Unmarshal([]byte(got.String), &g) == nil && json.Unmarshal(want, &w) == nil && reflect.DeepEqual(g, w)
	}
	var seated, seatedAttendees, withMetadata int
	journal := e.sim.Journal()
	for _, j := range journal {
		var served struct {
			Attendees []struct {
				SeatUID   *string         `json:"seatUid"`
				Responses json.RawMessage `json:"bookingFieldsResponses"`
				Metadata  json.RawMessage `json:"metadata"`
			} `json:"attendees"`
			Responses json.RawMessage `json:"bookingFieldsResponses"`
		}
		if err := json.Unmarshal(j.Booking, &served); err != nil {
			t.Fatal(err)
		}
		b := got[j.UID]
		if b == nil || len(b.seats) != len(served.Attendees) {
			t.Errorf("booking %s: not read back with its %d attendees", j.UID, len(served.Attendees))
			continue
		}
		isSeated := served.Attendees[0].SeatUID != nil
		if isSeated {
			seated++
		}
		if b.ownResponses != (served.Responses != nil) || b.seatsNull == isSeated {
			t.Errorf("booking %s: booking_fields_responses read back %t (served %t), seats null %t (seated %t)",
				j.UID, b.ownResponses, served.Responses != nil, b.seatsNull, isSeated)
		}
		for i, sa := range served.Attendees {
			if (sa.SeatUID == nil) != !b.seats[i].Valid || (sa.SeatUID != nil && *sa.SeatUID != b.seats[i].String) {
				t.Errorf("booking %s attendee %d: seat_uid %v, served %v", j.UID, i, b.seats[i], sa.SeatUID)
			}
			if sa.SeatUID == nil {
				continue
			}
			seatedAttendees++
			if sa.Metadata != nil {
				withMetadata++
			}
			if !sameJSON(b.seatResponses[*sa.SeatUID], sa.Responses) {
				t.Errorf("booking %s seat %s: booking_fields_responses %v, served %s", j.UID, *sa.SeatUID, b.seatResponses[*sa.SeatUID], sa.Responses)
			}
			if !sameJSON(b.seatMetadata[*sa.SeatUID], sa.Metadata) {
				t.Errorf("booking %s seat %s: metadata %v, served %s", j.UID, *sa.SeatUID, b.seatMetadata[*sa.SeatUID], sa.Metadata)
			}
		}
	}
	if len(got) != len(journal) || seated == 0 || seated == len(journal) || withMetadata == 0 || seatRows != seatedAttendees {
		t.Errorf("%d bookings read back of %d served, %d seated, %d seats read of %d seated attendees, %d with metadata: the data does not cover seated and other bookings",
			len(got), len(journal), seated, seatRows, seatedAttendees, withMetadata)
	}
}

// writeParquet writes rec as a Parquet file (pqarrow, as the sinks do) and
// returns its path.
func writeParquet(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch) string {
	t.Helper()
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
	return path
}

func openDuckDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func strPtr(raw json.RawMessage) *string {
	if raw == nil {
		return nil
	}
	s := string(raw)
	return &s
}
