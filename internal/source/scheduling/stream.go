package scheduling

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/schema"
)

// StreamKey names the bookings stream in the state store and its batch
// ids: the "/" keeps it from ever being taken for a form id.
const StreamKey = "scheduling/bookings"

// Stream is the account's bookings as a stream of versions (poller.Stream):
// its time is each change's version time (updatedAt, or createdAt for a
// booking never updated), so a cancellation or a reschedule lands in a
// later window as a new row, and a window once committed is never read
// again.
type Stream struct {
	client   *Client
	table    string
	mem      memory.Allocator
	requests *Counter
}

// NewStream reads bookings through client into table; counter, when not
// nil, is the one the client's Observer reports to.
func NewStream(client *Client, table string, mem memory.Allocator, counter *Counter) *Stream {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if counter == nil {
		counter = &Counter{}
	}
	return &Stream{client: client, table: table, mem: mem, requests: counter}
}

// Key is StreamKey.
func (s *Stream) Key() string { return StreamKey }

// Table is the bookings table.
func (s *Stream) Table() string { return s.table }

// TimeColumn is the version time: windows and partitions follow it.
func (s *Stream) TimeColumn() string { return ColVersionTime }

// KeyColumn names a booking: its rows are its versions.
func (s *Stream) KeyColumn() string { return "uid" }

// Requests is how many requests the client made.
func (s *Stream) Requests() int64 { return s.requests.n.Load() }

// Count is how many bookings were updated in [start, end): one request
// with take=1. Bookings never updated (a null updatedAt) are not counted;
// the count only sizes windows, and Read finds them.
func (s *Stream) Count(ctx context.Context, start, end time.Time) (int, error) {
	last := end.Add(-time.Millisecond) // the API's bounds are inclusive
	if last.Before(start) {
		return 0, nil
	}
	page, err := s.client.ListBookings(ctx, ListParams{Take: 1, AfterUpdatedAt: &start, BeforeUpdatedAt: &last, Statuses: AllStatuses})
	if err != nil {
		return 0, err
	}
	return page.Pagination.TotalItems, nil
}

// Read calls emit with the booking versions of [start, end), in records
// of at most chunkRows rows (poller.Stream).
func (s *Stream) Read(ctx context.Context, start, end time.Time, lin schema.Lineage, chunkRows int, emit func(arrow.Record) error) error {
	if chunkRows < 1 {
		chunkRows = 4096
	}
	rb := NewRecordBuilder(s.mem)
	defer rb.Release()
	flush := func() error {
		if rb.Len() == 0 {
			return nil
		}
		rec := rb.NewRecord()
		defer rec.Release()
		return emit(rec)
	}
	err := s.client.Changes(ctx, start, end, func(b *Booking) error {
		if err := rb.Append(b, Lineage{BatchID: lin.BatchID, SyncedAt: lin.SyncedAt}, false); err != nil {
			return fmt.Errorf("booking %s: %w", b.UID, err)
		}
		if rb.Len() >= chunkRows {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// Counter counts the requests a client makes, passing each on to next.
type Counter struct {
	n    atomic.Int64
	Next httpapi.Observer
}

// ObserveRequest counts one attempt.
func (c *Counter) ObserveRequest(endpoint string, status, attempt int, d time.Duration, err error) {
	c.n.Add(1)
	if c.Next != nil {
		c.Next.ObserveRequest(endpoint, status, attempt, d, err)
	}
}
