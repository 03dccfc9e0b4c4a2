package scheduling

import (
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/table"
)

// Names reports whether arg names the bookings stream of acct: StreamKey,
// bare or in the account's namespace; none when the account does not
// sign in to the scheduling API (source.Namer).
func (Source) Names(acct config.Account, arg string) bool {
	return acct.Scheduling && (arg == StreamKey || arg == table.StreamKey(acct.Namespace(), StreamKey))
}
