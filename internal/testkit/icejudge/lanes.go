package icejudge

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/syncd-dev/syncd/internal/icebergrest"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
	"github.com/syncd-dev/syncd/internal/testkit/pgsrv"
)

// The catalogs and warehouses a lane combines.
const (
	SQLite   = icebergsink.CatalogSQLite
	Postgres = icebergsink.CatalogPostgres
	REST     = icebergsink.CatalogREST
	Local    = "local"
	S3       = "s3"
	GS       = "gs"
)

// Lane is a catalog and a warehouse store with their servers running
// (PostgreSQL, a bucket server), each installation of syncd getting its
// own database, REST catalog fake or bucket prefix. Azure is left out:
// iceberg-go's abfs file system does not reach the emulator (README,
// Iceberg).
type Lane struct {
	Catalog, Warehouse string
	// Maintenance, when set, are lines under sink.iceberg (indented four
	// spaces) that make syncd maintain its tables often (compact_every,
	// expire_after, keep_snapshots), so that kills land in maintenance.
	Maintenance string
	pg          *pgsrv.Server
	lake        *lakes.Lake
	n           int
}

// restSecret is the REST fakes' client secret: syncd reads it from
// SYNCD_ICEBERG_CREDENTIAL.
const restSecret = "s3cret-for-iceberg-tests"

// StartLane starts the servers of catalog (sqlite, postgres, rest) and
// warehouse (local, s3, gs) for the test; a REST catalog takes a local
// warehouse only. lakes.Start sets the bucket's credentials in this
// process's environment, so the test must not be parallel.
func StartLane(t testing.TB, catalog, warehouse string) *Lane {
	t.Helper()
	l := &Lane{Catalog: catalog, Warehouse: warehouse}
	switch catalog {
	case SQLite, REST:
	case Postgres:
		l.pg = pgsrv.Start(t)
	default:
		t.Fatalf("icejudge: no catalog %q", catalog)
	}
	switch warehouse {
	case Local:
	case S3, GS:
		if catalog == REST {
			t.Fatalf("icejudge: the REST lane takes a local warehouse only")
		}
		l.lake = lakes.Start(t, warehouse)
	default:
		t.Fatalf("icejudge: no warehouse store %q", warehouse)
	}
	return l
}

// Name is catalog/warehouse.
func (l *Lane) Name() string { return l.Catalog + "/" + l.Warehouse }

// Installation is one syncd installation's Iceberg sink: its config
// section, the environment its syncd processes need (secrets, bucket
// credentials), the reader of its tables, and its REST fake (rest lanes).
type Installation struct {
	Sink   string // a whole "sink:" section
	Env    []string
	Reader Reader
	REST   *icebergrest.Server
}

// Install makes a fresh installation: a new database, REST fake or
// bucket prefix, and a sqlite catalog file and local warehouse in
// folders of t.
func (l *Lane) Install(t testing.TB) Installation {
	t.Helper()
	l.n++
	dir := t.TempDir()
	var in Installation
	wh := filepath.Join(dir, "lake")
	var sources []icebird.Source
	switch l.Warehouse {
	case Local:
		sources = []icebird.Source{icebird.LocalDir("file://"+wh, wh)}
	default:
		wh = l.lake.URL(fmt.Sprintf("i%03d/lake", l.n))
		sources = []icebird.Source{icebird.Bucket(l.Warehouse+"://"+lakes.BucketName, l.lake.Open(t))}
		in.Env = append(in.Env, l.lake.Env()...)
	}
	cat := icebergsink.CatalogConfig{Type: l.Catalog, Warehouse: wh}
	catURI := ""
	switch l.Catalog {
	case SQLite:
		cat.URI = filepath.Join(dir, "iceberg-catalog.db")
		catURI = cat.URI
	case Postgres:
		cat.URI = l.pg.CreateDatabase(t, fmt.Sprintf("install%d", l.n))
		u, err := url.Parse(cat.URI)
		if err != nil {
			t.Fatal(err)
		}
		// syncd refuses a password in the URI: it takes PGPASSWORD.
		u.User = url.User(u.User.Username())
		catURI = u.String()
		in.Env = append(in.Env, "PGPASSWORD="+l.pg.Password)
	case REST:
		in.REST = icebergrest.Start(t, icebergrest.Options{Warehouse: "file://" + wh, ClientID: "syncd", ClientSecret: restSecret})
		cat.URI = in.REST.URL()
		cat.Props = map[string]string{"credential": in.REST.Credential()}
		catURI = cat.URI
		in.Env = append(in.Env, "SYNCD_ICEBERG_CREDENTIAL="+in.REST.Credential())
	}
	in.Sink = fmt.Sprintf("sink:\n  type: iceberg\n  iceberg:\n    warehouse: %s\n    catalog:\n      type: %s\n      uri: %s\n%s",
		strconv.Quote(wh), l.Catalog, strconv.Quote(catURI), l.Maintenance)
	in.Reader = Reader{Catalog: cat, Sources: sources}
	return in
}
