package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
)

// BackfillRange reads a backfill's --from and --to (toGiven: --to was on
// the command line) into [start, end): a date (2024-01-31) or RFC 3339;
// no --to is now. Every error is the operator's, named after its flag.
func BackfillRange(from, to string, toGiven bool, now time.Time) (start, end time.Time, err error) {
	// An empty --from or --to (an unset variable in a script) is a
	// mistake: never "from the beginning".
	if strings.TrimSpace(from) == "" {
		return start, end, errors.New("--from is empty: give the start of the range, e.g. --from 2024-01-31 (or RFC 3339)")
	}
	if toGiven && strings.TrimSpace(to) == "" {
		return start, end, errors.New("--to is empty: give the end of the range, e.g. --to 2024-07-01 (or RFC 3339), or leave --to out to backfill up to now - sync.safety_lag; nothing was written")
	}
	if start, err = config.ParseDate(from); err != nil {
		return start, end, fmt.Errorf("--from: %w", err)
	}
	if end, err = config.ParseDate(to); err != nil {
		return start, end, fmt.Errorf("--to: %w", err)
	}
	if end.IsZero() {
		end = now.UTC()
	}
	if !start.Before(end) {
		return start, end, fmt.Errorf("--from %s is not before --to %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}

// ReconcileFrom reads a reconcile's --from (given: it was on the command
// line); zero when it is not given (now - sync.lookback).
func ReconcileFrom(from string, given bool) (time.Time, error) {
	if given && strings.TrimSpace(from) == "" {
		return time.Time{}, errors.New("--from is empty: give a date, e.g. --from 2024-01-31 (or RFC 3339), or leave --from out to reconcile sync.lookback")
	}
	start, err := config.ParseDate(from)
	if err != nil {
		return time.Time{}, fmt.Errorf("--from: %w", err)
	}
	return start, nil
}

// FromBeforeHorizon refuses a --from at or after horizon (now -
// sync.safety_lag): nothing may be committed there yet, so the command
// (verb: backfill, reconcile) has nothing to do.
func FromBeforeHorizon(start, horizon time.Time, verb string) error {
	if start.Before(horizon) {
		return nil
	}
	return fmt.Errorf("--from %s is not before now - sync.safety_lag (%s): there is nothing to %s yet; nothing was written",
		start.Format(time.RFC3339), horizon.Format(time.RFC3339), verb)
}
