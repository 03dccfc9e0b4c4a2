// Package bqfake is a test server for the part of the BigQuery REST API
// that syncd's BigQuery sink uses: datasets get/insert, tables
// get/insert/patch, jobs insert (load jobs, multipart and resumable upload)
// and jobs get, and jobs.query of what syncd reads back (see query). It behaves as BigQuery documents where syncd depends on it:
// job ids are unique forever (failed jobs included), uploaded Parquet files
// are read with an independent reader (DuckDB) and checked against the
// table's schema, and rows become visible when their job is done, all at
// once. Faults are injected on demand.
//
// A route the fake does not implement answers 501 and fails the test, so
// that a change in what the client calls is noticed rather than faked.
package bqfake

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/marcboeker/go-duckdb" // the independent Parquet reader
	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/api/option"
)

// Fault is a failure injected into the next jobs.insert that would create a
// job (the multipart request, or the final chunk of a resumable upload).
type Fault int

const (
	// Insert5xx answers 503 backendError; no job is created.
	Insert5xx Fault = iota + 1
	// RateLimited answers 403 rateLimitExceeded; no job is created.
	RateLimited
	// JobBackendError creates the job, which then ends in backendError
	// without loading anything.
	JobBackendError
	// CutAfterAccept creates (and runs) the job, then closes the connection
	// without an answer: the client cannot tell whether the job exists.
	CutAfterAccept
	// ErrorAfterAccept creates (and runs) the job, then answers 503
	// backendError, as a front end that fails after the job was accepted.
	ErrorAfterAccept
	// InsertAccessDenied answers 403 accessDenied for bigquery.jobs.create.
	InsertAccessDenied
)

func (f Fault) String() string {
	switch f {
	case Insert5xx:
		return "Insert5xx"
	case RateLimited:
		return "RateLimited"
	case JobBackendError:
		return "JobBackendError"
	case CutAfterAccept:
		return "CutAfterAccept"
	case ErrorAfterAccept:
		return "ErrorAfterAccept"
	case InsertAccessDenied:
		return "InsertAccessDenied"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	tb  testing.TB
	srv *httptest.Server
	dir string
	db  *sql.DB // DuckDB, one connection: loads are serialised under mu

	mu           sync.Mutex
	datasets     map[dsKey]*dataset
	jobs         map[jobKey]*job
	sessions     map[string]*session
	faults       []Fault
	denied       map[string]bool
	runningPolls int
	seq          int
	uploads      map[string]int // upload type -> requests that created or tried to create a job
	onJob        func(project, jobID string)

	flightMu sync.Mutex
	inFlight int           // requests being served
	idle     chan struct{} // closed while inFlight is 0
}

type dsKey struct{ project, dataset string }

type jobKey struct{ project, job string }

type dataset struct {
	meta   *bq.Dataset
	tables map[string]*table
}

type table struct {
	meta *bq.Table
	rows []map[string]any
	etag int
}

type job struct {
	meta      *bq.Job
	file      string // the upload, until the job has run
	pollsLeft int    // jobs.get answers before the job is done
	fault     Fault
}

// session is a resumable upload in progress.
type session struct {
	project string
	job     *bq.Job
	file    *os.File
	size    int64
	done    []byte // the final answer, replayed if the last chunk is sent again
}

// New starts a fake on loopback. It is closed when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		tb.Fatalf("bqfake: open duckdb: %v", err)
	}
	db.SetMaxOpenConns(1)
	s := &Server{
		tb:       tb,
		dir:      tb.TempDir(),
		db:       db,
		datasets: map[dsKey]*dataset{},
		jobs:     map[jobKey]*job{},
		sessions: map[string]*session{},
		denied:   map[string]bool{},
		uploads:  map[string]int{},
		idle:     make(chan struct{}),
	}
	close(s.idle)
	s.srv = httptest.NewServer(s.track(s.routes()))
	tb.Cleanup(func() {
		s.srv.Close()
		db.Close()
	})
	return s
}

// track counts the requests being served, for WaitIdle.
func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.flightMu.Lock()
		if s.inFlight == 0 {
			s.idle = make(chan struct{})
		}
		s.inFlight++
		s.flightMu.Unlock()
		defer func() {
			s.flightMu.Lock()
			s.inFlight--
			if s.inFlight == 0 {
				close(s.idle)
			}
			s.flightMu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// WaitIdle returns once no request is being served, or when ctx ends. A
// test that kills its client calls it before starting the next one, so that
// a request the dead client had sent whole has taken effect (as it would
// have at BigQuery long before a restarted process looks).
func (s *Server) WaitIdle(ctx context.Context) error {
	s.flightMu.Lock()
	idle := s.idle
	s.flightMu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bqfake: wait for requests in flight: %w", ctx.Err())
	}
}

// OnJobCreated sets a function called each time a job is created, before
// the insert is answered: a test kills its client there to stop it between
// a job's insert and its checkpoint. It runs with the server's lock held,
// so it must not call the Server.
func (s *Server) OnJobCreated(fn func(project, jobID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onJob = fn
}

// URL is the fake's base URL.
func (s *Server) URL() string { return s.srv.URL }

// ClientOptions point a BigQuery client at the fake, without credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.srv.URL + "/bigquery/v2/"),
		option.WithoutAuthentication(),
	}
}

// Inject queues faults; each applies to one later job-creating insert, in
// order.
func (s *Server) Inject(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// PendingFaults is how many injected faults have not fired yet.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.faults)
}

// Deny makes every request that needs one of the IAM permissions fail with
// accessDenied, as BigQuery answers a caller without it. Known permissions:
// bigquery.datasets.get, bigquery.datasets.create, bigquery.tables.get,
// bigquery.tables.create, bigquery.tables.update, bigquery.tables.updateData
// (the load job fails), bigquery.jobs.create, bigquery.jobs.get, and
// bigquery.tables.list (a dry-run query that names the dataset fails).
func (s *Server) Deny(perms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range perms {
		s.denied[p] = true
	}
}

// Allow undoes Deny.
func (s *Server) Allow(perms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range perms {
		delete(s.denied, p)
	}
}

// SetRunningPolls makes every later job answer RUNNING to its insert and
// to the first n-1 jobs.get; the n-th jobs.get runs it (its rows appear, all
// at once) and answers DONE. With 0, the default, a job runs before its
// insert answers.
func (s *Server) SetRunningPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runningPolls = n
}

// Rows returns a copy of a table's rows in load order, every column of the
// table's current schema present (NULL, or an empty array, for columns
// added after the row was loaded). Values are string, int64, float64, bool,
// []byte, time.Time (UTC), civil.Date, civil.DateTime, civil.Time, []any,
// map[string]any or nil.
func (s *Server) Rows(project, datasetID, tableID string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table(project, datasetID, tableID)
	if t == nil {
		return nil
	}
	out := make([]map[string]any, len(t.rows))
	for i, r := range t.rows {
		out[i] = fill(r, t.meta.Schema.Fields)
	}
	return out
}

func fill(r map[string]any, fs []*bq.TableFieldSchema) map[string]any {
	out := make(map[string]any, len(fs))
	for _, f := range fs {
		v, ok := r[f.Name]
		switch {
		case !ok && f.Mode == "REPEATED":
			v = []any{}
		case f.Type == "RECORD" && f.Mode == "REPEATED":
			list := v.([]any)
			cp := make([]any, len(list))
			for i, e := range list {
				cp[i] = fill(e.(map[string]any), f.Fields)
			}
			v = cp
		case f.Type == "RECORD" && v != nil:
			v = fill(v.(map[string]any), f.Fields)
		}
		out[f.Name] = v
	}
	return out
}

// IDs counts the rows of a table by the string value of column: the tool to
// check that each submission arrived exactly once.
func (s *Server) IDs(project, datasetID, tableID, column string) map[string]int {
	out := map[string]int{}
	for _, r := range s.Rows(project, datasetID, tableID) {
		out[fmt.Sprint(r[column])]++
	}
	return out
}

// Table returns a copy of a table's metadata as the API reports it.
func (s *Server) Table(project, datasetID, tableID string) (*bq.Table, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table(project, datasetID, tableID)
	if t == nil {
		return nil, false
	}
	cp := *t.meta
	cp.Schema = &bq.TableSchema{Fields: cloneFields(t.meta.Schema.Fields)}
	return &cp, true
}

// Dataset returns a copy of a dataset's metadata.
func (s *Server) Dataset(project, datasetID string) (*bq.Dataset, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[dsKey{project, datasetID}]
	if d == nil {
		return nil, false
	}
	cp := *d.meta
	return &cp, true
}

// JobIDs lists the ids of every job created in project, sorted.
func (s *Server) JobIDs(project string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for k := range s.jobs {
		if k.project == project {
			ids = append(ids, k.job)
		}
	}
	sort.Strings(ids)
	return ids
}

// JobCount is how many jobs were created in project, failed ones included.
func (s *Server) JobCount(project string) int { return len(s.JobIDs(project)) }

// Job returns a copy of a job as jobs.get would answer it, without
// advancing it.
func (s *Server) Job(project, jobID string) (*bq.Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[jobKey{project, jobID}]
	if j == nil {
		return nil, false
	}
	var cp bq.Job
	b, _ := json.Marshal(j.meta)
	_ = json.Unmarshal(b, &cp)
	return &cp, true
}

// Uploads counts the job-creating upload requests by upload type
// ("multipart" or "resumable").
func (s *Server) Uploads(uploadType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploads[uploadType]
}

func (s *Server) table(project, datasetID, tableID string) *table {
	d := s.datasets[dsKey{project, datasetID}]
	if d == nil {
		return nil
	}
	return d.tables[tableID]
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, prefix := range []string{"/bigquery/v2", ""} {
		mux.HandleFunc("GET "+prefix+"/projects/{project}/datasets/{dataset}", s.getDataset)
		mux.HandleFunc("POST "+prefix+"/projects/{project}/datasets", s.insertDataset)
		mux.HandleFunc("GET "+prefix+"/projects/{project}/datasets/{dataset}/tables/{table}", s.getTable)
		mux.HandleFunc("POST "+prefix+"/projects/{project}/datasets/{dataset}/tables", s.insertTable)
		mux.HandleFunc("PATCH "+prefix+"/projects/{project}/datasets/{dataset}/tables/{table}", s.patchTable)
		mux.HandleFunc("DELETE "+prefix+"/projects/{project}/datasets/{dataset}/tables/{table}", s.deleteTable)
		mux.HandleFunc("GET "+prefix+"/projects/{project}/jobs/{job}", s.getJob)
		mux.HandleFunc("POST "+prefix+"/projects/{project}/jobs", s.insertJob)
		mux.HandleFunc("POST "+prefix+"/projects/{project}/queries", s.query)
	}
	mux.HandleFunc("POST /upload/bigquery/v2/projects/{project}/jobs", s.upload)
	mux.HandleFunc("PUT /upload/bigquery/v2/projects/{project}/jobs", s.upload)
	mux.HandleFunc("/", s.unknown)
	return mux
}

// unknown answers a route the fake does not implement, loudly.
func (s *Server) unknown(w http.ResponseWriter, r *http.Request) {
	s.tb.Errorf("bqfake: unimplemented route %s %s: the client called something the fake does not serve", r.Method, r.URL.Path)
	writeError(w, http.StatusNotImplemented, "notImplemented", fmt.Sprintf("bqfake does not implement %s %s", r.Method, r.URL.Path))
}

// apiError is an error the API answers with an HTTP status.
type apiError struct {
	code   int
	reason string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errNotFound(format string, a ...any) *apiError {
	return &apiError{http.StatusNotFound, "notFound", "Not found: " + fmt.Sprintf(format, a...)}
}

func errInvalid(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "invalid", fmt.Sprintf(format, a...)}
}

func errDuplicate(format string, a ...any) *apiError {
	return &apiError{http.StatusConflict, "duplicate", "Already Exists: " + fmt.Sprintf(format, a...)}
}

var statusNames = map[int]string{
	400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
	412: "FAILED_PRECONDITION", 500: "INTERNAL", 501: "UNIMPLEMENTED", 503: "UNAVAILABLE",
}

// writeError answers in the API's error format, which the client turns into
// a *googleapi.Error with the reason.
func writeError(w http.ResponseWriter, code int, reason, msg string) {
	body := map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg,
		"errors":  []map[string]string{{"message": msg, "domain": "global", "reason": reason}},
		"status":  statusNames[code],
	}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func writeAPIError(w http.ResponseWriter, err error) {
	if e, ok := err.(*apiError); ok {
		writeError(w, e.code, e.reason, e.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, "internalError", err.Error())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

// deny reports the accessDenied error for perm, if it is denied. mu held.
func (s *Server) deny(perm, resource string) *apiError {
	if !s.denied[perm] {
		return nil
	}
	return &apiError{http.StatusForbidden, "accessDenied",
		fmt.Sprintf("Access Denied: %s: Permission %s denied on %s (or it may not exist).", resource, perm, resource)}
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func (s *Server) getDataset(w http.ResponseWriter, r *http.Request) {
	p, d := r.PathValue("project"), r.PathValue("dataset")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.datasets.get", fmt.Sprintf("Dataset %s:%s", p, d)); err != nil {
		writeAPIError(w, err)
		return
	}
	ds := s.datasets[dsKey{p, d}]
	if ds == nil {
		writeAPIError(w, errNotFound("Dataset %s:%s", p, d))
		return
	}
	writeJSON(w, ds.meta)
}

func (s *Server) insertDataset(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("project")
	var in bq.Dataset
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid dataset: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.datasets.create", "Project "+p); err != nil {
		writeAPIError(w, err)
		return
	}
	if in.DatasetReference == nil || !validDatasetID(in.DatasetReference.DatasetId) {
		writeAPIError(w, errInvalid("Invalid dataset ID. Dataset IDs must be alphanumeric (plus underscores) and must be at most 1024 characters long."))
		return
	}
	d := in.DatasetReference.DatasetId
	if s.datasets[dsKey{p, d}] != nil {
		writeAPIError(w, errDuplicate("Dataset %s:%s", p, d))
		return
	}
	loc := in.Location
	if loc == "" {
		loc = "US"
	}
	now := millis(time.Now())
	s.seq++
	meta := &bq.Dataset{
		Kind:             "bigquery#dataset",
		Id:               p + ":" + d,
		DatasetReference: &bq.DatasetReference{ProjectId: p, DatasetId: d},
		Location:         loc,
		Description:      in.Description,
		Labels:           in.Labels,
		Etag:             fmt.Sprintf("%q", fmt.Sprint(s.seq)),
		CreationTime:     now,
		LastModifiedTime: now,
	}
	s.datasets[dsKey{p, d}] = &dataset{meta: meta, tables: map[string]*table{}}
	writeJSON(w, meta)
}

func validDatasetID(id string) bool {
	if id == "" || len(id) > 1024 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '_' || isLetter(c) || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// validTableID applies the table name rules for the characters syncd can
// produce; BigQuery also accepts other Unicode letters and spaces.
func validTableID(id string) bool {
	if id == "" || len(id) > 1024 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '_' || c == '-' || isLetter(c) || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (s *Server) getTable(w http.ResponseWriter, r *http.Request) {
	p, d, t := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.tables.get", fmt.Sprintf("Table %s:%s.%s", p, d, t)); err != nil {
		writeAPIError(w, err)
		return
	}
	ds := s.datasets[dsKey{p, d}]
	if ds == nil {
		writeAPIError(w, errNotFound("Dataset %s:%s", p, d))
		return
	}
	tb := ds.tables[t]
	if tb == nil {
		writeAPIError(w, errNotFound("Table %s:%s.%s", p, d, t))
		return
	}
	writeJSON(w, tb.meta)
}

func (s *Server) deleteTable(w http.ResponseWriter, r *http.Request) {
	p, d, t := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.tables.delete", fmt.Sprintf("Table %s:%s.%s", p, d, t)); err != nil {
		writeAPIError(w, err)
		return
	}
	ds := s.datasets[dsKey{p, d}]
	if ds == nil || ds.tables[t] == nil {
		writeAPIError(w, errNotFound("Table %s:%s.%s", p, d, t))
		return
	}
	delete(ds.tables, t)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) insertTable(w http.ResponseWriter, r *http.Request) {
	p, d := r.PathValue("project"), r.PathValue("dataset")
	var in bq.Table
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid table: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.tables.create", fmt.Sprintf("Dataset %s:%s", p, d)); err != nil {
		writeAPIError(w, err)
		return
	}
	ds := s.datasets[dsKey{p, d}]
	if ds == nil {
		writeAPIError(w, errNotFound("Dataset %s:%s", p, d))
		return
	}
	if in.TableReference == nil || !validTableID(in.TableReference.TableId) {
		writeAPIError(w, errInvalid("Invalid table ID."))
		return
	}
	t := in.TableReference.TableId
	if ds.tables[t] != nil {
		writeAPIError(w, errDuplicate("Table %s:%s.%s", p, d, t))
		return
	}
	tb, err := s.newTable(ds, t, &in)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, tb.meta)
}

// newTable validates and stores a table. mu held.
func (s *Server) newTable(ds *dataset, id string, in *bq.Table) (*table, error) {
	ref := ds.meta.DatasetReference
	var fields []*bq.TableFieldSchema
	if in.Schema != nil {
		var err error
		if fields, err = normalizeFields(in.Schema.Fields, "", 1); err != nil {
			return nil, errInvalid("%s", err)
		}
	}
	if tp := in.TimePartitioning; tp != nil {
		switch tp.Type {
		case "DAY", "HOUR", "MONTH", "YEAR":
		default:
			return nil, errInvalid("Invalid time partitioning type %q", tp.Type)
		}
		if tp.Field != "" {
			f := findField(fields, tp.Field)
			switch {
			case f == nil:
				return nil, errInvalid("The field specified for time partitioning can only be a top-level field. Field %s not found.", tp.Field)
			case f.Mode == "REPEATED" || (f.Type != "TIMESTAMP" && f.Type != "DATE" && f.Type != "DATETIME"):
				return nil, errInvalid("Partitioning field %s must be a non-repeated DATE, DATETIME or TIMESTAMP field, not %s %s", tp.Field, f.Mode, f.Type)
			}
		}
	}
	if cl := in.Clustering; cl != nil {
		if len(cl.Fields) > 4 {
			return nil, errInvalid("Too many clustering fields: %d, only 4 are allowed.", len(cl.Fields))
		}
		for _, name := range cl.Fields {
			f := findField(fields, name)
			switch {
			case f == nil:
				return nil, errInvalid("The field specified for clustering cannot be found in the schema. Invalid field: %s.", name)
			case f.Mode == "REPEATED" || f.Type == "RECORD" || f.Type == "FLOAT" || f.Type == "JSON":
				return nil, errInvalid("Clustering field %s has an unsupported type or mode: %s %s.", name, f.Mode, f.Type)
			}
		}
	}
	now := millis(time.Now())
	meta := &bq.Table{
		Kind:             "bigquery#table",
		Id:               fmt.Sprintf("%s:%s.%s", ref.ProjectId, ref.DatasetId, id),
		TableReference:   &bq.TableReference{ProjectId: ref.ProjectId, DatasetId: ref.DatasetId, TableId: id},
		Schema:           &bq.TableSchema{Fields: fields},
		TimePartitioning: in.TimePartitioning,
		Clustering:       in.Clustering,
		Description:      in.Description,
		FriendlyName:     in.FriendlyName,
		Labels:           in.Labels,
		Location:         ds.meta.Location,
		Type:             "TABLE",
		CreationTime:     now,
		LastModifiedTime: uint64(now),
	}
	if v := in.View; v != nil {
		// A view: BigQuery keeps its query (standard SQL unless told) and
		// derives its schema on use; the fake does not run it.
		if strings.TrimSpace(v.Query) == "" {
			return nil, errInvalid("A view needs a query.")
		}
		meta.Type, meta.View = "VIEW", &bq.ViewDefinition{Query: v.Query, UseLegacySql: v.UseLegacySql}
	}
	tb := &table{meta: meta}
	s.touch(tb)
	ds.tables[id] = tb
	return tb, nil
}

// touch gives a changed table a new etag. mu held.
func (s *Server) touch(t *table) {
	s.seq++
	t.etag = s.seq
	t.meta.Etag = fmt.Sprintf("%q", fmt.Sprint(s.seq))
	t.meta.LastModifiedTime = uint64(millis(time.Now()))
	t.meta.NumRows = uint64(len(t.rows))
}

func (s *Server) patchTable(w http.ResponseWriter, r *http.Request) {
	p, d, t := r.PathValue("project"), r.PathValue("dataset"), r.PathValue("table")
	var in bq.Table
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid table: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := fmt.Sprintf("%s:%s.%s", p, d, t)
	if err := s.deny("bigquery.tables.update", "Table "+name); err != nil {
		writeAPIError(w, err)
		return
	}
	tb := s.table(p, d, t)
	if tb == nil {
		writeAPIError(w, errNotFound("Table %s", name))
		return
	}
	if m := r.Header.Get("If-Match"); m != "" && m != tb.meta.Etag {
		writeError(w, http.StatusPreconditionFailed, "conditionNotMet", "Precondition check failed.")
		return
	}
	if in.Schema != nil {
		next, err := normalizeFields(in.Schema.Fields, "", 1)
		if err != nil {
			writeAPIError(w, errInvalid("%s", err))
			return
		}
		if next, err = evolve(name, tb.meta.Schema.Fields, next, ""); err != nil {
			writeAPIError(w, errInvalid("%s", err))
			return
		}
		tb.meta.Schema = &bq.TableSchema{Fields: next}
	}
	if in.TimePartitioning != nil && (tb.meta.TimePartitioning == nil ||
		in.TimePartitioning.Type != tb.meta.TimePartitioning.Type || in.TimePartitioning.Field != tb.meta.TimePartitioning.Field) {
		writeAPIError(w, errInvalid("Cannot change partitioning spec for table %s.", name))
		return
	}
	if in.Description != "" {
		tb.meta.Description = in.Description
	}
	if in.FriendlyName != "" {
		tb.meta.FriendlyName = in.FriendlyName
	}
	if in.Labels != nil {
		tb.meta.Labels = in.Labels
	}
	if in.Clustering != nil {
		tb.meta.Clustering = in.Clustering
	}
	s.touch(tb)
	writeJSON(w, tb.meta)
}

// jobName is how BigQuery names a job in messages: project:LOCATION.id.
func jobName(ref *bq.JobReference) string {
	return fmt.Sprintf("%s:%s.%s", ref.ProjectId, ref.Location, ref.JobId)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	p, id := r.PathValue("project"), r.PathValue("job")
	loc := r.URL.Query().Get("location")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.jobs.get", "Project "+p); err != nil {
		writeAPIError(w, err)
		return
	}
	j := s.jobs[jobKey{p, id}]
	// Jobs are regional: without a location only US and EU jobs are found.
	if j == nil || !locationMatches(loc, j.meta.JobReference.Location) {
		shown := loc
		if shown == "" {
			shown = "US"
		}
		writeAPIError(w, errNotFound("Job %s:%s.%s", p, shown, id))
		return
	}
	if j.meta.Status.State != "DONE" {
		if j.pollsLeft > 0 {
			j.pollsLeft--
		}
		if j.pollsLeft == 0 {
			s.run(j)
		}
	}
	writeJSON(w, j.meta)
}

func locationMatches(asked, actual string) bool {
	if asked == "" {
		return strings.EqualFold(actual, "US") || strings.EqualFold(actual, "EU")
	}
	return strings.EqualFold(asked, actual)
}
