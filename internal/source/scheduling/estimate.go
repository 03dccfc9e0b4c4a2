package scheduling

import (
	"context"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
)

var _ source.Estimator = (*Account)(nil)

// Estimate is what reading w takes, from the count planning made: Read
// walks the window twice (by update, and the bookings never updated by
// creation), pages of MaxTake each.
func (a *Account) Estimate(_ context.Context, _ source.Stream, w poller.PlannedWindow) (source.Estimate, error) {
	return source.Estimate{Records: w.Rows, Requests: 2 * (w.Rows/MaxTake + 1)}, nil
}
