package source

import (
	"context"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
)

// Jobs is an Account whose streams are chosen per pass, by id: a command
// names some, a webhook delivery names one, the daemon schedules each on
// its own, and a pass syncs them concurrently under the account's rate
// limit (the forms: one stream per form, dozens per account). The streams
// of an Account without it are synced all together, one after the other.
type Jobs interface {
	Account
	// Jobs are the streams a full pass syncs, as the account's
	// configuration selects them (it may ask the service).
	Jobs(ctx context.Context) ([]poller.Job, error)
	// Job is the job of the stream of that id: as configured, or with
	// the defaults when the configuration does not name it.
	Job(id string) poller.Job
	// JobStream is the stream a job syncs, read with the account's
	// credentials of now.
	JobStream(job poller.Job) poller.Stream
}

// MissingStream is an Account that says what its service's "not found"
// for one of its streams means: a configured stream the account does not
// have (deleted since, or mistyped), named with the closest ids it has.
// That stream fails; the others sync.
type MissingStream interface {
	Missing(ctx context.Context, id string, err error) error
}

// Credentialed is a Source whose account settings name a secret read
// from outside the configuration (a mounted key file): a reload reopens
// the account when what Credential reads changes. The value is hashed,
// never kept or logged.
type Credentialed interface {
	// Credential is the account's secret as it reads now; "" when the
	// account does not use the source, or reads its secret at each pass
	// (a sign-in in the state).
	Credential(ac config.Account) (string, error)
}
