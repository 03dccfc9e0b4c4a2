package icebergsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	// The Iceberg file systems a warehouse may be on: file:// is built
	// in; these register s3://, gs:// and Azure's schemes.
	_ "github.com/apache/iceberg-go/io/gocloud/azure"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"

	// pgx's database/sql driver ("pgx") for the PostgreSQL catalog: its
	// errors carry SQLSTATE codes, which bun's retry of serialization
	// failures reads.
	_ "github.com/jackc/pgx/v5/stdlib"

	// The pure-Go sqlite driver ("sqlite"): the embedded catalog needs no
	// cgo and no server.
	_ "modernc.org/sqlite"
)

// The catalogs syncd can commit through.
const (
	CatalogSQLite   = "sqlite"   // a file: the embedded default
	CatalogPostgres = "postgres" // the JDBC catalog's tables on PostgreSQL
	CatalogREST     = "rest"     // an Iceberg REST catalog
)

// postgresDriver is the database/sql driver the PostgreSQL catalog opens.
const postgresDriver = "pgx"

// CatalogConfig says where the tables' pointers live and where new
// tables' files go.
type CatalogConfig struct {
	// Type is sqlite, postgres or rest.
	Type string
	// URI is the sqlite file, the PostgreSQL URL (postgres://…) or the
	// REST catalog's base URL.
	URI string
	// Warehouse is where new tables are created: a local folder or a
	// bucket URL (s3://, gs://, azblob://). A REST catalog may choose it
	// itself (then it may be empty).
	Warehouse string
	// Name is the catalog's name, as the SQL catalog's rows record it
	// (catalog_name): readers (Spark, Trino, PyIceberg) name it too.
	Name string
	// Props are further catalog and file-system properties (the REST
	// catalog's credential, token or scope; s3.endpoint, …): they come
	// from the environment, never from the config file.
	Props map[string]string
}

// Catalog is an open catalog; Close releases its connections.
type Catalog struct {
	catalog.Catalog
	db *sql.DB
}

// Close closes the catalog's database, if it has one.
func (c *Catalog) Close() error {
	if c.db != nil {
		return c.db.Close()
	}
	return nil
}

// OpenCatalog opens the configured catalog.
func OpenCatalog(ctx context.Context, cfg CatalogConfig) (*Catalog, error) {
	name := cfg.Name
	if name == "" {
		name = "syncd"
	}
	props := iceberg.Properties{}
	for k, v := range cfg.Props {
		props[k] = v
	}
	// A REST catalog may be asked for a warehouse by name (Polaris's
	// catalog), given as the "warehouse" property.
	restWarehouse := cfg.Props["warehouse"]
	if cfg.Warehouse != "" {
		wh, err := WarehouseLocation(cfg.Warehouse)
		if err != nil {
			return nil, err
		}
		props["warehouse"] = wh
		for k, v := range WarehouseProps(cfg.Warehouse) {
			if _, set := props[k]; !set {
				props[k] = v
			}
		}
	}
	switch cfg.Type {
	case CatalogSQLite, "":
		if cfg.Warehouse == "" {
			return nil, errors.New("open the Iceberg catalog: sqlite needs a warehouse (sink.iceberg.warehouse)")
		}
		if err := os.MkdirAll(filepath.Dir(cfg.URI), 0o755); err != nil {
			return nil, fmt.Errorf("open the Iceberg catalog %s: %w", cfg.URI, err)
		}
		// WAL and a busy timeout: a compaction job and a commit (or two
		// syncd processes) may write the catalog at once; the library
		// sets neither. Write transactions begin IMMEDIATE (_txlock): a
		// deferred one reads, then upgrades to a write lock, and in WAL
		// mode that upgrade fails at once with SQLITE_BUSY, busy timeout
		// or not, when another connection wrote since its read (streams
		// creating their tables at once did).
		dsn := "file:" + cfg.URI + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
		return openSQL(name, "sqlite", dsn, sqlcat.SQLite, props, cfg.URI)
	case CatalogPostgres:
		if cfg.Warehouse == "" {
			return nil, errors.New("open the Iceberg catalog: postgres needs a warehouse (sink.iceberg.warehouse)")
		}
		return openSQL(name, postgresDriver, cfg.URI, sqlcat.Postgres, props, redactURL(cfg.URI))
	case CatalogREST:
		opts := []rest.Option{}
		if restWarehouse == "" {
			restWarehouse = props["warehouse"]
		}
		if restWarehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(restWarehouse))
		}
		if c := props["credential"]; c != "" {
			opts = append(opts, rest.WithCredential(c))
		}
		if tok := props["token"]; tok != "" {
			opts = append(opts, rest.WithOAuthToken(tok))
		}
		if s := props["scope"]; s != "" {
			opts = append(opts, rest.WithScope(s))
		}
		if u := props["oauth2-server-uri"]; u != "" {
			au, err := url.Parse(u)
			if err != nil {
				return nil, fmt.Errorf("open the Iceberg REST catalog: oauth2-server-uri %q: %w", u, err)
			}
			opts = append(opts, rest.WithAuthURI(au))
		}
		io := iceberg.Properties{}
		for k, v := range props {
			switch k {
			case "warehouse", "credential", "token", "scope", "oauth2-server-uri":
			default:
				io[k] = v
			}
		}
		if len(io) > 0 {
			opts = append(opts, rest.WithAdditionalProps(io))
		}
		c, err := rest.NewCatalog(ctx, name, cfg.URI, opts...)
		if err != nil {
			// The REST client's errors may quote its request; never the
			// credential, which is not part of it.
			return nil, fmt.Errorf("open the Iceberg REST catalog at %s: %w", redactURL(cfg.URI), err)
		}
		return &Catalog{Catalog: c}, nil
	}
	return nil, fmt.Errorf("Iceberg catalog type %q is not one of sqlite, postgres, rest", cfg.Type)
}

func openSQL(name, driver, dsn string, dialect sqlcat.SupportedDialect, props iceberg.Properties, where string) (*Catalog, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open the Iceberg catalog %s: %w", where, err)
	}
	c, err := sqlcat.NewCatalog(name, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open the Iceberg catalog %s: %w", where, err)
	}
	return &Catalog{Catalog: c, db: db}, nil
}

// WarehouseLocation is a warehouse as Iceberg names locations: a local
// folder becomes an absolute file:// URL; azblob://container/path (as
// the Parquet sink spells it) becomes abfs://container/path; a bucket
// URL's query (gocloud's options such as ?endpoint=) is dropped, since
// Iceberg's file systems take those as properties.
func WarehouseLocation(w string) (string, error) {
	if w == "" {
		return "", errors.New("no warehouse")
	}
	scheme, rest, ok := strings.Cut(w, "://")
	if !ok {
		abs, err := filepath.Abs(w)
		if err != nil {
			return "", fmt.Errorf("warehouse %s: %w", w, err)
		}
		return "file://" + filepath.ToSlash(abs), nil
	}
	rest, _, _ = strings.Cut(rest, "?")
	rest = strings.TrimRight(rest, "/")
	switch scheme {
	case "file", "s3", "gs", "abfs", "abfss", "wasb", "wasbs":
		return scheme + "://" + rest, nil
	case "azblob":
		return "abfs://" + rest, nil
	}
	return "", fmt.Errorf("warehouse %s: scheme %s is not one of file, s3, gs, azblob", w, scheme)
}

// WarehouseProps are the Iceberg file-system properties a bucket URL's
// query names, as the Parquet sink's gocloud URLs spell them
// (s3://b/p?endpoint=…&region=…&use_path_style=true): Iceberg's file
// systems read them as properties. Credentials are never in the URL: they
// come from the environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS,
// STORAGE_EMULATOR_HOST, AZURE_STORAGE_*), as for the Parquet sink.
func WarehouseProps(w string) map[string]string {
	scheme, rest, ok := strings.Cut(w, "://")
	if !ok {
		return nil
	}
	_, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	switch scheme {
	case "s3":
		if e := q.Get("endpoint"); e != "" {
			if !strings.Contains(e, "://") {
				e = "https://" + e
				if q.Get("disable_https") == "true" {
					e = "http://" + strings.TrimPrefix(e, "https://")
				}
			}
			out["s3.endpoint"] = e
		}
		if r := q.Get("region"); r != "" {
			out["s3.region"] = r
		}
		if q.Get("use_path_style") == "true" || q.Get("endpoint") != "" {
			out["s3.force-virtual-addressing"] = "false"
		}
		if id, key := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && key != "" {
			out["s3.access-key-id"], out["s3.secret-access-key"] = id, key
			if tok := os.Getenv("AWS_SESSION_TOKEN"); tok != "" {
				out["s3.session-token"] = tok
			}
		}
	case "gs":
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			// An emulator (fake-gcs-server) takes no credentials.
			out["gcs.no-auth"] = "true"
		}
	}
	return out
}

// redactURL drops a URL's user information (a password in a PostgreSQL
// URL) for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil {
			return "(a URL that does not parse)"
		}
		return s
	}
	u.User = url.User(u.User.Username())
	return u.Redacted()
}
