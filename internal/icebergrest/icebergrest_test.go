package icebergrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

const (
	testClientID = "syncd-test"
	testSecret   = "s3cr3t-do-not-print"
)

// start runs a fake with one OAuth2 client and a file:// warehouse.
func start(t *testing.T, mod ...func(*Options)) *Server {
	t.Helper()
	o := Options{
		Warehouse:    "file://" + filepath.ToSlash(t.TempDir()),
		Prefix:       "wh",
		ClientID:     testClientID,
		ClientSecret: testSecret,
	}
	for _, m := range mod {
		m(&o)
	}
	return Start(t, o)
}

// open loads iceberg-go's REST catalog against the fake, as the sink does.
func open(t *testing.T, s *Server, props iceberg.Properties) catalog.Catalog {
	t.Helper()
	p := iceberg.Properties{"type": "rest", "uri": s.URL(), "credential": s.Credential(), "warehouse": s.opts.Warehouse}
	for k, v := range props {
		if v == "" {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	cat, err := catalog.Load(context.Background(), "test", p)
	if err != nil {
		t.Fatalf("catalog.Load: %v", err)
	}
	t.Cleanup(func() {
		if c, ok := cat.(catalog.Closer); ok {
			_ = c.Close()
		}
	})
	return cat
}

var testSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
	iceberg.NestedField{ID: 3, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
)

// monthly partitions by month(ts).
var monthly = iceberg.NewPartitionSpec(iceberg.PartitionField{
	SourceIDs: []int{3}, FieldID: 1000, Name: "ts_month", Transform: iceberg.MonthTransform{},
})

func createTable(t *testing.T, cat catalog.Catalog, ident table.Identifier, props iceberg.Properties) *table.Table {
	t.Helper()
	ctx := context.Background()
	ns := ident[:len(ident)-1]
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err != nil {
		t.Fatalf("CheckNamespaceExists: %v", err)
	} else if !ok {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatalf("CreateNamespace: %v", err)
		}
	}
	spec := monthly
	tbl, err := cat.CreateTable(ctx, ident, testSchema, catalog.WithPartitionSpec(&spec), catalog.WithProperties(props))
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return tbl
}

type row struct {
	ID   int64
	Name string
	TS   time.Time
}

// records builds an Arrow reader of rows in the table's current schema
// (extra columns null).
func records(t *testing.T, tbl *table.Table, rows ...row) array.RecordReader {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatalf("SchemaToArrowSchema: %v", err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, r := range rows {
		for i, f := range sc.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "id":
				fb.(*array.Int64Builder).Append(r.ID)
			case "name":
				fb.(*array.StringBuilder).Append(r.Name)
			case "ts":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(r.TS.UnixMicro()))
			default:
				fb.AppendNull()
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatalf("NewRecordReader: %v", err)
	}
	return rdr
}

func appendRows(ctx context.Context, t *testing.T, tbl *table.Table, rows ...row) (*table.Table, error) {
	t.Helper()
	rdr := records(t, tbl, rows...)
	defer rdr.Release()
	return tbl.Append(ctx, rdr, nil)
}

// readRows scans the table and returns "id:name:ts" strings, sorted.
func readRows(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	var out []string
	tr := array.NewTableReader(at, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		sc := rec.Schema()
		col := func(name string) arrow.Array {
			idx := sc.FieldIndices(name)
			if len(idx) == 0 {
				t.Fatalf("no column %q in %v", name, sc)
			}
			return rec.Column(idx[0])
		}
		ids, names, tss := col("id").(*array.Int64), col("name").(*array.String), col("ts").(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%d:%s:%s", ids.Value(i), names.Value(i),
				tss.Value(i).ToTime(arrow.Microsecond).UTC().Format(time.RFC3339)))
		}
	}
	sort.Strings(out)
	return out
}

var (
	jan = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	feb = time.Date(2026, 2, 3, 8, 30, 0, 0, time.UTC)
)

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)

	if err := cat.CreateNamespace(ctx, table.Identifier{"forms"}, iceberg.Properties{"owner": "syncd"}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"forms"}, nil); !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		t.Errorf("second CreateNamespace: %v, want ErrNamespaceAlreadyExists", err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"forms", "raw"}, nil); err != nil {
		t.Fatalf("CreateNamespace nested: %v", err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"nope", "child"}, nil); !errors.Is(err, catalog.ErrNoSuchNamespace) {
		t.Errorf("CreateNamespace under a missing parent: %v, want ErrNoSuchNamespace", err)
	}
	for _, tc := range []struct {
		parent table.Identifier
		want   []table.Identifier
	}{
		{nil, []table.Identifier{{"forms"}}},
		{table.Identifier{"forms"}, []table.Identifier{{"forms", "raw"}}},
		{table.Identifier{"forms", "raw"}, nil},
	} {
		got, err := cat.ListNamespaces(ctx, tc.parent)
		if err != nil {
			t.Fatalf("ListNamespaces(%v): %v", tc.parent, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ListNamespaces(%v) = %v, want %v", tc.parent, got, tc.want)
		}
	}
	sum, err := cat.UpdateNamespaceProperties(ctx, table.Identifier{"forms"}, []string{"owner", "absent"}, iceberg.Properties{"team": "data"})
	if err != nil {
		t.Fatalf("UpdateNamespaceProperties: %v", err)
	}
	if fmt.Sprint(sum.Removed, sum.Updated, sum.Missing) != "[owner] [team] [absent]" {
		t.Errorf("UpdateNamespaceProperties summary = %+v", sum)
	}
	props, err := cat.LoadNamespaceProperties(ctx, table.Identifier{"forms"})
	if err != nil || props["team"] != "data" || props["owner"] != "" {
		t.Errorf("LoadNamespaceProperties = %v, %v", props, err)
	}
	if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"absent"}); ok || err != nil {
		t.Errorf("CheckNamespaceExists(absent) = %v, %v", ok, err)
	}

	ident := table.Identifier{"forms", "raw", "submissions"}
	tbl := createTable(t, cat, ident, nil)
	if want := s.opts.Warehouse + "/forms/raw/submissions"; tbl.Location() != want {
		t.Errorf("location = %s, want %s", tbl.Location(), want)
	}
	if _, err := cat.CreateTable(ctx, ident, testSchema); !errors.Is(err, catalog.ErrTableAlreadyExists) {
		t.Errorf("second CreateTable: %v, want ErrTableAlreadyExists", err)
	}
	if tbl, err = appendRows(ctx, t, tbl, row{1, "a", jan}, row{2, "b", feb}); err != nil {
		t.Fatalf("first append: %v", err)
	}
	if tbl, err = appendRows(ctx, t, tbl, row{3, "c", feb}); err != nil {
		t.Fatalf("second append: %v", err)
	}
	if n := s.Commits(ident...); n != 2 {
		t.Errorf("Commits = %d, want 2", n)
	}

	// Another client sees both snapshots and every row.
	other := open(t, s, nil)
	loaded, err := other.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("LoadTable: %v", err)
	}
	if n := len(loaded.Metadata().Snapshots()); n != 2 {
		t.Errorf("snapshots = %d, want 2", n)
	}
	want := []string{"1:a:2026-01-15T10:00:00Z", "2:b:2026-02-03T08:30:00Z", "3:c:2026-02-03T08:30:00Z"}
	if got := readRows(t, loaded); !slices.Equal(got, want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if sp := loaded.Spec(); sp.NumFields() != 1 || sp.Field(0).Transform.String() != "month" {
		t.Errorf("spec = %v, want month(ts)", &sp)
	}
	if s.Loads(ident...) != 1 {
		t.Errorf("Loads = %d, want 1", s.Loads(ident...))
	}
	// Metadata files 0, 1 and 2 are in the table's metadata directory, and
	// the pointer is the last.
	dir := strings.TrimPrefix(tbl.Location(), "file://") + "/metadata"
	files, _ := filepath.Glob(filepath.Join(dir, "*.metadata.json"))
	if len(files) != 3 {
		t.Errorf("metadata files = %v, want 3", files)
	}
	if loc, _ := s.MetadataLocation(ident...); !strings.Contains(loc, "/metadata/00002-") || loc != loaded.MetadataLocation() {
		t.Errorf("metadata location = %s (client %s), want version 2", loc, loaded.MetadataLocation())
	}

	var listed []string
	for id, err := range cat.ListTables(ctx, table.Identifier{"forms", "raw"}) {
		if err != nil {
			t.Fatalf("ListTables: %v", err)
		}
		listed = append(listed, strings.Join(id, "."))
	}
	if fmt.Sprint(listed) != "[forms.raw.submissions]" {
		t.Errorf("ListTables = %v", listed)
	}

	if err := cat.DropNamespace(ctx, table.Identifier{"forms", "raw"}); !errors.Is(err, catalog.ErrNamespaceNotEmpty) {
		t.Errorf("DropNamespace of a namespace with a table: %v, want ErrNamespaceNotEmpty", err)
	}

	renamed := table.Identifier{"forms", "submissions_v2"}
	rt, err := cat.RenameTable(ctx, ident, renamed)
	if err != nil {
		t.Fatalf("RenameTable: %v", err)
	}
	if got := readRows(t, rt); !slices.Equal(got, want) {
		t.Errorf("rows after rename = %v", got)
	}
	if ok, err := cat.CheckTableExists(ctx, ident); ok || err != nil {
		t.Errorf("CheckTableExists(old name) = %v, %v", ok, err)
	}
	if _, err := cat.LoadTable(ctx, ident); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("LoadTable(old name): %v, want ErrNoSuchTable", err)
	}
	if _, err := cat.RenameTable(ctx, ident, renamed); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("RenameTable of a missing table: %v, want ErrNoSuchTable", err)
	}

	if err := cat.DropNamespace(ctx, table.Identifier{"forms", "raw"}); err != nil {
		t.Errorf("DropNamespace(forms.raw): %v", err)
	}
	if err := cat.DropTable(ctx, renamed); err != nil {
		t.Fatalf("DropTable: %v", err)
	}
	if ok, err := cat.CheckTableExists(ctx, renamed); ok || err != nil {
		t.Errorf("CheckTableExists after drop = %v, %v", ok, err)
	}
	if err := cat.DropTable(ctx, renamed); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("second DropTable: %v, want ErrNoSuchTable", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("drop without purge removed the metadata: %v", err)
	}
	if err := cat.DropNamespace(ctx, table.Identifier{"forms"}); err != nil {
		t.Errorf("DropNamespace(forms): %v", err)
	}
	if err := cat.DropNamespace(ctx, table.Identifier{"forms"}); !errors.Is(err, catalog.ErrNoSuchNamespace) {
		t.Errorf("second DropNamespace: %v, want ErrNoSuchNamespace", err)
	}
}

func TestPurge(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, cat, ident, nil)
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); err != nil {
		t.Fatal(err)
	}
	pc, ok := cat.(catalog.PurgeableTable)
	if !ok {
		t.Fatal("the REST catalog is not a PurgeableTable")
	}
	if err := pc.PurgeTable(ctx, ident); err != nil {
		t.Fatalf("PurgeTable: %v", err)
	}
	if _, err := os.Stat(strings.TrimPrefix(tbl.Location(), "file://")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("table directory after purge: %v", err)
	}
}

// TestConflict: two writers load the same table and both append; the
// second commit's assert-ref-snapshot-id fails. iceberg-go does not retry
// unless the table says commit.retry.num-retries.
func TestConflict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries string
		wantErr bool
	}{
		{"no retries (the default)", "", true},
		{"commit.retry.num-retries=2", "2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := start(t)
			ident := table.Identifier{"ns", "t"}
			props := iceberg.Properties{}
			if tc.retries != "" {
				props[table.CommitNumRetriesKey] = tc.retries
				props[table.CommitMinRetryWaitMsKey] = "1"
			}
			createTable(t, open(t, s, nil), ident, props)
			a, err := open(t, s, nil).LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			b, err := open(t, s, nil).LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := appendRows(ctx, t, a, row{1, "a", jan}); err != nil {
				t.Fatalf("first writer: %v", err)
			}
			_, err = appendRows(ctx, t, b, row{2, "b", feb})
			if tc.wantErr {
				if !errors.Is(err, table.ErrCommitFailed) || !errors.Is(err, rest.ErrCommitFailed) {
					t.Fatalf("second writer: %v, want table.ErrCommitFailed", err)
				}
				if !strings.Contains(err.Error(), "CommitFailedException") {
					t.Errorf("error does not name CommitFailedException: %v", err)
				}
				t.Logf("second writer's error: %v", err)
			} else if err != nil {
				t.Fatalf("second writer with retries: %v", err)
			}
			wantCommits, wantRequests := 1, 2
			if !tc.wantErr {
				wantCommits, wantRequests = 2, 3
			}
			if s.Commits(ident...) != wantCommits || s.CommitRequests(ident...) != wantRequests {
				t.Errorf("commits %d of %d requests, want %d of %d",
					s.Commits(ident...), s.CommitRequests(ident...), wantCommits, wantRequests)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	ctx := context.Background()
	s := start(t, func(o *Options) { o.Token = "static-token" })
	for _, tc := range []struct {
		name    string
		props   iceberg.Properties
		wantErr error
	}{
		{"client credentials", nil, nil},
		{"static token", iceberg.Properties{"credential": "", "token": "static-token"}, nil},
		{"wrong secret", iceberg.Properties{"credential": testClientID + ":wrong-" + testSecret}, rest.ErrOAuthError},
		{"unknown client", iceberg.Properties{"credential": "someone:" + testSecret}, rest.ErrOAuthError},
		{"wrong token", iceberg.Properties{"credential": "", "token": "bad-" + testSecret}, rest.ErrUnauthorized},
		{"no credentials", iceberg.Properties{"credential": ""}, rest.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := iceberg.Properties{"type": "rest", "uri": s.URL(), "credential": s.Credential()}
			for k, v := range tc.props {
				if v == "" {
					delete(p, k)
				} else {
					p[k] = v
				}
			}
			cat, err := catalog.Load(ctx, "test", p)
			if err == nil {
				_, err = cat.ListNamespaces(ctx, nil)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("the error shows the secret: %v", err)
			}
			t.Logf("error: %v", err)
		})
	}

	// A revoked token answers 401; iceberg-go does not fetch a new one.
	cat := open(t, s, nil)
	if _, err := cat.ListNamespaces(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.RevokeTokens()
	if _, err := cat.ListNamespaces(ctx, nil); !errors.Is(err, rest.ErrUnauthorized) {
		t.Errorf("after RevokeTokens: %v, want ErrUnauthorized", err)
	}

	// The 401 is the spec's ErrorModel.
	rsp, err := http.Get(s.URL() + "/v1/wh/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	var em struct {
		Error errorModel `json:"error"`
	}
	if err := json.NewDecoder(rsp.Body).Decode(&em); err != nil || rsp.StatusCode != 401 ||
		em.Error.Code != 401 || em.Error.Type != "NotAuthorizedException" || em.Error.Message == "" {
		t.Errorf("401 answer: status %d, %+v, %v", rsp.StatusCode, em, err)
	}
}

// TestCommitFaults: what iceberg-go's client makes of each injected fault,
// and whether the commit happened.
func TestCommitFaults(t *testing.T) {
	for _, tc := range []struct {
		fault         Fault
		wantErr       error // nil: checked by wantTransport
		wantCommitted bool
	}{
		{Conflict, table.ErrCommitFailed, false},
		{ServerError, rest.ErrCommitStateUnknown, false},
		{Unavailable, rest.ErrCommitStateUnknown, false},
		{GatewayTimeout, rest.ErrCommitStateUnknown, false},
		{UnavailableAfterCommit, rest.ErrCommitStateUnknown, true},
		{CutAfterCommit, nil, true},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			ctx := context.Background()
			s := start(t)
			cat := open(t, s, nil)
			ident := table.Identifier{"ns", "t"}
			tbl := createTable(t, cat, ident, iceberg.Properties{
				// Even with retries on, only a 409 is retried.
				table.CommitNumRetriesKey: "0",
			})
			s.InjectCommitFaults(ident, tc.fault)
			_, err := appendRows(ctx, t, tbl, row{1, "a", jan})
			if err == nil {
				t.Fatal("append succeeded")
			}
			t.Logf("client error: %v", err)
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && (errors.Is(err, rest.ErrCommitStateUnknown) || errors.Is(err, table.ErrCommitFailed)) {
				t.Errorf("a cut connection gave %v; expected a bare transport error", err)
			}
			if s.PendingFaults() != 0 {
				t.Errorf("fault did not fire")
			}
			reloaded, err := cat.LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			committed := reloaded.CurrentSnapshot() != nil
			if committed != tc.wantCommitted {
				t.Errorf("committed = %v, want %v", committed, tc.wantCommitted)
			}
			if committed {
				if got := readRows(t, reloaded); fmt.Sprint(got) != "[1:a:2026-01-15T10:00:00Z]" {
					t.Errorf("rows = %v", got)
				}
			}
			// The next commit goes through.
			if _, err := appendRows(ctx, t, reloaded, row{2, "b", feb}); err != nil {
				t.Errorf("append after the fault: %v", err)
			}
		})
	}
}

func TestConflictRetriedWhenTableAllows(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, cat, ident, iceberg.Properties{
		table.CommitNumRetriesKey: "3", table.CommitMinRetryWaitMsKey: "1", table.CommitMaxRetryWaitMsKey: "5",
	})
	s.InjectCommitFaults(ident, Conflict, Conflict)
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); err != nil {
		t.Fatalf("append: %v", err)
	}
	if s.CommitRequests(ident...) != 3 || s.Commits(ident...) != 1 || s.Loads(ident...) != 2 {
		t.Errorf("requests %d, commits %d, loads %d; want 3, 1, 2",
			s.CommitRequests(ident...), s.Commits(ident...), s.Loads(ident...))
	}
}

func TestEvolution(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, cat, ident, nil)
	tbl, err := appendRows(ctx, t, tbl, row{1, "a", jan})
	if err != nil {
		t.Fatal(err)
	}

	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).AddColumn([]string{"source"}, iceberg.PrimitiveTypes.String, "form source", false, nil).Commit(); err != nil {
		t.Fatalf("UpdateSchema: %v", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatalf("commit schema change: %v", err)
	}
	tx = tbl.NewTransaction()
	if err := tx.UpdateSpec(true).AddField("id", iceberg.BucketTransform{NumBuckets: 4}, "id_bucket").Commit(); err != nil {
		t.Fatalf("UpdateSpec: %v", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatalf("commit spec change: %v", err)
	}
	if _, err = appendRows(ctx, t, tbl, row{2, "b", feb}); err != nil {
		t.Fatalf("append after evolution: %v", err)
	}

	loaded, err := open(t, s, nil).LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := loaded.Schema().FindFieldByName("source"); !ok || f.ID != 4 || loaded.Schema().ID != 1 {
		t.Errorf("schema %d = %v, want source as field 4 of schema 1", loaded.Schema().ID, loaded.Schema())
	}
	if sp := loaded.Spec(); sp.ID() != 1 || sp.NumFields() != 2 {
		t.Errorf("spec = %v, want spec 1 with month(ts) and bucket[4](id)", &sp)
	}
	if got := readRows(t, loaded); fmt.Sprint(got) != "[1:a:2026-01-15T10:00:00Z 2:b:2026-02-03T08:30:00Z]" {
		t.Errorf("rows = %v", got)
	}
}

func TestStagedCreate(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"ns", "staged"}
	spec := monthly
	tbl, err := cat.CreateTable(ctx, ident, testSchema, catalog.WithPartitionSpec(&spec),
		catalog.WithStagedUpdates(table.NewSetPropertiesUpdate(iceberg.Properties{"staged": "yes"})))
	if err != nil {
		t.Fatalf("staged CreateTable: %v", err)
	}
	if sp := tbl.Spec(); tbl.Properties()["staged"] != "yes" || sp.NumFields() != 1 {
		t.Errorf("staged table: props %v, spec %v", tbl.Properties(), &sp)
	}
	if loc, ok := s.MetadataLocation(ident...); !ok || !strings.Contains(loc, "/metadata/00000-") {
		t.Errorf("metadata location = %q, %v", loc, ok)
	}
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); err != nil {
		t.Fatalf("append: %v", err)
	}
	// A second staged create of the same table fails its assert-create.
	_, err = cat.CreateTable(ctx, ident, testSchema,
		catalog.WithStagedUpdates(table.NewSetPropertiesUpdate(iceberg.Properties{"staged": "again"})))
	if !errors.Is(err, catalog.ErrTableAlreadyExists) && !errors.Is(err, table.ErrCommitFailed) {
		t.Errorf("second staged create: %v", err)
	}
}

func TestMultiTableTransaction(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	a, b := table.Identifier{"ns", "a"}, table.Identifier{"ns", "b"}
	ta, tb := createTable(t, cat, a, nil), createTable(t, cat, b, nil)

	commit := func(ta, tb *table.Table) error {
		mtx, err := catalog.NewMultiTableTransaction(cat)
		if err != nil {
			return err
		}
		for _, tbl := range []*table.Table{ta, tb} {
			tx := tbl.NewTransaction()
			if err := tx.SetProperties(iceberg.Properties{"batch": "1"}); err != nil {
				return err
			}
			if err := mtx.AddTransaction(tx); err != nil {
				return err
			}
		}
		return mtx.Commit(ctx)
	}
	if err := commit(ta, tb); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	for _, id := range []table.Identifier{a, b} {
		if m, _ := s.Metadata(id...); m.Properties()["batch"] != "1" {
			t.Errorf("%v properties = %v", id, m.Properties())
		}
	}
	// All or nothing: b's requirement fails (stale table uuid is fine; use
	// a stale schema by evolving b first), so a is not changed either.
	tx := tb.NewTransaction()
	if err := tx.UpdateSchema(true, false).AddColumn([]string{"x"}, iceberg.PrimitiveTypes.Int32, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	locA, _ := s.MetadataLocation(a...)
	mtx, err := catalog.NewMultiTableTransaction(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []*table.Table{ta, tb} {
		tx := tbl.NewTransaction()
		if err := tx.UpdateSchema(true, false).AddColumn([]string{"y"}, iceberg.PrimitiveTypes.Int32, "", false, nil).Commit(); err != nil {
			t.Fatal(err)
		}
		if err := mtx.AddTransaction(tx); err != nil {
			t.Fatal(err)
		}
	}
	err = mtx.Commit(ctx)
	if !errors.Is(err, table.ErrCommitFailed) {
		t.Errorf("stale transaction: %v, want ErrCommitFailed", err)
	}
	if loc, _ := s.MetadataLocation(a...); loc != locA {
		t.Errorf("table a changed by a failed transaction: %s -> %s", locA, loc)
	}
}

func TestStateFileRestart(t *testing.T) {
	ctx := context.Background()
	wh := "file://" + filepath.ToSlash(t.TempDir())
	state := filepath.Join(t.TempDir(), "state.json")
	opts := func(o *Options) { o.Warehouse, o.StateFile = wh, state }
	s1 := start(t, opts)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, open(t, s1, nil), ident, nil)
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); err != nil {
		t.Fatal(err)
	}

	s2 := start(t, opts)
	loaded, err := open(t, s2, nil).LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("LoadTable after restart: %v", err)
	}
	if got := readRows(t, loaded); fmt.Sprint(got) != "[1:a:2026-01-15T10:00:00Z]" {
		t.Errorf("rows after restart = %v", got)
	}
}

// TestWire checks answers a client library would not show: ErrorModel
// shapes and status codes, unknown routes, a requirement failure.
func TestWire(t *testing.T) {
	s, err := New(Options{Warehouse: "file://" + filepath.ToSlash(t.TempDir()), WarehouseName: "lake"})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) (int, errorModel) {
		t.Helper()
		req, _ := http.NewRequest(method, path, strings.NewReader(body))
		rec := &recorder{header: http.Header{}}
		s.ServeHTTP(rec, req)
		var em struct {
			Error errorModel `json:"error"`
		}
		if rec.status >= 400 && method != http.MethodHead {
			if err := json.Unmarshal(rec.body, &em); err != nil {
				t.Errorf("%s %s: %d answer is not an ErrorModel: %q", method, path, rec.status, rec.body)
			} else if em.Error.Code != rec.status || em.Error.Message == "" {
				t.Errorf("%s %s: ErrorModel %+v with status %d", method, path, em.Error, rec.status)
			}
		}
		return rec.status, em.Error
	}
	do("POST", "/v1/namespaces", `{"namespace":["ns"]}`)
	schema := `{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","type":"long","required":false}]}`
	if st, e := do("POST", "/v1/namespaces/ns/tables", `{"name":"t","schema":`+schema+`}`); st != 200 {
		t.Fatalf("create: %d %+v", st, e)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		typ                string
	}{
		{"GET", "/v1/namespaces/absent", "", 404, "NoSuchNamespaceException"},
		{"GET", "/v1/namespaces/ns/tables/absent", "", 404, "NoSuchTableException"},
		{"HEAD", "/v1/namespaces/ns/tables/absent", "", 404, ""},
		{"HEAD", "/v1/namespaces/ns/tables/t", "", 204, ""},
		{"POST", "/v1/namespaces", `{"namespace":["ns"]}`, 409, "AlreadyExistsException"},
		{"POST", "/v1/namespaces", `{"namespace":`, 400, "BadRequestException"},
		{"POST", "/v1/namespaces/ns/tables", `{"name":"t","schema":` + schema + `}`, 409, "AlreadyExistsException"},
		{"DELETE", "/v1/namespaces/ns", "", 409, "NamespaceNotEmptyException"},
		{"POST", "/v1/namespaces/ns/tables/t", `{"requirements":[{"type":"assert-table-uuid","uuid":"00000000-0000-0000-0000-000000000001"}],"updates":[]}`, 409, "CommitFailedException"},
		{"POST", "/v1/namespaces/ns/tables/t", `{"requirements":[{"type":"assert-create"}],"updates":[]}`, 409, "CommitFailedException"},
		{"POST", "/v1/namespaces/ns/tables/t", `{"requirements":[],"updates":[{"action":"no-such-update"}]}`, 400, "BadRequestException"},
		{"POST", "/v1/namespaces/ns/tables/absent", `{"requirements":[],"updates":[]}`, 404, "NoSuchTableException"},
		{"GET", "/v1/namespaces/ns/views", "", 406, "UnsupportedOperationException"},
		{"GET", "/v1/config?warehouse=lake", "", 200, ""},
		{"GET", "/v1/config?warehouse=other", "", 400, "BadRequestException"},
		{"GET", "/v2/whatever", "", 404, "NoSuchRouteException"},
	} {
		st, e := do(tc.method, tc.path, tc.body)
		if st != tc.status || e.Type != tc.typ {
			t.Errorf("%s %s: %d %q (%s), want %d %q", tc.method, tc.path, st, e.Type, e.Message, tc.status, tc.typ)
		}
	}
	if u := s.UnknownRoutes(); fmt.Sprint(u) != "[GET /v2/whatever]" {
		t.Errorf("UnknownRoutes = %v", u)
	}
}

type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int)   { r.status = s }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	r.body = append(r.body, b...)
	return len(b), nil
}

// TestConcurrentWriters: writers that commit at once each land exactly once
// (the swap is atomic; losers get 409 and iceberg-go's retry replays them).
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	ident := table.Identifier{"ns", "t"}
	createTable(t, open(t, s, nil), ident, iceberg.Properties{
		table.CommitNumRetriesKey: "20", table.CommitMinRetryWaitMsKey: "1", table.CommitMaxRetryWaitMsKey: "20",
	})
	const writers = 4
	errs := make(chan error, writers)
	tables := make([]*table.Table, writers)
	for i := range tables {
		tbl, err := open(t, s, nil).LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		tables[i] = tbl
	}
	for i, tbl := range tables {
		rdr := records(t, tbl, row{int64(i), fmt.Sprint("w", i), jan})
		go func() {
			defer rdr.Release()
			_, err := tbl.Append(ctx, rdr, nil)
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	loaded, err := open(t, s, nil).LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, loaded); len(got) != writers {
		t.Errorf("rows = %v, want %d", got, writers)
	}
	if n := len(loaded.Metadata().Snapshots()); n != writers || s.Commits(ident...) != writers {
		t.Errorf("snapshots %d, commits %d, want %d", n, s.Commits(ident...), writers)
	}
	t.Logf("%d commit requests for %d commits", s.CommitRequests(ident...), writers)
}

func TestOnCommit(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	cat := open(t, s, nil)
	ident := table.Identifier{"ns", "t"}
	tbl := createTable(t, cat, ident, nil)
	var got []string
	s.OnCommit(func(id []string, loc string) { got = append(got, strings.Join(id, ".")+" "+filepath.Base(loc)[:5]) })
	s.InjectCommitFaults(nil, Conflict)
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); !errors.Is(err, table.ErrCommitFailed) {
		t.Fatalf("append with an injected conflict: %v", err)
	}
	if _, err := appendRows(ctx, t, tbl, row{1, "a", jan}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[ns.t 00001]" {
		t.Errorf("OnCommit saw %v", got)
	}
}
