package bqfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	bq "google.golang.org/api/bigquery/v2"
)

// tableRef finds `project.dataset.table` references in a query.
var tableRef = regexp.MustCompile("`([A-Za-z0-9_:-]+)\\.([A-Za-z0-9_]+)\\.([A-Za-z0-9_]+(?:\\.[A-Za-z0-9_]+)?)`")

// insertJob serves POST /projects/{project}/jobs for the one kind of job
// inserted without an upload that syncd sends: a dry-run query (`syncd
// validate` checks its permissions with one). It checks
// bigquery.jobs.create, that every dataset the query names exists and that
// bigquery.tables.list is allowed on it, and answers a DONE job that
// processed 0 bytes, as BigQuery answers a dry run. Nothing is run.
func (s *Server) insertJob(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	var in bq.Job
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid JSON payload received: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Configuration == nil || in.Configuration.Query == nil || !in.Configuration.DryRun {
		s.tb.Errorf("bqfake: jobs.insert without an upload that is not a dry-run query: the fake only answers dry runs there")
		writeAPIError(w, &apiError{http.StatusNotImplemented, "notImplemented", "bqfake answers dry-run queries only"})
		return
	}
	if err := s.deny("bigquery.jobs.create", "Project "+project); err != nil {
		err.msg = fmt.Sprintf("Access Denied: Project %s: User does not have bigquery.jobs.create permission in project %s.", project, project)
		writeAPIError(w, err)
		return
	}
	for _, m := range tableRef.FindAllStringSubmatch(in.Configuration.Query.Query, -1) {
		p, d := m[1], m[2]
		if s.datasets[dsKey{p, d}] == nil {
			writeAPIError(w, errNotFound("Dataset %s:%s was not found in location US", p, d))
			return
		}
		if err := s.deny("bigquery.tables.list", fmt.Sprintf("Dataset %s:%s", p, d)); err != nil {
			writeAPIError(w, err)
			return
		}
	}
	if in.JobReference == nil {
		in.JobReference = &bq.JobReference{}
	}
	in.JobReference.ProjectId = project
	if in.JobReference.JobId == "" {
		s.seq++
		in.JobReference.JobId = "job_bqfake_dry_" + strconv.Itoa(s.seq)
	}
	in.Status = &bq.JobStatus{State: "DONE"}
	in.Statistics = &bq.JobStatistics{Query: &bq.JobStatistics2{TotalBytesProcessed: 0}}
	writeJSON(w, &in)
}
