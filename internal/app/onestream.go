package app

import (
	"context"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/table"
)

// A command on one stream (reconcile, refresh) names it by id: a form's
// id, or the key of another source's stream without the account's
// namespace ("scheduling/bookings"). A form id has no "/", another
// source's stream key always has one.

// SelectStream checks the id of the one stream a command works on, before
// anything is written: a stream of another source the account uses, or a
// form the account syncs (Select).
func (r *Reader) SelectStream(ctx context.Context, id string) error {
	if strings.Contains(id, "/") {
		pl := &planner{r: r, now: time.Now()}
		for _, src := range sourceList() {
			if src.Name() == poller.SourceForms {
				continue
			}
			acct, _, err := pl.readSource(ctx, src)
			if err != nil || acct == nil {
				continue
			}
			streams, err := acct.Streams(ctx)
			if err != nil {
				return err
			}
			for _, s := range streams {
				if pl.id(s.Key()) == id {
					return nil
				}
			}
		}
	}
	return r.Select(ctx, []string{id})
}

// StreamOf is the account's stream of id (see SelectStream): another
// source's, once its sign-in is read, or the form's.
func (acct *Account) StreamOf(ctx context.Context, id string) (source.Stream, error) {
	if strings.Contains(id, "/") {
		key := table.StreamKey(acct.Cfg.Namespace(), id)
		for _, src := range acct.sources {
			streams, err := acct.sourceStreams(ctx, src)
			if err != nil {
				return source.Stream{}, err
			}
			for _, s := range streams {
				if s.Key() == key {
					return s, nil
				}
			}
		}
	}
	job := acct.Job(id)
	s, err := acct.Stream(job)
	if err != nil {
		return source.Stream{}, err
	}
	return source.Stream{Stream: s, Start: job.Start}, nil
}
