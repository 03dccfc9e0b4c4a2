package scheduling

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/poller"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
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
	key      string
	client   *Client
	table    string
	mem      memory.Allocator
	requests *Counter
}

// NewStream reads bookings through client into table; counter, when not
// nil, is the one the client's Observer reports to.
func NewStream(client *Client, table string, mem memory.Allocator, counter *Counter) *Stream {
	return NewAccountStream("", client, table, mem, counter)
}

// NewAccountStream is NewStream for the account of namespace: its key is
// table.StreamKey(namespace, StreamKey).
func NewAccountStream(namespace string, client *Client, tableName string, mem memory.Allocator, counter *Counter) *Stream {
	table := tableName
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if counter == nil {
		counter = &Counter{}
	}
	return &Stream{key: tablepkg.StreamKey(namespace, StreamKey), client: client, table: table, mem: mem, requests: counter}
}

// Key is StreamKey, in the account's namespace.
func (s *Stream) Key() string { return s.key }

// Table is the bookings table.
func (s *Stream) Table() string { return s.table }

// Columns: windows and partitions follow the version time; a booking's
// rows (named by its uid) are its versions, in version time.
func (s *Stream) Columns() poller.Columns {
	return poller.Columns{Time: ColVersionTime, Key: "uid", Version: ColVersionTime, Required: []string{"uid", ColVersionTime}}
}

// Description is what the bookings table holds.
func (s *Stream) Description() string {
	return "Bookings of the scheduling API, one row per version (created, rescheduled, cancelled) by its version time"
}

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

// Read puts the booking versions of w into rows, in records of at most
// chunkRows rows, which the engine spools.
func (s *Stream) Read(ctx context.Context, w poller.Window, rows *poller.Rows) error {
	rb := NewRecordBuilder(rows.Allocator())
	defer rb.Release()
	lin := rows.Lineage()
	flush := func() error {
		if rb.Len() == 0 {
			return nil
		}
		rec := rb.NewRecord()
		defer rec.Release()
		return rows.Record(rec)
	}
	err := s.client.Changes(ctx, w.Start, w.End, func(b *Booking) error {
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

// chunkRows bounds the bookings of one record: a booking takes about a
// kilobyte in Arrow.
const chunkRows = 2048

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
