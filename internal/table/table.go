// Package table is what the engine, the sinks and every source share about
// a stream's table, and nothing of any one source: the lineage every row
// carries, what building a batch's rows did, the changes of a table's
// schema, and a table's schema as the engine handles it (Schema). A source
// whose table follows its metadata (the forms' internal/source/forms/schema) implements
// Schema with its own pinned type.
package table

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Lineage is what every row of a batch records about the batch
// (_batch_id, _synced_at).
type Lineage struct {
	BatchID  string
	SyncedAt time.Time
}

// Stats describe what building a batch's rows did.
type Stats struct {
	Rows int
	// Misfits counts, per typed column, the values kept in its __v_json
	// companion because they did not fit (or repeated an answer already
	// given in the same record).
	Misfits map[string]int
	// MisfitExamples holds, per column of Misfits, the redacted shape of
	// the first value kept: its type and length, never the value, which
	// may be personal.
	MisfitExamples map[string]string
	// KeptIn names, per column of Misfits, the column that keeps them
	// (<column>__v_json, shortened to fit a long name).
	KeptIn map[string]string
	// Discarded counts, per unknown field type, the values discarded.
	Discarded map[string]int
	// Changes are the columns the rows added on their own: values of a
	// type, or of a field, that the metadata did not have.
	Changes []Change
}

// Change is one schema change, for the log.
type Change struct {
	Kind   string // ChangeAdded, ChangeRenamed, ChangeVariant or ChangeTypeUpdated
	Column string
	Detail string
}

// The kinds of Change.
const (
	ChangeAdded       = "added"
	ChangeRenamed     = "renamed"
	ChangeVariant     = "variant"
	ChangeTypeUpdated = "type_updated"
)

// Schema is a table's schema that follows its source, as the engine handles
// it: pinned in the state (Marshal; the source reads it back), extended by
// every window of a pass (Merge), written with every batch. It is a value:
// its methods never change it.
type Schema interface {
	ArrowSchema() *arrow.Schema
	// Fingerprint names the physical schema (names, types, nullability).
	Fingerprint() string
	Marshal() ([]byte, error)
	// Merge is the schema holding the columns of both, this one's first.
	Merge(other Schema) Schema
}
