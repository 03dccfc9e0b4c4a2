// Package schema maps form metadata to a pinned, evolving table schema and
// submissions to Arrow records of that schema.
//
// A table has fixed columns (the submission's own fields), lineage columns,
// and one column per question, calculation, URL parameter, scheduling and
// payment field. A source's column name is derived once from its name and
// then pinned by its id. Evolution is additive: new sources append columns,
// a source whose type changes to another column type gets a variant column
// <name>__v_<type>, and a value that does not fit its column is kept whole as
// JSON text in <name>__v_json. Old files therefore stay readable next to new
// ones, and no value is lost.
package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/table"
)

// Column is one column of a table.
type Column struct {
	Name        string     `json:"name"`
	Type        ColumnType `json:"type"`
	Kind        SourceKind `json:"kind"`
	SourceID    string     `json:"source_id,omitempty"`
	SourceName  string     `json:"source_name,omitempty"`
	SourceType  string     `json:"source_type,omitempty"`
	Required    bool       `json:"required,omitempty"`
	Description string     `json:"description,omitempty"`
	// Parent is, for a __v_json companion, the column whose misfits it keeps.
	Parent string `json:"parent,omitempty"`
}

// Source is a question, calculation, URL parameter, scheduling or payment
// field the table has seen: its latest name and type, and the column an
// answer that names no type goes to ("" when it is not exported).
type Source struct {
	Kind   SourceKind `json:"kind"`
	ID     string     `json:"id"`
	Name   string     `json:"name,omitempty"`
	Type   string     `json:"type,omitempty"`
	Column string     `json:"column,omitempty"`
}

// Options shape a new table.
type Options struct {
	IncludeEditLink bool
}

// Table is the pinned schema of one form's table. It is a plain value:
// serialise it with Marshal and copy it with Clone.
type Table struct {
	FormID  string   `json:"form_id"`
	Columns []Column `json:"columns"`
	Sources []Source `json:"sources"`
}

// Change is one schema change, for the log (internal/table's).
type Change = table.Change

// The kinds of Change.
const (
	ChangeAdded       = table.ChangeAdded
	ChangeRenamed     = table.ChangeRenamed
	ChangeVariant     = table.ChangeVariant
	ChangeTypeUpdated = table.ChangeTypeUpdated
)

// Names of the fixed and lineage columns.
const (
	ColFormID         = "form_id"
	ColSubmissionID   = "submission_id"
	ColSubmissionTime = "submission_time"
	ColLastUpdatedAt  = "last_updated_at"
	ColStartedAt      = "started_at"
	ColLoginEmail     = "login_email"
	ColQuizScore      = "quiz_score"
	ColQuizMaxScore   = "quiz_max_score"
	ColEditLink       = "edit_link"
	ColDocuments      = "documents"
	ColBatchID        = table.ColBatchID
	ColSyncedAt       = table.ColSyncedAt
	// ColDeleted is true on a tombstone row: the submission was deleted
	// from the form. Its other answers are null.
	ColDeleted = table.ColDeleted
)

// fixedNames are reserved in every table, edit_link included.
var fixedNames = []string{
	ColFormID, ColSubmissionID, ColSubmissionTime, ColLastUpdatedAt, ColStartedAt, ColLoginEmail,
	ColQuizScore, ColQuizMaxScore, ColEditLink, ColDocuments, ColBatchID, ColSyncedAt, ColDeleted,
}

// deletedColumn is the tombstone flag; tables pinned before it existed gain
// it when they evolve.
var deletedColumn = Column{Name: ColDeleted, Type: TypeBool, Kind: KindLineage, Description: "True on a tombstone row: the submission was deleted"}

func fixedColumns(opts Options) []Column {
	cols := []Column{
		{Name: ColFormID, Type: TypeString, Kind: KindFixed, Required: true, Description: "Public id of the form"},
		{Name: ColSubmissionID, Type: TypeString, Kind: KindFixed, Required: true, Description: "Id of the submission, unique within the form"},
		{Name: ColSubmissionTime, Type: TypeTimestamp, Kind: KindFixed, Required: true, Description: "When the submission was submitted (UTC)"},
		{Name: ColLastUpdatedAt, Type: TypeTimestamp, Kind: KindFixed, Description: "When the submission was last edited (UTC)"},
		{Name: ColStartedAt, Type: TypeTimestamp, Kind: KindFixed, Description: "When the respondent started the form (UTC)"},
		{Name: ColLoginEmail, Type: TypeString, Kind: KindFixed, Description: "E-mail of the logged-in respondent"},
		{Name: ColQuizScore, Type: TypeDouble, Kind: KindFixed, Description: "Quiz score"},
		{Name: ColQuizMaxScore, Type: TypeDouble, Kind: KindFixed, Description: "Highest possible quiz score"},
	}
	if opts.IncludeEditLink {
		cols = append(cols, Column{Name: ColEditLink, Type: TypeString, Kind: KindFixed, Description: "Link that edits the submission"})
	}
	return append(cols,
		Column{Name: ColDocuments, Type: TypeDocuments, Kind: KindFixed, Description: "Documents generated for the submission"},
		Column{Name: ColBatchID, Type: TypeString, Kind: KindLineage, Required: true, Description: "Batch that wrote the row"},
		Column{Name: ColSyncedAt, Type: TypeTimestamp, Kind: KindLineage, Required: true, Description: "When syncd fetched the row (UTC)"},
		deletedColumn,
	)
}

// New maps a form's metadata to a new table: the fixed columns, then one
// column per source in metadata order. Unknown question types and Password
// questions get no column. The changes list every column added.
func New(form *forms.Form, opts Options) (*Table, []Change, error) {
	if form == nil {
		return nil, nil, errors.New("schema: no form metadata")
	}
	if form.ID == "" {
		return nil, nil, errors.New("schema: form metadata without an id")
	}
	t := &Table{FormID: form.ID, Columns: fixedColumns(opts), Sources: []Source{}}
	e := newEditor(t)
	e.applyForm(form)
	return t, e.changes, nil
}

// Evolve returns a new table that follows form's metadata; t is not
// modified. Evolution is additive: columns are added or described anew,
// never removed, renamed or retyped, and sources gone from the metadata keep
// their columns.
func (t *Table) Evolve(form *forms.Form) (*Table, []Change, error) {
	if form == nil {
		return nil, nil, fmt.Errorf("schema: evolve table of form %s: no form metadata", t.FormID)
	}
	if form.ID != t.FormID {
		return nil, nil, fmt.Errorf("schema: evolve table of form %s with metadata of form %s", t.FormID, form.ID)
	}
	if err := t.validate(); err != nil {
		return nil, nil, fmt.Errorf("schema: evolve table of form %s: %w", t.FormID, err)
	}
	out := t.Clone()
	e := newEditor(out)
	if _, ok := e.byName[ColDeleted]; !ok {
		e.appendColumn(deletedColumn)
	}
	e.applyForm(form)
	return out, e.changes, nil
}

// Clone returns a deep copy of t.
func (t *Table) Clone() *Table {
	if t == nil {
		return nil
	}
	return &Table{FormID: t.FormID, Columns: slices.Clone(t.Columns), Sources: slices.Clone(t.Sources)}
}

// Merge returns the union of t and other, two evolutions of one pinned table
// (windows of a pass each extend a snapshot and may add columns). t's
// columns come first and keep their names; other's new columns follow in its
// order. A column of other whose name t already uses for a different source
// (two windows met two new sources of the same name) is renamed; that batch
// wrote it under its old name, which readers see as a column of its own.
// Neither table is modified.
func (t *Table) Merge(other *Table) *Table {
	out := t.Clone()
	if other == nil {
		return out
	}
	e := newEditor(out)
	byIdentity := make(map[string]string, len(out.Columns))
	for _, c := range out.Columns {
		byIdentity[identity(c)] = c.Name
	}
	renamed := make(map[string]string) // other's name -> out's name
	for _, c := range other.Columns {
		if c.Parent != "" {
			if p, ok := renamed[c.Parent]; ok {
				c.Parent = p
			}
		}
		id := identity(c)
		if name, ok := byIdentity[id]; ok {
			renamed[c.Name] = name
			continue
		}
		if _, used := e.byName[c.Name]; used {
			name := e.names.take(c.Name)
			renamed[c.Name] = name
			c.Name = name
		} else {
			e.names[c.Name] = struct{}{}
		}
		byIdentity[id] = c.Name
		e.appendColumn(c)
	}
	for _, s := range other.Sources {
		if _, ok := e.sources[sourceKey{s.Kind, s.ID}]; ok {
			continue
		}
		if n, ok := renamed[s.Column]; ok {
			s.Column = n
		}
		e.addSource(s)
	}
	return out
}

// identity says what a column holds, whatever its name.
func identity(c Column) string {
	switch c.Kind {
	case KindFixed, KindLineage:
		return string(c.Kind) + "\x00" + c.Name
	case KindVariantJSON:
		return string(c.Kind) + "\x00" + c.SourceID + "\x00" + c.Parent
	}
	return string(c.Kind) + "\x00" + c.SourceID + "\x00" + string(c.Type)
}

// Arrow field metadata keys.
const (
	MetaSourceKind  = "syncd.source_kind"
	MetaSourceID    = "syncd.source_id"
	MetaSourceName  = "syncd.source_name"
	MetaSourceType  = "syncd.source_type"
	MetaDescription = "syncd.description"
)

// ArrowSchema is the Arrow schema of t: one field per column, in order,
// required columns non-nullable, each with its source as field metadata.
func (t *Table) ArrowSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(t.Columns))
	for i, c := range t.Columns {
		fields[i] = c.arrowField()
	}
	return arrow.NewSchema(fields, nil)
}

func (c *Column) arrowField() arrow.Field {
	keys := []string{MetaSourceKind}
	vals := []string{string(c.Kind)}
	for _, kv := range [...][2]string{
		{MetaSourceID, c.SourceID}, {MetaSourceName, c.SourceName},
		{MetaSourceType, c.SourceType}, {MetaDescription, c.Description},
	} {
		if kv[1] != "" {
			keys = append(keys, kv[0])
			vals = append(vals, kv[1])
		}
	}
	return arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: !c.Required, Metadata: arrow.NewMetadata(keys, vals)}
}

// Fingerprint is a stable hex hash of the physical schema: column names,
// types and nullability, in order. Descriptions and sources do not count.
func (t *Table) Fingerprint() string {
	h := sha256.New()
	for _, c := range t.Columns {
		req := "n"
		if c.Required {
			req = "r"
		}
		fmt.Fprintf(h, "%s\x1f%s\x1f%s\x1e", c.Name, c.Type, req)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// formatVersion is the version of the serialised schema.
const formatVersion = 1

type wireTable struct {
	Version int `json:"version"`
	Table
}

// Marshal serialises t for the state store.
func Marshal(t *Table) ([]byte, error) {
	if t == nil {
		return nil, errors.New("schema: marshal: no table")
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("schema: marshal table of form %s: %w", t.FormID, err)
	}
	b, err := json.Marshal(wireTable{Version: formatVersion, Table: *t})
	if err != nil {
		return nil, fmt.Errorf("schema: marshal table of form %s: %w", t.FormID, err)
	}
	return b, nil
}

// Unmarshal reads a table written by Marshal and checks that it is
// consistent, so that a damaged state store fails here with a clear error.
func Unmarshal(b []byte) (*Table, error) {
	var w wireTable
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("schema: read pinned schema: %w", err)
	}
	if w.Version != formatVersion {
		return nil, fmt.Errorf("schema: pinned schema has format version %d; this syncd reads version %d (was it written by a newer syncd?)", w.Version, formatVersion)
	}
	t := &w.Table
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("schema: pinned schema of form %s is inconsistent: %w", t.FormID, err)
	}
	return t, nil
}

// validate checks the invariants the Builder and Evolve rely on.
func (t *Table) validate() error {
	if t.FormID == "" {
		return errors.New("no form id")
	}
	byName := make(map[string]*Column, len(t.Columns))
	for i := range t.Columns {
		c := &t.Columns[i]
		if !validName(c.Name) {
			return fmt.Errorf("column %d has an invalid name %q", i, c.Name)
		}
		if byName[c.Name] != nil {
			return fmt.Errorf("column %q appears twice", c.Name)
		}
		if !validType(c.Type) {
			return fmt.Errorf("column %q has an unknown type %q", c.Name, c.Type)
		}
		switch c.Kind {
		case KindFixed, KindLineage, KindQuestion, KindCalculation, KindURLParameter, KindScheduling, KindPayment:
		case KindVariantJSON:
			p := byName[c.Parent]
			if p == nil || p.Kind == KindVariantJSON || c.Type != TypeJSON {
				return fmt.Errorf("column %q keeps misfits of %q, which is not a typed column before it", c.Name, c.Parent)
			}
		default:
			return fmt.Errorf("column %q has an unknown source kind %q", c.Name, c.Kind)
		}
		byName[c.Name] = c
		if c.Kind == KindFixed || c.Kind == KindLineage {
			if !slices.Contains(fixedNames, c.Name) {
				return fmt.Errorf("column %q is not one of the fixed columns", c.Name)
			}
		}
	}
	fixed := fixedColumns(Options{IncludeEditLink: true})
	for _, f := range fixed {
		c := byName[f.Name]
		if c == nil && f.Name == ColEditLink {
			continue // optional
		}
		if c == nil || c.Type != f.Type || c.Kind != f.Kind || c.Required != f.Required {
			return fmt.Errorf("fixed column %q is missing or altered", f.Name)
		}
	}
	seen := make(map[sourceKey]bool, len(t.Sources))
	for _, s := range t.Sources {
		k := sourceKey{s.Kind, s.ID}
		if seen[k] {
			return fmt.Errorf("%s %q appears twice among the sources", s.Kind, s.ID)
		}
		seen[k] = true
		if s.Column == "" {
			continue
		}
		c := byName[s.Column]
		if c == nil || c.Kind != s.Kind || c.SourceID != s.ID {
			return fmt.Errorf("%s %q routes to column %q, which is not one of its columns", s.Kind, s.ID, s.Column)
		}
	}
	for _, c := range t.Columns {
		if isSourceKind(c.Kind) && !seen[sourceKey{c.Kind, c.SourceID}] {
			return fmt.Errorf("column %q belongs to %s %q, which is not among the sources", c.Name, c.Kind, c.SourceID)
		}
	}
	return nil
}

// isSourceKind reports whether k is the kind of a form field (not fixed,
// lineage or a JSON companion).
func isSourceKind(k SourceKind) bool {
	switch k {
	case KindQuestion, KindCalculation, KindURLParameter, KindScheduling, KindPayment:
		return true
	}
	return false
}
