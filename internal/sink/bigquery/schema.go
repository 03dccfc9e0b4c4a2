package bigquery

import (
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// maxDescription is BigQuery's limit on a column description, in
// characters.
const maxDescription = 1024

// description is a column's description from its Arrow field metadata:
// "description" (the plain key), else "syncd.description" (what
// internal/schema writes), else the question's name; first found wins.
func description(md arrow.Metadata) string {
	for _, k := range [...]string{"description", "syncd.description", "syncd.source_name"} {
		if i := md.FindKey(k); i >= 0 && md.Values()[i] != "" {
			d := md.Values()[i]
			if r := []rune(d); len(r) > maxDescription {
				d = string(r[:maxDescription-1]) + "…"
			}
			return d
		}
	}
	return ""
}

// tableSchema maps an Arrow schema to the BigQuery schema that a Parquet
// file written from it loads as (with list inference): string -> STRING,
// float64 -> FLOAT, int64 -> INTEGER, bool -> BOOLEAN, date32 -> DATE,
// timestamp -> TIMESTAMP, struct -> RECORD, list<x> -> REPEATED x.
//
// The columns every record has (the batch's Required: for a form
// form_id, submission_id and submission_time) are REQUIRED when the batch
// has them non-nullable; everything else, lineage and nested
// fields included, is NULLABLE. A REQUIRED column can never be dropped from
// later batches nor loaded from a file that lacks it, so the table commits
// to as little as the data needs; nested REQUIRED fields are also where
// Parquet and BigQuery disagree most, so conform writes them as nullable.
func tableSchema(s *arrow.Schema, required []string) (bigquery.Schema, error) {
	out := make(bigquery.Schema, 0, s.NumFields())
	for _, f := range s.Fields() {
		fs, err := fieldSchema(f, f.Name, slices.Contains(required, f.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

func fieldSchema(f arrow.Field, path string, required bool) (*bigquery.FieldSchema, error) {
	fs := &bigquery.FieldSchema{Name: f.Name, Description: description(f.Metadata)}
	dt := f.Type
	if l, ok := dt.(*arrow.ListType); ok {
		fs.Repeated = true
		dt = l.Elem()
		if _, ok := dt.(*arrow.ListType); ok {
			return nil, fmt.Errorf("column %s is a list of lists, which BigQuery cannot store", path)
		}
	} else {
		fs.Required = required && !f.Nullable
	}
	switch t := dt.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		fs.Type = bigquery.StringFieldType
	case *arrow.Float64Type, *arrow.Float32Type:
		fs.Type = bigquery.FloatFieldType
	case *arrow.Int64Type, *arrow.Int32Type:
		fs.Type = bigquery.IntegerFieldType
	case *arrow.BooleanType:
		fs.Type = bigquery.BooleanFieldType
	case *arrow.Date32Type:
		fs.Type = bigquery.DateFieldType
	case *arrow.TimestampType:
		if t.Unit == arrow.Nanosecond {
			return nil, fmt.Errorf("column %s holds nanosecond timestamps; BigQuery keeps microseconds and syncd writes microseconds", path)
		}
		fs.Type = bigquery.TimestampFieldType
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return nil, fmt.Errorf("column %s is a struct without fields, which BigQuery cannot store", path)
		}
		fs.Type = bigquery.RecordFieldType
		for _, cf := range t.Fields() {
			c, err := fieldSchema(cf, path+"."+cf.Name, false)
			if err != nil {
				return nil, err
			}
			fs.Schema = append(fs.Schema, c)
		}
	default:
		return nil, fmt.Errorf("column %s has Arrow type %s, which syncd does not load into BigQuery", path, f.Type)
	}
	return fs, nil
}

// canonType maps the standard SQL type names BigQuery may report to the
// legacy names the client uses, so that types compare by meaning.
func canonType(t bigquery.FieldType) bigquery.FieldType {
	switch strings.ToUpper(string(t)) {
	case "INT64":
		return bigquery.IntegerFieldType
	case "FLOAT64":
		return bigquery.FloatFieldType
	case "BOOL":
		return bigquery.BooleanFieldType
	case "STRUCT":
		return bigquery.RecordFieldType
	}
	return bigquery.FieldType(strings.ToUpper(string(t)))
}

func typeName(f *bigquery.FieldSchema) string {
	if f.Repeated {
		return "REPEATED " + string(canonType(f.Type))
	}
	return string(canonType(f.Type))
}

func findField(s bigquery.Schema, name string) *bigquery.FieldSchema {
	for _, f := range s {
		if strings.EqualFold(f.Name, name) { // BigQuery column names ignore case
			return f
		}
	}
	return nil
}

// SchemaError says that a batch cannot be loaded into its table as the
// table is: a column changed type, or the table requires a column the batch
// lacks. The schema package's variant columns exist so that this does not
// happen; when it does, a person has to look.
type SchemaError struct {
	Table  string // project.dataset.table
	Column string // dotted path
	Have   string // the table's type or mode
	Want   string // the batch's
}

func (e *SchemaError) Error() string {
	if e.Want == "" {
		return fmt.Sprintf("bigquery table %s has REQUIRED column %s, which batches no longer carry: relax it to NULLABLE (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL)", e.Table, e.Column, e.Table, e.Column)
	}
	return fmt.Sprintf("bigquery table %s has column %s as %s but the batch has it as %s: BigQuery cannot change a column's type, so give the new type its own column (the schema mapper's variant columns) or move the old table aside", e.Table, e.Column, e.Have, e.Want)
}

// reconcile returns the table schema that can take a file of schema want:
// have, plus want's new columns (all NULLABLE, as BigQuery adds columns
// only so), with REQUIRED columns that want has as nullable relaxed, and
// descriptions brought up to date. changes says what differs; none means
// have will do as it is.
func reconcile(table string, have, want bigquery.Schema) (bigquery.Schema, []string, error) {
	return reconcileAt(table, have, want, "")
}

func reconcileAt(table string, have, want bigquery.Schema, prefix string) (bigquery.Schema, []string, error) {
	out := make(bigquery.Schema, len(have))
	for i, h := range have {
		cp := *h
		out[i] = &cp
	}
	var changes []string
	for _, w := range want {
		path := prefix + w.Name
		h := findField(out, w.Name)
		if h == nil {
			out = append(out, nullable(w))
			changes = append(changes, "add column "+path+" "+typeName(w))
			continue
		}
		if canonType(h.Type) != canonType(w.Type) || h.Repeated != w.Repeated {
			return nil, nil, &SchemaError{Table: table, Column: path, Have: typeName(h), Want: typeName(w)}
		}
		if h.Required && !w.Required {
			h.Required = false
			changes = append(changes, "relax column "+path+" to NULLABLE")
		}
		if w.Description != "" && h.Description != w.Description {
			h.Description = w.Description
			changes = append(changes, "describe column "+path)
		}
		if canonType(h.Type) == bigquery.RecordFieldType {
			sub, ch, err := reconcileAt(table, h.Schema, w.Schema, path+".")
			if err != nil {
				return nil, nil, err
			}
			h.Schema = sub
			changes = append(changes, ch...)
		}
	}
	for _, h := range have {
		if h.Required && findField(want, h.Name) == nil {
			return nil, nil, &SchemaError{Table: table, Column: prefix + h.Name, Have: "REQUIRED"}
		}
	}
	return out, changes, nil
}

// nullable is a deep copy of f with no REQUIRED field anywhere.
func nullable(f *bigquery.FieldSchema) *bigquery.FieldSchema {
	cp := *f
	cp.Required = false
	cp.Schema = nil
	for _, c := range f.Schema {
		cp.Schema = append(cp.Schema, nullable(c))
	}
	return &cp
}

// conform returns rec with the nullability of every field, nested ones
// included, set to the mode of its table column, so that the Parquet file
// says REQUIRED exactly where the table does. BigQuery refuses a NULLABLE
// file column for a REQUIRED table column, and reports differ on the
// reverse, so the file never leaves it to chance. Only the types change;
// the data is shared. The caller releases the result.
func conform(rec arrow.Record, table bigquery.Schema) (arrow.Record, error) {
	as, err := conformSchema(rec.Schema(), table)
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(as.Fields()))
	for i, f := range as.Fields() {
		col := rec.Column(i)
		if arrow.TypeEqual(f.Type, col.DataType()) {
			col.Retain()
			cols[i] = col
			continue
		}
		d := retype(col.Data(), f.Type)
		cols[i] = array.MakeFromData(d)
		d.Release()
	}
	out := array.NewRecord(as, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// conformSchema is the schema conform gives records of s: the table's
// modes. It is known before any record, so that a file's chunks share it.
func conformSchema(s *arrow.Schema, table bigquery.Schema) (*arrow.Schema, error) {
	fields := slices.Clone(s.Fields())
	for i, f := range fields {
		tf := findField(table, f.Name)
		if tf == nil {
			return nil, fmt.Errorf("column %s is not in the table after its schema was updated", f.Name)
		}
		f.Nullable = !tf.Required
		f.Type = conformType(f.Type, tf)
		fields[i] = f
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

func conformType(dt arrow.DataType, tf *bigquery.FieldSchema) arrow.DataType {
	switch t := dt.(type) {
	case *arrow.ListType:
		elem := t.ElemField()
		elem.Type = conformType(elem.Type, tf)
		return arrow.ListOfField(elem)
	case *arrow.StructType:
		fields := slices.Clone(t.Fields())
		for i, cf := range fields {
			ctf := findField(tf.Schema, cf.Name)
			if ctf == nil {
				continue // reconcile put every field in the table; unreachable
			}
			cf.Nullable = !ctf.Required
			cf.Type = conformType(cf.Type, ctf)
			fields[i] = cf
		}
		return arrow.StructOf(fields...)
	}
	return dt
}

// retype is d viewed as type dt, which differs from d's type only in the
// nullability of nested fields: same buffers, same children data.
func retype(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var children []arrow.ArrayData
	var made []arrow.ArrayData
	switch t := dt.(type) {
	case *arrow.ListType:
		c := retype(d.Children()[0], t.Elem())
		children, made = []arrow.ArrayData{c}, []arrow.ArrayData{c}
	case *arrow.StructType:
		for i, f := range t.Fields() {
			c := retype(d.Children()[i], f.Type)
			children = append(children, c)
			made = append(made, c)
		}
	default:
		children = d.Children()
	}
	out := array.NewData(dt, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range made {
		c.Release() // NewData holds its own reference
	}
	return out
}

// partitioning is the day partitioning of a table on its time column
// (the batch's: a record's own time, so that partitions follow the data and
// not the wall clock), or nil when the schema lacks it.
func partitioning(s bigquery.Schema, timeColumn string) *bigquery.TimePartitioning {
	f := findField(s, timeColumn)
	if f == nil || f.Repeated {
		return nil
	}
	switch canonType(f.Type) {
	case bigquery.TimestampFieldType, bigquery.DateFieldType:
		return &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: f.Name}
	}
	return nil
}

// checkClustering refuses clustering columns BigQuery would refuse, with a
// sentence that names the setting.
func checkClustering(table string, s bigquery.Schema, cols []string) error {
	for _, c := range cols {
		f := findField(s, c)
		switch {
		case f == nil:
			return fmt.Errorf("bigquery table %s cannot be clustered on %s: the batch has no such column; fix sink.bigquery.clustering", table, c)
		case f.Repeated || canonType(f.Type) == bigquery.RecordFieldType || canonType(f.Type) == bigquery.FloatFieldType:
			return fmt.Errorf("bigquery table %s cannot be clustered on %s, a %s column: BigQuery clusters only on top-level, non-repeated, non-FLOAT columns; fix sink.bigquery.clustering", table, c, typeName(f))
		}
	}
	return nil
}
