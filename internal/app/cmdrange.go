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

// ResetFrom reads `state reset`'s --from (given: it was on the command
// line) for form formID; zero without it: forget everything.
func ResetFrom(from string, given bool, formID string) (time.Time, error) {
	// An empty --from (an unset variable in a script) is never "forget
	// everything".
	if given && strings.TrimSpace(from) == "" {
		return time.Time{}, fmt.Errorf("--from is empty: give a date, e.g. --from 2024-01-31 (or RFC 3339), or leave --from out to forget everything synced of form %s; nothing was changed", formID)
	}
	start, err := config.ParseDate(from)
	if err != nil {
		return time.Time{}, fmt.Errorf("--from: %w", err)
	}
	return start, nil
}

// ResetWarning is what `state reset` of formID from from (zero: all of it)
// asks a person to confirm, starting "Forget ": the rows come again.
func ResetWarning(formID string, from time.Time) string {
	if from.IsZero() {
		return fmt.Sprintf("Forget everything synced of form %s? The next pass fetches it again and writes those rows a second time beside the ones already in the output (`syncd refresh --form %s` replaces the table instead).", formID, formID)
	}
	what := fmt.Sprintf("what was synced of form %s from %s on", formID, from.Format(time.RFC3339))
	return fmt.Sprintf("Forget %s? The next pass fetches it again and writes those rows a second time beside the ones already in the output. To have them once, first remove the table's partition folders from that date on (with the day or month layout a row's folder is its own date: pick --from at the start of a folder), or use `syncd reconcile --form %s --from DATE`, which writes only what changed.", what, formID)
}

// BackupEvery is the shortest `state backup --every`: each backup copies
// the whole state, so a shorter interval only loads the disk and, with
// --keep, prunes the very copies a backup is kept for.
const BackupEvery = time.Minute

// BackupArgs checks `state backup`'s --every (0: once) and --keep (0: keep
// all) for DEST (folder: it ends in '/').
func BackupArgs(every time.Duration, keep int, folder bool) error {
	if every < 0 || every > 0 && every < BackupEvery {
		return fmt.Errorf("--every %s: give an interval of a minute or more (e.g. 24h), or leave --every out for one backup; nothing was written", every)
	}
	if keep < 0 || (keep > 0 && !folder) {
		return fmt.Errorf("--keep %d: it needs a DEST that is a folder or bucket prefix ending in '/', and N of 1 or more", keep)
	}
	return nil
}

// ClipToHorizon is a backfill's end cut at horizon (now -
// sync.safety_lag), past which nothing is committed, and, when it was
// cut, the note that says so.
func ClipToHorizon(end, horizon time.Time) (time.Time, string) {
	if !end.After(horizon) {
		return end, ""
	}
	return horizon, fmt.Sprintf("--to %s is past now - sync.safety_lag; backfilling up to %s instead", end.Format(time.RFC3339), horizon.Format(time.RFC3339Nano))
}
