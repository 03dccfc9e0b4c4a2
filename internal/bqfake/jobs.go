package bqfake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// upload serves POST /upload/bigquery/v2/projects/{project}/jobs: a
// multipart upload, the start of a resumable one, or one of its chunks.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("project")
	q := r.URL.Query()
	switch {
	case q.Get("upload_id") != "":
		s.uploadChunk(w, r, q.Get("upload_id"))
	case q.Get("uploadType") == "multipart":
		s.uploadMultipart(w, r, p)
	case q.Get("uploadType") == "resumable":
		s.startResumable(w, r, p)
	default:
		s.unknown(w, r)
	}
}

func (s *Server) tempFile() (*os.File, error) {
	return os.CreateTemp(s.dir, "upload-*.parquet")
}

func (s *Server) uploadMultipart(w http.ResponseWriter, r *http.Request, project string) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		writeAPIError(w, errInvalid("Invalid multipart request: Content-Type %q", r.Header.Get("Content-Type")))
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	meta, err := mr.NextPart()
	if err != nil {
		writeAPIError(w, errInvalid("Invalid multipart request: no metadata part: %v", err))
		return
	}
	var in bq.Job
	if err := json.NewDecoder(meta).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid job: %v", err))
		return
	}
	media, err := mr.NextPart()
	if err != nil {
		writeAPIError(w, errInvalid("Invalid multipart request: no media part: %v", err))
		return
	}
	f, err := s.tempFile()
	if err != nil {
		writeAPIError(w, err)
		return
	}
	_, err = io.Copy(f, media)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		writeAPIError(w, errInvalid("Upload interrupted: %v", err))
		return
	}
	s.mu.Lock()
	s.uploads["multipart"]++
	body, err := s.createJob(w, project, &in, f.Name())
	s.mu.Unlock()
	if err != nil {
		os.Remove(f.Name())
		writeAPIError(w, err)
		return
	}
	if body != nil {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(body)
	}
}

func (s *Server) startResumable(w http.ResponseWriter, r *http.Request, project string) {
	var in bq.Job
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid job: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkJob(project, &in); err != nil {
		writeAPIError(w, err)
		return
	}
	f, err := s.tempFile()
	if err != nil {
		writeAPIError(w, err)
		return
	}
	s.seq++
	id := "u" + strconv.Itoa(s.seq)
	s.sessions[id] = &session{project: project, job: &in, file: f}
	w.Header().Set("Location", fmt.Sprintf("%s/upload/bigquery/v2/projects/%s/jobs?uploadType=resumable&upload_id=%s", s.srv.URL, project, id))
	w.WriteHeader(http.StatusOK)
}

// parseRange reads a chunk's Content-Range: "bytes a-b/*", "bytes a-b/n"
// or "bytes */n". total is -1 while unknown; start is -1 for "*".
func parseRange(h string) (start, total int64, err error) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	rng, tot, ok2 := strings.Cut(spec, "/")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("bad Content-Range %q", h)
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("bad Content-Range %q", h)
		}
	}
	start = -1
	if rng != "*" {
		a, _, ok := strings.Cut(rng, "-")
		if !ok {
			return 0, 0, fmt.Errorf("bad Content-Range %q", h)
		}
		if start, err = strconv.ParseInt(a, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("bad Content-Range %q", h)
		}
	}
	return start, total, nil
}

func (s *Server) uploadChunk(w http.ResponseWriter, r *http.Request, id string) {
	start, total, err := parseRange(r.Header.Get("Content-Range"))
	if err != nil {
		writeAPIError(w, errInvalid("%v", err))
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeAPIError(w, errInvalid("Upload interrupted: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		writeAPIError(w, errNotFound("upload session %s", id))
		return
	}
	if sess.done != nil {
		// The last chunk again (a client retry): the same answer.
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(sess.done)
		return
	}
	if start >= 0 {
		if start > sess.size {
			writeAPIError(w, errInvalid("chunk starts at %d but %d bytes were received", start, sess.size))
			return
		}
		if skip := sess.size - start; skip > 0 { // a resent chunk: keep what is new
			data = data[min(skip, int64(len(data))):]
		}
		if _, err := sess.file.Write(data); err != nil {
			writeAPIError(w, err)
			return
		}
		sess.size += int64(len(data))
	}
	if total < 0 || sess.size < total {
		if r.Header.Get("X-GUploader-No-308") == "yes" {
			w.Header().Set("X-Http-Status-Code-Override", "308")
		}
		if sess.size > 0 {
			w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", sess.size-1))
		}
		if r.Header.Get("X-GUploader-No-308") == "yes" {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusPermanentRedirect)
		}
		return
	}
	s.uploads["resumable"]++
	body, err := s.createJob(w, sess.project, sess.job, sess.file.Name())
	if err != nil {
		// No job was created: the session stays open, so that the client
		// may send the last chunk again, as a real upload session allows.
		writeAPIError(w, err)
		return
	}
	sess.file.Close()
	if j := s.jobs[jobKey{sess.project, sess.job.JobReference.JobId}]; j != nil {
		sess.done, _ = json.Marshal(j.meta)
	}
	if body != nil { // nil: the fault already answered, or cut the connection
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(body)
	}
}

func validJobID(id string) bool {
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

// checkJob validates a job insert before any upload is accepted. mu held.
func (s *Server) checkJob(project string, in *bq.Job) error {
	if err := s.deny("bigquery.jobs.create", "Project "+project); err != nil {
		err.msg = fmt.Sprintf("Access Denied: Project %s: User does not have bigquery.jobs.create permission in project %s.", project, project)
		return err
	}
	if in.JobReference == nil {
		in.JobReference = &bq.JobReference{}
	}
	ref := in.JobReference
	ref.ProjectId = project
	if ref.JobId == "" {
		s.seq++
		ref.JobId = "job_bqfake_" + strconv.Itoa(s.seq)
	}
	if !validJobID(ref.JobId) {
		return errInvalid("Invalid job ID %q. Job IDs must be alphanumeric (plus underscores and dashes) and must be at most 1024 characters long.", ref.JobId)
	}
	if in.Configuration == nil || in.Configuration.Load == nil {
		s.tb.Errorf("bqfake: jobs.insert of a job that is not a load: the fake only runs load jobs")
		return &apiError{http.StatusNotImplemented, "notImplemented", "bqfake runs load jobs only"}
	}
	load := in.Configuration.Load
	if load.DestinationTable == nil || load.DestinationTable.TableId == "" || load.DestinationTable.DatasetId == "" {
		return errInvalid("Required parameter is missing: destinationTable")
	}
	if load.DestinationTable.ProjectId == "" {
		load.DestinationTable.ProjectId = project
	}
	if load.SourceFormat != "PARQUET" {
		s.tb.Errorf("bqfake: load job with source format %q: the fake only loads PARQUET", load.SourceFormat)
		return &apiError{http.StatusNotImplemented, "notImplemented", "bqfake loads Parquet only"}
	}
	switch load.WriteDisposition {
	case "", "WRITE_APPEND", "WRITE_TRUNCATE", "WRITE_EMPTY":
	default:
		return errInvalid("Invalid value for writeDisposition: %s", load.WriteDisposition)
	}
	switch load.CreateDisposition {
	case "", "CREATE_IF_NEEDED", "CREATE_NEVER":
	default:
		return errInvalid("Invalid value for createDisposition: %s", load.CreateDisposition)
	}
	for _, o := range load.SchemaUpdateOptions {
		if o != "ALLOW_FIELD_ADDITION" && o != "ALLOW_FIELD_RELAXATION" {
			return errInvalid("Invalid schema update option: %s", o)
		}
		if load.WriteDisposition != "" && load.WriteDisposition != "WRITE_APPEND" && load.WriteDisposition != "WRITE_TRUNCATE" {
			return errInvalid("Schema update options should only be specified with WRITE_APPEND disposition, or with WRITE_TRUNCATE disposition on a table partition.")
		}
	}
	if ref.Location == "" {
		ref.Location = "US"
		if ds := s.datasets[dsKey{load.DestinationTable.ProjectId, load.DestinationTable.DatasetId}]; ds != nil {
			ref.Location = ds.meta.Location
		}
	}
	if s.jobs[jobKey{project, ref.JobId}] != nil {
		return errDuplicate("Job %s", jobName(ref))
	}
	return nil
}

// createJob creates the job of a complete upload, applying the next
// injected fault. It answers the body to send, or nil when the answer was
// already written (a fault), or an error when no job was created; then the
// file is still the caller's. mu held.
func (s *Server) createJob(w http.ResponseWriter, project string, in *bq.Job, file string) ([]byte, error) {
	var fault Fault
	if len(s.faults) > 0 {
		fault, s.faults = s.faults[0], s.faults[1:]
	}
	switch fault {
	case Insert5xx:
		return nil, &apiError{http.StatusServiceUnavailable, "backendError", "Error encountered during execution. Retrying may solve the problem."}
	case RateLimited:
		return nil, &apiError{http.StatusForbidden, "rateLimitExceeded", "Exceeded rate limits: too many api requests per user per method for this user_method. For more information, see https://cloud.google.com/bigquery/docs/troubleshoot-quotas"}
	case InsertAccessDenied:
		return nil, &apiError{http.StatusForbidden, "accessDenied", fmt.Sprintf("Access Denied: Project %s: User does not have bigquery.jobs.create permission in project %s.", project, project)}
	}
	if err := s.checkJob(project, in); err != nil {
		return nil, err
	}
	now := time.Now()
	ref := *in.JobReference
	cfg := *in.Configuration
	cfg.JobType = "LOAD"
	j := &job{
		meta: &bq.Job{
			Kind:          "bigquery#job",
			Id:            jobName(&ref),
			JobReference:  &ref,
			Configuration: &cfg,
			Status:        &bq.JobStatus{State: "RUNNING"},
			Statistics:    &bq.JobStatistics{CreationTime: millis(now), StartTime: millis(now)},
			UserEmail:     "syncd-test@bqfake.invalid",
		},
		file:      file,
		pollsLeft: s.runningPolls,
		fault:     fault,
	}
	s.jobs[jobKey{project, ref.JobId}] = j
	if j.pollsLeft == 0 {
		s.run(j)
	}
	if s.onJob != nil {
		s.onJob(project, ref.JobId)
	}
	body, err := json.Marshal(j.meta)
	if err != nil {
		return nil, err
	}
	switch fault {
	case CutAfterAccept:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return nil, nil
			}
		}
		s.tb.Errorf("bqfake: cannot cut the connection: the response writer is not a Hijacker")
	case ErrorAfterAccept:
		writeError(w, http.StatusServiceUnavailable, "backendError", "Error encountered during execution. Retrying may solve the problem.")
		return nil, nil
	}
	return body, nil
}

// run executes a load job and marks it DONE: the rows of the file are
// appended to the table all at once, or none are. mu held.
func (s *Server) run(j *job) {
	defer func() {
		if j.file != "" {
			os.Remove(j.file)
			j.file = ""
		}
	}()
	st := j.meta.Statistics
	st.EndTime = millis(time.Now())
	fail := func(reason, format string, a ...any) {
		ep := &bq.ErrorProto{Reason: reason, Message: fmt.Sprintf(format, a...)}
		j.meta.Status = &bq.JobStatus{State: "DONE", ErrorResult: ep, Errors: []*bq.ErrorProto{ep}}
	}
	if j.fault == JobBackendError {
		fail("backendError", "Error encountered during job execution:\nBackend error. Job aborted.")
		return
	}
	load := j.meta.Configuration.Load
	dst := load.DestinationTable
	name := fmt.Sprintf("%s:%s.%s", dst.ProjectId, dst.DatasetId, dst.TableId)
	if err := s.deny("bigquery.tables.updateData", "Table "+name); err != nil {
		fail(err.reason, "%s", err.msg)
		return
	}
	ds := s.datasets[dsKey{dst.ProjectId, dst.DatasetId}]
	if ds == nil {
		fail("notFound", "Not found: Dataset %s:%s", dst.ProjectId, dst.DatasetId)
		return
	}
	if !strings.EqualFold(ds.meta.Location, j.meta.JobReference.Location) {
		fail("notFound", "Not found: Dataset %s:%s was not found in location %s", dst.ProjectId, dst.DatasetId, j.meta.JobReference.Location)
		return
	}
	tb := ds.tables[dst.TableId]
	if tb == nil && load.CreateDisposition == "CREATE_NEVER" {
		fail("notFound", "Not found: Table %s", name)
		return
	}
	info, err := os.Stat(j.file)
	if err != nil {
		fail("internalError", "%v", err)
		return
	}
	root, err := readSchema(s.db, j.file)
	if err != nil {
		fail("invalid", "Error while reading data, error message: Failed to read a Parquet file: %v", err)
		return
	}
	inferLists := load.ParquetOptions != nil && load.ParquetOptions.EnableListInference
	fileFs, err := fileFields(root, inferLists)
	if err == nil {
		fileFs, err = normalizeFields(fileFs, "", 1)
	}
	if err != nil {
		fail("invalid", "Error while reading data, error message: %v", err)
		return
	}
	var fields []*bq.TableFieldSchema
	switch {
	case tb == nil:
		fields = fileFs
	default:
		rules := loadRules{}
		for _, o := range load.SchemaUpdateOptions {
			rules.allowAdd = rules.allowAdd || o == "ALLOW_FIELD_ADDITION"
			rules.allowRelax = rules.allowRelax || o == "ALLOW_FIELD_RELAXATION"
		}
		if fields, err = mergeLoad(name, cloneFields(tb.meta.Schema.Fields), fileFs, rules, ""); err != nil {
			fail("invalid", "%v", err)
			return
		}
	}
	raw, err := readRows(s.db, j.file)
	if err != nil {
		fail("invalid", "Error while reading data, error message: %v", err)
		return
	}
	rows := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		row := make(map[string]any, len(fields))
		for _, f := range fields {
			if findField(fileFs, f.Name) == nil {
				continue // a table column the file does not have: NULL
			}
			v, err := convert(lookupFold(r, f.Name), f, f.Name)
			if err != nil {
				fail("invalid", "Error while reading data, error message: %v", err)
				return
			}
			row[f.Name] = v
		}
		rows = append(rows, row)
	}
	if tb != nil && load.WriteDisposition == "WRITE_EMPTY" && len(tb.rows) > 0 {
		fail("duplicate", "Already Exists: Table %s", name)
		return
	}
	if tb == nil {
		if tb, err = s.newTable(ds, dst.TableId, &bq.Table{
			Schema:           &bq.TableSchema{Fields: fields},
			TimePartitioning: load.TimePartitioning,
			Clustering:       load.Clustering,
		}); err != nil {
			fail("invalid", "%v", err)
			return
		}
	}
	tb.meta.Schema = &bq.TableSchema{Fields: fields}
	if load.WriteDisposition == "WRITE_TRUNCATE" {
		tb.rows = nil
	}
	tb.rows = append(tb.rows, rows...)
	s.touch(tb)
	st.Load = &bq.JobStatistics3{
		InputFiles:     1,
		InputFileBytes: info.Size(),
		OutputRows:     int64(len(rows)),
		OutputBytes:    info.Size(),
	}
	j.meta.Status = &bq.JobStatus{State: "DONE"}
}
