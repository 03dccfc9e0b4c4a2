package status

import (
	"errors"

	"github.com/syncd-dev/syncd/internal/poller"
)

// Foreign reports whether a stream of the pass found its table holding
// batches this state never recorded (poller.ForeignOutputError): the
// operator's to settle (state adopt), not a failure to retry.
func Foreign(results []poller.Result) bool {
	for _, r := range results {
		var foreign *poller.ForeignOutputError
		if errors.As(r.Err, &foreign) {
			return true
		}
	}
	return false
}
