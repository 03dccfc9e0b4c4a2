package control

// A command's reading of the outcome of a backfill the daemon did for it.

import (
	"errors"
	"net/http"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
)

// BadRequest reports whether err is the daemon's refusal of the request
// itself (a range, an account, a form id: the command's usage error), not
// of its token nor a failure of the daemon.
func BadRequest(err error) bool {
	var refused *Refusal
	return errors.As(err, &refused) && refused.Status < 500 && refused.Status != http.StatusUnauthorized
}

// Failure is the exit code and the error of a backfill that ended with no
// results (it never began): never a success.
func (d *Done) Failure() (code int, err error) {
	code = d.Code
	if code == CodeOK {
		code = CodeFailed
	}
	return code, errors.New(d.Error)
}

// Took is how long the backfill ran, as the daemon measured it, or since
// started when it did not say.
func (d *Done) Took(started time.Time) time.Duration {
	took := time.Duration(d.Seconds * float64(time.Second))
	if took == 0 {
		took = time.Since(started)
	}
	return took
}

// PassResults are the results the daemon's summary describes, for printing
// as the command alone prints them.
func (d *Done) PassResults() []poller.Result {
	out := make([]poller.Result, 0, len(d.Results))
	for _, e := range d.Results {
		out = append(out, e.Result())
	}
	return out
}
