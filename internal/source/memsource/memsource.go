// Package memsource is a source that exists only in tests: a tiny
// in-memory stream of fixed records in a fixed-schema table, wired
// through the app's one list of sources by the testsource build tag
// (internal/app/sources_testsource.go). It proves that a source needs its
// own package and nothing more from the app: it opens for every account,
// needs no configuration section, and reads no network.
package memsource

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// Name is the source's name; StreamKey its one stream's key, and Table
// its table.
const (
	Name      = "mem"
	StreamKey = Name + "/items"
	Table     = "mem_items"
)

// Records is how many records the stream holds: one an hour from First.
const Records = 48

// First is the time of the first record.
var First = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// ID is the id of record i.
func ID(i int) string { return fmt.Sprintf("m%03d", i) }

// Source is the test source as the app lists it.
type Source struct{}

var (
	_ source.Source     = Source{}
	_ source.Prober     = Source{}
	_ source.Estimator  = (*Account)(nil)
	_ poller.Counter    = (*Stream)(nil)
	_ poller.Describer  = (*Stream)(nil)
	_ poller.Reconciler = (*Stream)(nil)
)

// Name is "mem".
func (Source) Name() string { return Name }

// Open opens the stream for every account, from sync.start_date.
func (Source) Open(_ context.Context, env source.Env) (source.Account, error) {
	s := &Stream{key: tablepkg.StreamKey(env.Account.Namespace(), StreamKey)}
	return &Account{stream: s, start: env.Config.Sync.StartDate.Time}, nil
}

// Account is the source opened for an account.
type Account struct {
	stream *Stream
	start  time.Time
}

// Streams is the one stream.
func (a *Account) Streams(context.Context) ([]source.Stream, error) {
	return []source.Stream{{Stream: a.stream, Start: a.start}}, nil
}

// Probe always works: there is no service.
func (Source) Probe(context.Context, source.Env) error { return nil }

// Estimate is the records of w (counted, when planning did not count
// them): the stream reads them in one request per window.
func (a *Account) Estimate(ctx context.Context, s source.Stream, w poller.PlannedWindow) (source.Estimate, error) {
	if w.Rows >= 0 {
		return source.Estimate{Records: w.Rows, Requests: 1}, nil
	}
	n, err := a.stream.Count(ctx, w.Start, w.End)
	return source.Estimate{Records: n, Requests: 1}, err
}

// Stream is the fixed records as a poller.Stream.
type Stream struct {
	key      string
	requests atomic.Int64
}

// Key is StreamKey in the account's namespace.
func (s *Stream) Key() string { return s.key }

// Table is Table.
func (s *Stream) Table() string { return Table }

// Description says what the table holds.
func (s *Stream) Description() string { return "Records of the in-memory test source" }

// Columns: records are named by id and never change.
func (s *Stream) Columns() poller.Columns {
	return poller.Columns{Time: "at", Key: "id", Version: "at", Required: []string{"id", "at"}}
}

// Requests counts Reads and Counts, as a service's requests.
func (s *Stream) Requests() int64 { return s.requests.Load() }

// Count is how many records [start, end) holds.
func (s *Stream) Count(_ context.Context, start, end time.Time) (int, error) {
	s.requests.Add(1)
	n := 0
	for i := range Records {
		if at := at(i); !at.Before(start) && at.Before(end) {
			n++
		}
	}
	return n, nil
}

func at(i int) time.Time { return First.Add(time.Duration(i) * time.Hour) }

var ts = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Schema is the fixed table, with the managed columns.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "at", Type: ts},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_batch_id", Type: arrow.BinaryTypes.String},
		{Name: "_synced_at", Type: ts},
		{Name: "_deleted", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
}

// Read puts the records of w into rows, as one record, each version in
// the version index.
func (s *Stream) Read(_ context.Context, w poller.Window, rows *poller.Rows) error {
	s.requests.Add(1)
	var put []state.Entry
	for i := range Records {
		if t := at(i); !t.Before(w.Start) && t.Before(w.End) {
			put = append(put, entry(i))
		}
	}
	for _, e := range put {
		rows.Index(e)
	}
	return write(rows, put, nil)
}

// Reconcile reads w again. The records never change: what it finds is a
// record the index lacks (or holds in another version), and one the index
// holds that is not there (deleted).
func (s *Stream) Reconcile(_ context.Context, w poller.Window, known map[string]state.Version, _ time.Time) (poller.Changes, error) {
	s.requests.Add(1)
	var c poller.Changes
	have := map[string]bool{}
	for i := range Records {
		if t := at(i); t.Before(w.Start) || !t.Before(w.End) {
			continue
		}
		e := entry(i)
		have[e.ID] = true
		if v, ok := known[e.ID]; !ok || !v.Time.Equal(e.Time) || v.Hash != e.Hash {
			c.Index.Put = append(c.Index.Put, e)
		}
	}
	for id, v := range known {
		if !have[id] {
			c.Index.Gone = append(c.Index.Gone, state.Entry{ID: id, Version: v})
		}
	}
	c.Write = func(rows *poller.Rows) error { return write(rows, c.Index.Put, c.Index.Gone) }
	return c, nil
}

// entry is what the version index records of record i: its time, which is
// its one version.
func entry(i int) state.Entry {
	t := at(i)
	return state.Entry{ID: ID(i), Version: state.Version{Time: t, Hash: state.TimeVersion(t)}}
}

// write puts the records of put into rows, and a tombstone row for each
// of gone, as one record.
func write(rows *poller.Rows, put, gone []state.Entry) error {
	if len(put)+len(gone) == 0 {
		return nil
	}
	b := array.NewRecordBuilder(rows.Allocator(), Schema())
	defer b.Release()
	lin := rows.Lineage()
	add := func(e state.Entry, deleted bool) {
		var value int64
		if _, err := fmt.Sscanf(e.ID, "m%d", &value); err != nil {
			value = -1
		}
		b.Field(0).(*array.StringBuilder).Append(e.ID)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(e.Time.UnixMicro()))
		b.Field(2).(*array.Int64Builder).Append(value)
		b.Field(3).(*array.StringBuilder).Append(lin.BatchID)
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(lin.SyncedAt.UTC().UnixMicro()))
		b.Field(5).(*array.BooleanBuilder).Append(deleted)
	}
	for _, e := range put {
		add(e, false)
	}
	for _, e := range gone {
		add(e, true)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return rows.Record(rec)
}
