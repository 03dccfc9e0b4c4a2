package forms

import (
	"context"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// testPoller runs the engine over the forms of one API, as the app does:
// each job a Stream.
type testPoller struct {
	*poller.Poller
	src API
}

func newTestPoller(src API, snk sink.Sink, store state.Store, opts poller.Options) *testPoller {
	return &testPoller{Poller: poller.New(snk, store, opts), src: src}
}

func (p *testPoller) stream(job poller.Job) *Stream {
	return NewStream(p.src, job.Stream, job.Table, StreamOptions{})
}

func (p *testPoller) Sync(ctx context.Context, job poller.Job) poller.Result {
	return p.Poller.Sync(ctx, p.stream(job), job.Start)
}

func (p *testPoller) Backfill(ctx context.Context, job poller.Job, from, to time.Time, concurrency int, progress func(poller.Progress)) poller.Result {
	return p.Poller.Backfill(ctx, p.stream(job), from, to, concurrency, progress)
}

func (p *testPoller) Reconcile(ctx context.Context, job poller.Job, from time.Time) poller.Result {
	return p.Poller.Reconcile(ctx, p.stream(job), from)
}

// dayStart is the UTC midnight at or before t.
func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
