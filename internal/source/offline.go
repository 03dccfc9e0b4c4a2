package source

import (
	"context"
	"encoding/json"
	"errors"
)

// The commands that only read (a dry run, `syncd forms`, `syncd schema`,
// the selection of `state adopt`, the id checks before a pass) open an
// account's sources without a sink or a writable state. What a source
// offers them is below: a read-only opening, and the views a person reads
// of its streams.

// ReadOnly is a Source that opens an account's side to read only: no
// sink, no state written, no sign-in refreshed (a refresh rotates the
// sign-in, and a command that writes nothing could not keep the new one).
type ReadOnly interface {
	// OpenReadOnly opens the source for one account, as Open does; (nil,
	// nil) when the account does not use it. env.Store is the state opened
	// read-only, or nil when there is none: a source whose sign-in lives
	// there reads it, and never writes it. A store that cannot be opened
	// fails its reads with an *UnreadableStateError.
	//
	// A sign-in the source cannot use without writing (none stored yet,
	// an access token expired) either fails the opening, or, when the
	// account's streams can be named without it, is what the account's
	// SignIn returns: the streams are then listed but not read.
	OpenReadOnly(ctx context.Context, env Env) (Account, error)
}

// UnreadableStateError is a read of a state opened read-only that could
// not be opened at all (a writer holds it, it is damaged): a source says
// in its own words that its sign-in cannot be read, with Err.
type UnreadableStateError struct{ Err error }

func (e *UnreadableStateError) Error() string { return "open the state: " + e.Err.Error() }
func (e *UnreadableStateError) Unwrap() error { return e.Err }

// ErrBadID is matched, with errors.Is, by an error of a Selector's Check or
// Select (or of an Inspector's Describe) that refuses an id: one the
// account does not have, or never syncs. An error that matches it is the
// caller's mistake, not a failure to ask the service.
var ErrBadID = errors.New("source: id refused")

// Inspector is an Account a person can look into without syncing it: the
// streams its service has (`syncd forms`), and the table one of them maps
// to (`syncd schema`).
type Inspector interface {
	// Catalog is every stream the account's service has, synced or not,
	// as the service lists them.
	Catalog(ctx context.Context) ([]CatalogEntry, error)
	// Describe reads stream id as the service describes it now; an id the
	// account does not have is an error matching ErrBadID.
	Describe(ctx context.Context, id string) (Described, error)
}

// Described is one stream as its service describes it now.
type Described interface {
	// Key is the stream's key in the state.
	Key() string
	// Schema is the table the stream maps to. pinned is the schema the
	// state pinned for it (nil: none yet, the table is mapped from what
	// the service describes), layout the table's partitioning the state
	// records ("" when none).
	Schema(pinned json.RawMessage, layout string) (TableSchema, error)
}

// CatalogEntry is one stream of an Inspector's Catalog: one line of
// `syncd forms`, one object of its -o json (whose names the forms gave
// the fields).
type CatalogEntry struct {
	ID    string   `json:"form_id"`
	Name  string   `json:"name"`
	Tags  []string `json:"tags"`
	Table string   `json:"table"` // where syncd writes it: as configured, or the default name
}

// TableSchema is the table a stream maps to: what `syncd schema -o json`
// prints.
type TableSchema struct {
	ID     string `json:"form_id"`
	Name   string `json:"form_name"`
	Table  string `json:"table"`
	Pinned bool   `json:"pinned"` // true: the schema a sync pinned (what the output holds), evolved with what the service describes now
	// Columns are the table's columns, in order.
	Columns []Column `json:"columns"`
	// NotExported are what the stream has that no column holds (a form's
	// Password questions).
	NotExported []string `json:"not_exported"`
	// Layout is how the table's Parquet files are partitioned (none,
	// year, month, day), as the state records it; "" until its first
	// batch chooses it (or for BigQuery).
	Layout string `json:"layout"`
}

// Column is one column of a TableSchema.
type Column struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Mode       string `json:"mode"` // REQUIRED or NULLABLE
	Kind       string `json:"kind"` // fixed, lineage, question, calculation, url_parameter, ...
	SourceID   string `json:"source_id"`
	SourceType string `json:"source_type"`
	SourceName string `json:"source_name"`
}
