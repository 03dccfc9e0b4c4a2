package bigquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
)

// Error is a BigQuery call that failed. Its message is one sentence naming
// what the sink was doing, on which project, dataset and table, what
// BigQuery objected to (the column or the permission, when it said), and
// what to do about it.
type Error struct {
	Op         string // what the sink was doing, e.g. "load batch b1"
	Project    string
	Dataset    string
	Table      string // "" for dataset operations
	JobID      string // the load job, if any
	Reason     string // BigQuery's reason: invalid, notFound, accessDenied, backendError, ...
	Column     string // the column BigQuery named, if any
	Permission string // the IAM permission BigQuery named, if any
	Temporary  bool   // retrying later may succeed
	Err        error
}

func (e *Error) Error() string {
	where := fmt.Sprintf("dataset %s.%s", e.Project, e.Dataset)
	if e.Table != "" {
		where = fmt.Sprintf("table %s.%s.%s", e.Project, e.Dataset, e.Table)
	}
	job := ""
	if e.JobID != "" {
		job = " (job " + e.JobID + ")"
	}
	said := message(e.Err)
	switch {
	case e.Reason == "accessDenied" || e.Reason == "forbidden":
		lacks := "lacks a permission"
		if e.Permission != "" {
			lacks = "lacks permission " + e.Permission
		}
		fix := fmt.Sprintf("grant it roles/bigquery.dataEditor on dataset %s.%s and roles/bigquery.jobUser on project %s", e.Project, e.Dataset, e.Project)
		if e.Permission == "bigquery.datasets.create" {
			fix = fmt.Sprintf("create dataset %s.%s yourself, or grant it roles/bigquery.dataEditor on project %s", e.Project, e.Dataset, e.Project)
		}
		return fmt.Sprintf("bigquery: %s on %s%s was denied: the service account %s (BigQuery said: %s); %s", e.Op, where, job, lacks, said, fix)
	case e.Reason == "invalid" || e.Reason == "invalidQuery":
		col := ""
		if e.Column != "" {
			col = " at column " + e.Column
		}
		return fmt.Sprintf("bigquery: %s on %s%s was rejected%s: %s", e.Op, where, job, col, said)
	case e.Reason == "notFound":
		return fmt.Sprintf("bigquery: %s on %s%s found nothing (%s): check sink.bigquery.project, dataset and location, and that the BigQuery API is enabled in project %s",
			e.Op, where, job, said, e.Project)
	case e.Reason == "quotaExceeded":
		return fmt.Sprintf("bigquery: %s on %s%s hit a quota (%s): a table takes at most 1,500 load jobs a day; sync less often or wait for the quota to refill",
			e.Op, where, job, said)
	case e.Temporary:
		return fmt.Sprintf("bigquery: %s on %s%s failed for now (%s): %s", e.Op, where, job, reasonOr(e.Reason, "no answer"), said)
	}
	return fmt.Sprintf("bigquery: %s on %s%s failed (%s): %s", e.Op, where, job, reasonOr(e.Reason, "error"), said)
}

func (e *Error) Unwrap() error { return e.Err }

func reasonOr(r, dflt string) string {
	if r == "" {
		return dflt
	}
	return r
}

// message is what BigQuery said, without the client's decoration.
func message(err error) string {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Message != "" {
		return ge.Message
	}
	var be *bigquery.Error
	if errors.As(err, &be) && be.Message != "" {
		return be.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// verdict is what to do about a failed call.
type verdict int

const (
	fatal     verdict = iota // stop: retrying will not help
	retry                    // temporary: try again; the outcome may be unknown
	duplicate                // the job id exists already
	missing                  // the thing asked for does not exist
)

// temporaryReason reports the reasons BigQuery documents as worth a retry.
func temporaryReason(r string) bool {
	switch r {
	case "backendError", "rateLimitExceeded", "internalError", "jobRateLimitExceeded", "jobBackendError", "jobInternalError":
		return true
	}
	return false
}

// foreignJobError is a job id of a batch that loads another table: two
// deployments share batch ids in one project. Retrying cannot help.
type foreignJobError struct{ msg string }

func (e *foreignJobError) Error() string { return e.msg }

// classify says what err means for the caller and BigQuery's reason.
func classify(err error) (verdict, string) {
	var fe *foreignJobError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &fe) {
		return fatal, ""
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		reason := ""
		if len(ge.Errors) > 0 {
			reason = ge.Errors[0].Reason
		}
		switch {
		case ge.Code == http.StatusConflict:
			return duplicate, reason
		case ge.Code == http.StatusNotFound:
			return missing, reasonOr(reason, "notFound")
		case ge.Code >= 500 || ge.Code == http.StatusTooManyRequests || temporaryReason(reason):
			return retry, reason
		case reason == "" && ge.Code == http.StatusForbidden:
			return fatal, "accessDenied"
		case reason == "" && ge.Code == http.StatusBadRequest:
			return fatal, "invalid"
		}
		return fatal, reason
	}
	var be *bigquery.Error
	if errors.As(err, &be) {
		if temporaryReason(be.Reason) {
			return retry, be.Reason
		}
		return fatal, be.Reason
	}
	// No answer (a cut connection, a timeout): the call may or may not
	// have taken effect. Retrying is safe because job ids are unique.
	return retry, ""
}

// BigQuery names the column at fault in messages of these shapes; the
// order matters, as "field name" also reads as a field called "name".
var (
	fieldNamed    = regexp.MustCompile(`[Ff]ield name "([^"]+)"`)
	fieldInParens = regexp.MustCompile(`\(field: ([^)]+)\)`)
	fieldWord     = regexp.MustCompile(`[Ff]ield '?([A-Za-z_][A-Za-z0-9_.]*)'? `)
	requiredField = regexp.MustCompile(`[Rr]equired field:? ([A-Za-z_][A-Za-z0-9_.]*)`)
	permission    = regexp.MustCompile(`bigquery\.[A-Za-z]+\.[A-Za-z]+`)
)

// apiError wraps a failed call into an *Error naming where it happened.
func (s *Sink) apiError(op, table, jobID string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("bigquery: %s on table %s: %w", op, table, err)
	}
	v, reason := classify(err)
	e := &Error{
		Op: op, Project: s.opts.Project, Dataset: s.opts.Dataset, Table: table, JobID: jobID,
		Reason: reason, Temporary: v == retry, Err: err,
	}
	msg := message(err)
	for _, p := range [...]*regexp.Regexp{fieldNamed, fieldInParens, fieldWord, requiredField} {
		if m := p.FindStringSubmatch(msg); m != nil {
			e.Column = strings.TrimSuffix(m[1], ".")
			break
		}
	}
	e.Permission = permission.FindString(msg)
	return e
}
