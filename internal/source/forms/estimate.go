package forms

import (
	"context"
	"fmt"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
)

var _ source.Estimator = (*Account)(nil)

// Estimate is what reading w of a form takes: its submissions (when
// planning did not count them, the dry run asks for the count, with one
// limit=1 request the pass does not make) in pages of the stream's page
// size that overlap by one row, less the first page when planning read it.
func (a *Account) Estimate(ctx context.Context, s source.Stream, w poller.PlannedWindow) (source.Estimate, error) {
	fs, ok := s.Stream.(*Stream)
	if !ok {
		return source.Estimate{}, fmt.Errorf("estimate stream %s: it is not a form's", s.Key())
	}
	rows := w.Rows
	if rows < 0 {
		n, err := fs.countFirst(ctx, w.Start, w.End)
		if err != nil {
			return source.Estimate{}, err
		}
		rows = n
	}
	return source.Estimate{Records: rows, Requests: int(poller.PagesFor(rows, fs.opts.PageSize, w.FirstRead))}, nil
}

// countFirst is the number of submissions in [a, b), with one limit=1
// request, as the poller asks; 0 when the page's first submission is not
// before b (the API may hold b in the range).
func (s *Stream) countFirst(ctx context.Context, a, b time.Time) (int, error) {
	p := api.ListParams{Limit: 1, Sort: api.SortAsc}
	if a.After(time.Unix(0, 0)) {
		after := a.Add(-time.Millisecond)
		p.AfterDate = &after
	}
	p.BeforeDate = &b
	s.requests.Add(1)
	page, err := s.api.ListSubmissions(ctx, s.form, p)
	if err != nil {
		return 0, fmt.Errorf("count submissions of form %s: %w", s.form, err)
	}
	if page.TotalResponses == 0 || len(page.Responses) == 0 || !page.Responses[0].SubmissionTime.Before(b) {
		return 0, nil
	}
	return page.TotalResponses, nil
}
