package memsource

import (
	"context"

	"github.com/syncd-dev/syncd/internal/source"
)

var _ source.ReadOnly = Source{}

// OpenReadOnly is Open: the source keeps nothing in the state, and
// reading it writes nothing.
func (s Source) OpenReadOnly(ctx context.Context, env source.Env) (source.Account, error) {
	return s.Open(ctx, env)
}
