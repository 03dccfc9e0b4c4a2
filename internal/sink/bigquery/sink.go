// Package bigquery commits batches to BigQuery tables, one table per form,
// with load jobs of the batch's Parquet bytes.
//
// Exactly once rests on job ids: BigQuery accepts a job id once per project,
// forever, failed jobs included. A batch's load job is named after the batch
// id plus an attempt number, so whoever asks — a retry, a second Commit, a
// process restarted after a crash — finds the job that holds the batch
// instead of loading it twice:
//
//	attempt n exists and succeeded -> committed
//	attempt n exists and is running -> wait for it
//	attempt n exists and failed     -> look at attempt n+1
//	attempt n does not exist        -> submit it (not committed)
//
// A failed job therefore never blocks its batch: the next attempt gets a
// fresh id. A load is atomic, so a job's rows appear whole or not at all.
//
// The client library never resends a job insert that carries a file (and,
// by default, the sink sends each file in one request); the sink keeps the
// encoded file and retries with backoff on 5xx, backendError and
// rateLimitExceeded, and on calls that got no answer, whose outcome it then
// learns by looking the job up. It fails at once, with one sentence naming
// the project, dataset, table and column or permission, on invalid,
// notFound and accessDenied.
//
// Tables are created on first load from the batch's Arrow schema (REQUIRED
// for top-level non-nullable fields, descriptions from field metadata,
// partitioned by day on submission_time, clustered as configured). New
// columns are added as NULLABLE by a table patch before the load: a load's
// ALLOW_FIELD_ADDITION cannot add a column the file marks REQUIRED ("Cannot
// add required fields to an existing schema") and does not carry
// descriptions. The load keeps ALLOW_FIELD_ADDITION as a safety net. The
// Parquet file is then written with exactly the table's modes, because
// BigQuery compares a file's REQUIRED/OPTIONAL with the table's column
// modes.
//
// The sink caches each table's schema, so that a batch that fits it costs
// no table call. A batch that does not fit, and a load the table refuses,
// make it read the table again: a table a person changed (a column
// relaxed, the table moved aside, as a SchemaError asks) is taken as it is
// now, without a restart. A load refused only because the file's modes no
// longer match the table is tried again with a file that matches.
//
// Beside a table that keeps versions, the sink keeps the view
// <table>_latest: looked at with the table's first batch and again with a
// batch at least viewRecheck later, created when missing (a person or a
// cleanup job may drop it while syncd runs). A view that cannot be made is
// logged and tried again with the next batch; it never fails a load.
package bigquery

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/zap"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/bigquery/bqrules"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	"github.com/syncd-dev/syncd/internal/spool"
)

// Options configures a Sink. Project and Dataset are required.
type Options struct {
	Project     string   // Google Cloud project of the dataset; jobs run here too
	Dataset     string   // created when missing
	Location    string   // of the dataset and jobs; "" means the dataset's (US when created)
	TablePrefix string   // prepended to each batch's table name
	Clustering  []string // clustering columns of created tables, at most 4

	// ClientOptions are passed to the BigQuery client. Without them it uses
	// Application Default Credentials. Tests point it at a fake with
	// option.WithEndpoint and option.WithoutAuthentication.
	ClientOptions []option.ClientOption

	// MaxAttempts bounds how often one Commit tries before it returns the
	// last error: submissions and lookups that failed temporarily, and jobs
	// that failed temporarily, count. 0 means 5.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the pause between tries, which
	// doubles from one to the other, with jitter, and the polling interval
	// of a running job. 0 means 1s and 30s.
	MinBackoff, MaxBackoff time.Duration

	// UploadChunkSize, when positive, sends files larger than it as
	// resumable uploads in chunks of that size (rounded up to 256 KiB); the
	// client then resends a failed chunk within its upload session, which
	// cannot create a second job. 0 sends each file in one request that is
	// never resent by the client.
	UploadChunkSize int

	// TempDir is where a batch's file waits while it is loaded (a folder
	// of its own, which spool.CleanStale removes after a kill); "" means
	// os.TempDir(). syncd passes sync.spool_dir.
	TempDir string

	Logger  *zap.Logger               // nil means no logs
	Version string                    // written into each file's footer; "" means the build's
	Encode  parquetsink.EncodeOptions // the Parquet encoding of the loads
}

func (o *Options) setDefaults() error {
	switch {
	case o.Project == "":
		return errors.New("bigquery sink: sink.bigquery.project is empty: set the Google Cloud project that holds the dataset")
	case bqrules.DatasetIDProblem(o.Dataset) != "":
		return fmt.Errorf("bigquery sink: sink.bigquery.dataset %q is not a dataset id: use letters, digits and underscores, at most 1024", o.Dataset)
	case len(o.Clustering) > bqrules.MaxClustering:
		return fmt.Errorf("bigquery sink: sink.bigquery.clustering names %d columns; BigQuery clusters on at most %d", len(o.Clustering), bqrules.MaxClustering)
	case o.MaxAttempts < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.UploadChunkSize < 0:
		return errors.New("bigquery sink: attempts, backoffs and chunk size cannot be negative")
	}
	if err := o.Encode.Validate(); err != nil {
		return fmt.Errorf("bigquery sink: %w", err)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return nil
}

// Sink loads batches into BigQuery. It is safe for concurrent use; batches
// of different tables load in parallel.
type Sink struct {
	opts   Options
	client *bigquery.Client
	log    *zap.Logger

	dsMu     sync.Mutex // serialises finding (or creating) the dataset
	location string     // the dataset's, once known

	mu     sync.Mutex
	tables map[string]*tableState

	now func() time.Time // the clock of view re-checks; tests move it
}

// tableState caches what the sink knows of one table, so that a batch with
// an unchanged schema costs no table call.
type tableState struct {
	mu     sync.Mutex      // serialises creating and patching the table
	schema bigquery.Schema // as last seen or written; nil when unknown
	view   bool            // its latest view is known to exist
	// viewSeen is when the view was last found or made; after viewRecheck
	// the next batch looks again.
	viewSeen time.Time
	// viewOther is the query of a view someone else defined, once logged,
	// so that each re-check does not log it again.
	viewOther string
}

var (
	_ sink.Sink   = (*Sink)(nil)
	_ sink.Prober = (*Sink)(nil)
)

// New returns a Sink. It makes no BigQuery call; the dataset and tables are
// looked up (and created) by the first Commit that needs them.
func New(ctx context.Context, opts Options) (*Sink, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	opts.Clustering = append([]string(nil), opts.Clustering...)
	opts.ClientOptions = append([]option.ClientOption(nil), opts.ClientOptions...)
	client, err := bigquery.NewClient(ctx, opts.Project, opts.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("bigquery sink: connect to project %s: %w (syncd uses Application Default Credentials: set GOOGLE_APPLICATION_CREDENTIALS to a key file, or run with Workload Identity)", opts.Project, err)
	}
	client.Location = opts.Location
	return &Sink{
		opts:   opts,
		client: client,
		log:    opts.Logger.With(zap.String(logkey.Sink, "bigquery"), zap.String(logkey.Project, opts.Project), zap.String(logkey.Dataset, opts.Dataset)),
		tables: map[string]*tableState{},
		now:    time.Now,
	}, nil
}

// Close releases the client.
func (s *Sink) Close() error {
	return s.client.Close()
}

func checkBatch(b sink.Batch) error {
	switch {
	case b.ID == "":
		return errors.New("bigquery sink: batch has no id")
	case b.Table == "":
		return fmt.Errorf("bigquery sink: batch %s has no table", b.ID)
	}
	return nil
}

// maxJobID is BigQuery's limit on the length of a job id.
const maxJobID = 1024

// jobID is the load job id of attempt n of batch id: the batch id with
// every character BigQuery does not allow in a job id replaced by '_', then
// "_a<n>". When anything was replaced, or the id is too long, a hash of the
// batch id keeps distinct batches distinct.
func jobID(batch string, attempt int) string {
	suffix := "_a" + strconv.Itoa(attempt)
	b := []byte(batch)
	clean := true
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
			clean = false
		}
	}
	id := string(b)
	if !clean || len(id)+len(suffix) > maxJobID {
		sum := sha256.Sum256([]byte(batch))
		tag := "_" + hex.EncodeToString(sum[:8])
		if n := maxJobID - len(suffix) - len(tag); len(id) > n {
			id = id[:n]
		}
		id += tag
	}
	return id + suffix
}

// tableName is a batch's table in the dataset.
func (s *Sink) tableName(b sink.Batch) string { return s.opts.TablePrefix + b.Table }

func (s *Sink) fullName(table string) string {
	return s.opts.Project + "." + s.opts.Dataset + "." + table
}

// Commit loads parts as batch b into its table, exactly once: if a load job
// of the batch already succeeded, Commit checks its row count and returns.
// The parts are encoded into the load file as they stream in, one chunk
// at a time, whatever the batch's size. A batch without rows only makes
// sure the table exists with its columns; it spends no load job (a table
// takes at most 1,500 a day). It reports the bytes of the file it loaded
// (0 when the batch was already loaded).
func (s *Sink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	if err := checkBatch(b); err != nil {
		return 0, err
	}
	recs := parts.Records()
	if len(parts) > 0 && recs.Schema == nil {
		return 0, fmt.Errorf("bigquery sink: commit batch %s: no records", b.ID)
	}
	if _, err := s.dataset(ctx, true); err != nil {
		return 0, err
	}
	c := &commit{s: s, b: b, table: s.tableName(b), recs: recs}
	defer c.close()
	err := c.run(ctx)
	return c.sent, err
}

// commit is one Commit call: the batch, and its encoded file once made.
type commit struct {
	s     *Sink
	b     sink.Batch
	table string
	recs  sink.Records // every part's rows, in order; Schema nil: none
	file  *os.File     // the Parquet bytes, made on first submission, kept for retries
	size  int64
	sent  int64 // bytes of the file of the job this call submitted
	// written is the schema of the last file made: the batch's columns in
	// the modes of the table as the sink then knew it.
	written *arrow.Schema
}

// close removes the file, if any; the next submission makes it again.
func (c *commit) close() {
	if c.file != nil {
		c.file.Close()
		os.RemoveAll(filepath.Dir(c.file.Name()))
		c.file, c.size = nil, 0
	}
}

func (c *commit) run(ctx context.Context) error {
	s := c.s
	log := s.log.With(zap.String(logkey.BatchID, c.b.ID), zap.String(logkey.Table, c.table))
	tries := 0
	// again records a temporary failure and pauses, or gives up.
	again := func(err error) error {
		tries++
		if tries >= s.opts.MaxAttempts {
			return fmt.Errorf("bigquery sink: batch %s not committed after %d tries, the last: %w", c.b.ID, tries, err)
		}
		log.Warn("load failed for now; retrying", zap.Int(logkey.Try, tries), zap.Error(err))
		return s.sleep(ctx, tries)
	}
	for attempt := 1; ; {
		id := jobID(c.b.ID, attempt)
		job, err := s.lookup(ctx, c.table, id)
		if err != nil {
			if v, _ := classify(err); v == retry {
				if err := again(err); err != nil {
					return err
				}
				continue
			}
			return err
		}
		submitted := false
		if job == nil {
			if c.recs.Rows == 0 {
				if c.recs.Schema == nil {
					log.Debug("no parts: nothing to load")
					return nil
				}
				if _, err := s.ensureTable(ctx, c.table, c.b, c.recs.Schema); err != nil {
					return err
				}
				log.Debug("empty batch: nothing to load")
				return nil
			}
			if err := c.prepare(ctx); err != nil {
				return err
			}
			job, err = s.submit(ctx, c.table, id, c.file, c.size)
			if err != nil {
				werr := s.apiError("load batch "+c.b.ID, c.table, id, err)
				v, _ := classify(err)
				if v == duplicate || v == retry {
					// Someone submitted this attempt first, or the job may
					// or may not have been created: the lookup tells.
					if err := again(werr); err != nil {
						return err
					}
					continue
				}
				if v == missing {
					s.forgetTable(c.table) // the table may have been deleted
				}
				return werr
			}
			submitted = true
			c.sent = c.size
			log.Debug("load job submitted", zap.String(logkey.JobID, id), zap.Int64(logkey.Bytes, c.size))
		}
		st, err := s.wait(ctx, job)
		if err != nil {
			if v, _ := classify(err); v == retry {
				if err := again(s.apiError("wait for load job", c.table, id, err)); err != nil {
					return err
				}
				continue
			}
			return s.apiError("wait for load job", c.table, id, err)
		}
		if jerr := st.Err(); jerr != nil {
			werr := s.apiError("load batch "+c.b.ID, c.table, id, jerr)
			v, reason := classify(jerr)
			if reason == "invalid" || v == missing || reason == "notFound" {
				// The table may not be what the sink believes: the next
				// attempt reads it and writes its file for it.
				s.forgetTable(c.table)
				c.close()
			}
			if submitted && v != retry {
				if reason != "invalid" {
					return werr
				}
				// A person may have changed the table since the sink read
				// it (relaxed a REQUIRED column, which the file then
				// contradicts): only a file for the table as it is now can
				// tell that apart from a fault in the batch.
				changed, err := c.tableChanged(ctx)
				if err != nil {
					return err
				}
				if !changed {
					return werr
				}
				log.Info("the table changed since the sink read it; the next attempt's file follows it", zap.String(logkey.JobID, id))
			}
			// A temporary failure, or a job of an earlier call that failed:
			// the next attempt gets a fresh id.
			attempt++
			if submitted {
				if err := again(werr); err != nil {
					return err
				}
			} else {
				log.Info("an earlier load job of the batch failed; trying the next attempt", zap.String(logkey.JobID, id), zap.Error(werr))
			}
			continue
		}
		n, err := outputRows(st)
		if err != nil {
			return s.apiError("check load job", c.table, id, err)
		}
		if n != c.recs.Rows {
			return fmt.Errorf("bigquery sink: load job %s of batch %s into %s succeeded with %d rows but the batch has %d: the batch was rebuilt differently after the job ran, or another deployment uses the same batch ids in project %s",
				id, c.b.ID, s.fullName(c.table), n, c.recs.Rows, s.opts.Project)
		}
		log.Info("batch committed", zap.String(logkey.JobID, id), zap.Int64(logkey.Rows, n), zap.Int(logkey.Attempt, attempt))
		return nil
	}
}

// prepare makes sure the table can take the batch and encodes the batch
// with the table's modes into a temporary file, once per Commit: each
// chunk is conformed and encoded as it streams in, so memory holds one
// chunk and one row group, never the batch.
func (c *commit) prepare(ctx context.Context) error {
	if c.file != nil {
		return nil
	}
	schema, err := c.s.ensureTable(ctx, c.table, c.b, c.recs.Schema)
	if err != nil {
		return err
	}
	as, err := conformSchema(c.recs.Schema, schema)
	if err != nil {
		return fmt.Errorf("bigquery sink: batch %s for %s: %w", c.b.ID, c.s.fullName(c.table), err)
	}
	conformed := sink.Records{Schema: as, Rows: c.recs.Rows, Each: func(fn func(arrow.Record) error) error {
		return c.recs.Each(func(rec arrow.Record) error {
			out, err := conform(rec, schema)
			if err != nil {
				return fmt.Errorf("bigquery sink: batch %s for %s: %w", c.b.ID, c.s.fullName(c.table), err)
			}
			defer out.Release()
			return fn(out)
		})
	}}
	c.written = as
	dir, err := spool.TempDir(c.s.opts.TempDir)
	if err != nil {
		return fmt.Errorf("bigquery sink: batch %s: %w", c.b.ID, err)
	}
	f, err := os.CreateTemp(dir, "load-*.parquet")
	if err != nil {
		os.Remove(dir)
		return fmt.Errorf("bigquery sink: batch %s: temporary file: %w", c.b.ID, err)
	}
	kv := map[string]string{}
	if c.s.opts.Version != "" {
		kv[parquetsink.KeyVersion] = c.s.opts.Version
	}
	w := bufio.NewWriterSize(f, parquetsink.WriteBuffer)
	n, err := parquetsink.EncodeRecords(w, conformed, c.b, kv, c.s.opts.Encode)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		os.RemoveAll(dir)
		return fmt.Errorf("bigquery sink: batch %s: %w", c.b.ID, err)
	}
	c.file, c.size = f, n
	return nil
}

// tableChanged reads the table afresh (the caller made the sink forget
// it) and reports whether the batch's file for it differs from the last one
// made.
func (c *commit) tableChanged(ctx context.Context) (bool, error) {
	schema, err := c.s.ensureTable(ctx, c.table, c.b, c.recs.Schema)
	if err != nil {
		return false, err
	}
	as, err := conformSchema(c.recs.Schema, schema)
	if err != nil {
		return false, fmt.Errorf("bigquery sink: batch %s for %s: %w", c.b.ID, c.s.fullName(c.table), err)
	}
	return !as.Equal(c.written), nil
}

func outputRows(st *bigquery.JobStatus) (int64, error) {
	if st.Statistics != nil {
		if ls, ok := st.Statistics.Details.(*bigquery.LoadStatistics); ok {
			return ls.OutputRows, nil
		}
	}
	return 0, errors.New("the finished load job has no load statistics")
}

// Committed reports whether a load job of batch b succeeded. A job still
// running is waited for. It creates nothing.
func (s *Sink) Committed(ctx context.Context, b sink.Batch) (bool, error) {
	if err := checkBatch(b); err != nil {
		return false, err
	}
	exists, err := s.dataset(ctx, false)
	if err != nil || !exists {
		return false, err
	}
	table := s.tableName(b)
	for attempt := 1; ; attempt++ {
		id := jobID(b.ID, attempt)
		job, err := s.lookup(ctx, table, id)
		if err != nil || job == nil {
			return false, err
		}
		st, err := s.wait(ctx, job)
		if err != nil {
			return false, s.apiError("wait for load job", table, id, err)
		}
		if st.Err() == nil {
			return true, nil
		}
	}
}

// lookup returns load job id of table, or nil if there is none. A job of
// that id that loads elsewhere is an error: two deployments share batch ids
// in one project, and trusting the job could lose a batch.
func (s *Sink) lookup(ctx context.Context, table, id string) (*bigquery.Job, error) {
	job, err := s.client.JobFromIDLocation(ctx, id, s.location)
	if err != nil {
		if v, _ := classify(err); v == missing {
			return nil, nil
		}
		return nil, s.apiError("look up load job", table, id, err)
	}
	cfg, err := job.Config()
	if err != nil {
		return nil, fmt.Errorf("bigquery sink: job %s: %w", id, err)
	}
	lc, ok := cfg.(*bigquery.LoadConfig)
	if !ok || lc.Dst == nil || lc.Dst.ProjectID != s.opts.Project || lc.Dst.DatasetID != s.opts.Dataset || lc.Dst.TableID != table {
		dst := "something that is not a load"
		if ok && lc.Dst != nil {
			dst = lc.Dst.ProjectID + "." + lc.Dst.DatasetID + "." + lc.Dst.TableID
		}
		return nil, &foreignJobError{fmt.Sprintf("bigquery sink: job %s in project %s loads %s, not %s: another syncd uses the same batch ids in this project; give each deployment its own project, or stop one", id, s.opts.Project, dst, s.fullName(table))}
	}
	return job, nil
}

// submit starts load job id of the file into table.
func (s *Sink) submit(ctx context.Context, table, id string, f *os.File, size int64) (*bigquery.Job, error) {
	src := bigquery.NewReaderSource(io.NewSectionReader(f, 0, size))
	src.SourceFormat = bigquery.Parquet
	src.ParquetOptions = &bigquery.ParquetOptions{EnableListInference: true}
	l := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset).Table(table).LoaderFrom(src)
	l.JobID = id
	l.Location = s.location
	l.WriteDisposition = bigquery.WriteAppend
	// The sink creates tables itself (partitioned, described); a table
	// that vanished must fail the load, not be recreated bare.
	l.CreateDisposition = bigquery.CreateNever
	l.SchemaUpdateOptions = []string{"ALLOW_FIELD_ADDITION"}
	l.Labels = map[string]string{"app": "syncd"}
	l.MediaOptions = []googleapi.MediaOption{
		googleapi.ContentType("application/octet-stream"),
		googleapi.ChunkSize(s.opts.UploadChunkSize),
	}
	return l.Run(ctx)
}

// wait polls job until it is done.
func (s *Sink) wait(ctx context.Context, job *bigquery.Job) (*bigquery.JobStatus, error) {
	st := job.LastStatus()
	for poll := 1; st == nil || !st.Done(); poll++ {
		if err := httpapi.SleepContext(ctx, min(s.opts.MinBackoff<<min(poll-1, 20), s.opts.MaxBackoff)); err != nil {
			return nil, err
		}
		var err error
		if st, err = job.Status(ctx); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// sleep pauses before try+1: MinBackoff doubled per try up to MaxBackoff,
// half of it random so that many syncd processes do not retry in step.
func (s *Sink) sleep(ctx context.Context, try int) error {
	d := min(s.opts.MinBackoff<<min(try-1, 20), s.opts.MaxBackoff)
	return httpapi.SleepContext(ctx, d/2+rand.N(d/2+1))
}

// dataset finds the dataset, creating it in the configured location when
// create is set, and learns its location (jobs must run there). It reports
// whether the dataset exists.
func (s *Sink) dataset(ctx context.Context, create bool) (bool, error) {
	s.dsMu.Lock()
	defer s.dsMu.Unlock()
	if s.location != "" {
		return true, nil
	}
	ds := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset)
	md, err := ds.Metadata(ctx)
	if v, _ := classify(err); err != nil && v == missing {
		if !create {
			return false, nil
		}
		err = ds.Create(ctx, &bigquery.DatasetMetadata{
			Location:    s.opts.Location,
			Description: "Form submissions, synced by syncd.",
		})
		if v, _ := classify(err); err != nil && v != duplicate { // duplicate: created meanwhile
			return false, s.apiError("create dataset", "", "", err)
		}
		if err == nil {
			s.log.Info("dataset created", zap.String(logkey.Location, s.opts.Location))
		}
		md, err = ds.Metadata(ctx)
	}
	if err != nil {
		return false, s.apiError("get dataset", "", "", err)
	}
	if s.opts.Location != "" && !strings.EqualFold(md.Location, s.opts.Location) {
		return false, fmt.Errorf("bigquery sink: dataset %s.%s is in location %s, not %s as sink.bigquery.location says: set location to %s or use another dataset",
			s.opts.Project, s.opts.Dataset, md.Location, s.opts.Location, md.Location)
	}
	s.location = md.Location
	return true, nil
}

func (s *Sink) tableState(table string) *tableState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.tables[table]
	if ts == nil {
		ts = &tableState{}
		s.tables[table] = ts
	}
	return ts
}

// forgetTable drops what the sink believes of a table, so that the next
// batch looks at it afresh.
func (s *Sink) forgetTable(table string) {
	ts := s.tableState(table)
	ts.mu.Lock()
	ts.schema = nil
	ts.view = false
	ts.mu.Unlock()
}

// maxPatchTries bounds the retries of a table patch that lost a race with
// another writer of the table's schema.
const maxPatchTries = 3

// ensureTable makes table able to take a file of schema as: it creates the
// table, or adds the new columns (NULLABLE) and relaxes REQUIRED columns the
// batch has as nullable. It returns the table's schema. It also makes sure
// of the table's latest view, again at most once per viewRecheck while it
// is in place, without failing for it.
func (s *Sink) ensureTable(ctx context.Context, table string, b sink.Batch, as *arrow.Schema) (bigquery.Schema, error) {
	want, err := tableSchema(as, b.Required)
	if err != nil {
		return nil, fmt.Errorf("bigquery sink: batch %s for %s: %w", b.ID, s.fullName(table), err)
	}
	ts := s.tableState(table)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	schema, err := s.fitTable(ctx, ts, table, b, want)
	if err != nil {
		return nil, err
	}
	if now := s.now(); !ts.view || now.Sub(ts.viewSeen) >= viewRecheck {
		s.ensureLatestView(ctx, ts, table, b, now)
	}
	return schema, nil
}

// fitTable is ensureTable's work on the table itself; the caller holds
// ts.mu.
func (s *Sink) fitTable(ctx context.Context, ts *tableState, table string, b sink.Batch, want bigquery.Schema) (bigquery.Schema, error) {
	if ts.schema != nil {
		_, changes, err := reconcile(s.fullName(table), ts.schema, want)
		if err == nil && len(changes) == 0 {
			return ts.schema, nil
		}
		// Changes, or a SchemaError that may be the cache's alone: its
		// fixes (relax the column, move the table aside) are made on the
		// table, so decide on the table as it is now.
	}
	t := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset).Table(table)
	for try := 1; ; try++ {
		md, err := t.Metadata(ctx)
		if v, _ := classify(err); err != nil && v == missing {
			md, err = s.createTable(ctx, t, b, want)
			if v, _ := classify(err); err != nil && v == duplicate && try < maxPatchTries {
				continue // created meanwhile: read it
			}
			if err != nil {
				return nil, err
			}
			ts.schema = md.Schema
			return md.Schema, nil
		}
		if err != nil {
			return nil, s.apiError("get table", table, "", err)
		}
		ts.schema = md.Schema
		next, changes, err := reconcile(s.fullName(table), md.Schema, want)
		if err != nil {
			return nil, err
		}
		if len(changes) == 0 {
			ts.schema = md.Schema
			return md.Schema, nil
		}
		md, err = t.Update(ctx, bigquery.TableMetadataToUpdate{Schema: next}, md.ETag)
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == 412 && try < maxPatchTries {
			continue // the table changed under us: look again
		}
		if err != nil {
			return nil, s.apiError("update schema", table, "", err)
		}
		s.log.Info("table schema updated", zap.String(logkey.Table, table), zap.Strings(logkey.Changes, changes))
		ts.schema = md.Schema
		return md.Schema, nil
	}
}

// tableDescription is what a new table says it holds: the stream's words,
// or its name.
func tableDescription(b sink.Batch) string {
	if b.Description != "" {
		return b.Description + ", synced by syncd."
	}
	return b.Stream + ", synced by syncd."
}

func (s *Sink) createTable(ctx context.Context, t *bigquery.Table, b sink.Batch, schema bigquery.Schema) (*bigquery.TableMetadata, error) {
	if err := checkClustering(s.fullName(t.TableID), schema, s.opts.Clustering); err != nil {
		return nil, err
	}
	tm := &bigquery.TableMetadata{
		Schema:           schema,
		TimePartitioning: partitioning(schema, b.TimeColumn),
		Description:      tableDescription(b),
	}
	if tm.TimePartitioning == nil {
		s.log.Warn("table has no time column to partition by: it is not partitioned", zap.String(logkey.Table, t.TableID), zap.String(logkey.Column, b.TimeColumn))
	}
	if len(s.opts.Clustering) > 0 {
		tm.Clustering = &bigquery.Clustering{Fields: s.opts.Clustering}
	}
	if err := t.Create(ctx, tm); err != nil {
		if v, _ := classify(err); v == duplicate {
			return nil, err
		}
		return nil, s.apiError("create table", t.TableID, "", err)
	}
	s.log.Info("table created", zap.String(logkey.Table, t.TableID), zap.Int(logkey.Columns, len(schema)))
	md, err := t.Metadata(ctx)
	if err != nil {
		return nil, s.apiError("get table", t.TableID, "", err)
	}
	return md, nil
}

// EndpointOptions are the client options that send every call to endpoint
// instead of BigQuery: none for "". An http:// endpoint (a test server on
// loopback) is called without credentials, which would otherwise travel in
// clear text; an https:// one (a private endpoint) with them.
func EndpointOptions(endpoint string) []option.ClientOption {
	if endpoint == "" {
		return nil
	}
	opts := []option.ClientOption{option.WithEndpoint(endpoint)}
	if strings.HasPrefix(endpoint, "http://") {
		opts = append(opts, option.WithoutAuthentication())
	}
	return opts
}

// Purge deletes the table of a form (its TablePrefix applies), for a full
// refresh; a table that does not exist is already purged. The next batch
// creates it again with the schema of that batch.
func (s *Sink) Purge(ctx context.Context, table string) error {
	name := s.opts.TablePrefix + table
	err := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset).Table(name).Delete(ctx)
	if v, _ := classify(err); err != nil && v != missing {
		return s.apiError("delete table", name, "", err)
	}
	s.forgetTable(name)
	return nil
}

// viewTimeout bounds the calls that keep a latest view: the rows of the
// batch wait for them.
const viewTimeout = 30 * time.Second

// viewRecheck is how long the sink trusts a latest view it saw to be still
// there. Someone may drop it while syncd runs, and whoever queries it then
// gets "not found" until it is back; looking again costs one metadata get
// per table per interval, not one per batch of a backfill.
const viewRecheck = 5 * time.Minute

// ensureLatestView makes sure of the view <table>_latest over a table that
// keeps versions (the batch names its key and version columns): the
// table's current state, as sink.LatestQuery defines it. It creates the
// view when missing, again if it was dropped since the sink saw it; one
// that exists is kept, whatever its query (a person may have written it).
// It records in ts whether the view is in place, and when it was seen; the
// caller holds ts.mu. A failure is logged, not returned: the rows load
// without the view, and the next batch of the table tries again.
func (s *Sink) ensureLatestView(ctx context.Context, ts *tableState, table string, b sink.Batch, now time.Time) {
	if b.KeyColumn == "" || b.VersionColumn == "" {
		return
	}
	known := ts.view
	ts.view = false // until seen or made
	name := table + "_latest"
	query := sink.LatestQuery(s.quoted(table), b.KeyColumn, b.VersionColumn)
	vctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	v := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset).Table(name)
	md, err := v.Metadata(vctx)
	if err == nil {
		if md.ViewQuery != query && md.ViewQuery != ts.viewOther {
			s.log.Info("the latest view exists with another query; kept as it is", zap.String(logkey.View, name), zap.String(logkey.Query, md.ViewQuery), zap.String(logkey.SyncdQuery, query))
			ts.viewOther = md.ViewQuery
		}
		ts.view, ts.viewSeen = true, now
		return
	}
	op := "get view"
	if vd, _ := classify(err); vd == missing {
		op = "create view"
		if known {
			op = "re-create view"
		}
		err = v.Create(vctx, &bigquery.TableMetadata{
			ViewQuery:   query,
			Description: fmt.Sprintf("The current state of %s: the latest version of each %s, deletions dropped. Kept by syncd.", table, b.KeyColumn),
		})
		if err == nil && known {
			s.log.Warn("the latest view was dropped since syncd last saw it; re-created", zap.String(logkey.Table, table), zap.String(logkey.View, name))
		} else if err == nil {
			s.log.Info("view created", zap.String(logkey.View, name))
		}
		if vd, _ := classify(err); err == nil || vd == duplicate { // duplicate: created meanwhile
			ts.view, ts.viewSeen, ts.viewOther = true, now, ""
			return
		}
	}
	if ctx.Err() == nil { // else the batch fails for it anyway
		s.log.Warn("latest view not in place; the batch loads without it and the next batch of the table tries again",
			zap.String(logkey.View, name), zap.Error(s.apiError(op, name, "", err)))
	}
}

// Probe runs a dry-run query naming the dataset (sink.Prober): BigQuery
// checks the job permission on the project and read access to the
// dataset, runs nothing and bills nothing. A dataset that does not exist
// yet is a warning: the first load creates it.
func (s *Sink) Probe(ctx context.Context) (sink.Probe, error) {
	where := s.opts.Project + "." + s.opts.Dataset
	q := s.client.Query(fmt.Sprintf("SELECT table_name FROM `%s.%s.INFORMATION_SCHEMA.TABLES` LIMIT 1", s.opts.Project, s.opts.Dataset))
	q.DryRun = true
	q.Location = s.opts.Location
	_, err := q.Run(ctx)
	var ge *googleapi.Error
	switch {
	case err == nil:
		return sink.Probe{Checked: "a dry-run query job was accepted"}, nil
	case errors.As(err, &ge) && ge.Code == 404:
		location := s.opts.Location
		if location == "" {
			location = "US"
		}
		return sink.Probe{Warning: fmt.Sprintf("dataset %s does not exist yet: syncd creates it on the first load, which needs roles/bigquery.dataEditor on project %s; or create it: bq mk --location=%s %s:%s",
			where, s.opts.Project, location, s.opts.Project, s.opts.Dataset)}, nil
	case errors.As(err, &ge) && ge.Code == 403:
		return sink.Probe{}, fmt.Errorf("bigquery %s: permission denied for a dry-run query job (%s): grant the service account roles/bigquery.jobUser on project %s and roles/bigquery.dataEditor on dataset %s", where, ge.Message, s.opts.Project, where)
	default:
		return sink.Probe{}, fmt.Errorf("bigquery %s: a dry-run query job failed: %w", where, err)
	}
}
