package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/jsontext"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/table"
)

// Lineage, Stats and Change are the engine's (internal/table): a Builder
// reports in its terms.
type (
	Lineage = table.Lineage
	Stats   = table.Stats
)

// Builder appends submissions of one form to Arrow builders, evolving its own
// copy of the table when answers need columns it lacks. It is not safe for
// concurrent use.
type Builder struct {
	mem      memory.Allocator
	ed       *editor // over the builder's own table
	cols     []column
	fixed    fixedIndex
	rows     int
	stats    Stats
	err      error
	released bool

	// Scratch reused across values so that appending allocates little.
	cells []cell
	strs  [][]byte
	text  []byte // unescaped strings of the value being appended
	buf   bytes.Buffer
	// kept and keptText are the row's values for __v_json columns, appended
	// at the row's end.
	kept     []keptValue
	keptText []byte

	// routes remembers, per group of values (questions, calculations, URL
	// parameters, scheduling, payments) and position in it, where the last
	// submission's value went: submissions of a form list their answers in
	// the same order, so the next one mostly repeats them and skips route's
	// map lookups. Emptied whenever the table gains a column (the only way
	// a route can change).
	routes [groups][]routed
}

// The groups of values a submission carries, for Builder.routes.
const (
	groupQuestions = iota
	groupCalculations
	groupURLParameters
	groupScheduling
	groupPayments
	groups
)

// routed is where a value of one source id and type went.
type routed struct {
	id, typ string
	col     int
}

// column is the Arrow builder of one table column.
type column struct {
	typ   ColumnType
	bld   array.Builder
	stamp int // 1 + the row this column last got a value in
	// sizes is what the column's builder, and the builders below it (a
	// list's elements, a struct's fields), held at the last Finish, in the
	// order sizesOf walks them: the next chunk's first row reserves it, so
	// that chunks after the first do not grow their buffers by doubling
	// and copying.
	sizes []builderSize
}

// builderSize is what one Arrow builder held at a chunk's end: its values
// and, for strings, their bytes.
type builderSize struct{ len, bytes int }

// sizesOf appends what bld and the builders below it hold, depth first.
func sizesOf(bld array.Builder, out []builderSize) []builderSize {
	s := builderSize{len: bld.Len()}
	if sb, ok := bld.(*array.StringBuilder); ok {
		s.bytes = sb.DataLen()
	}
	out = append(out, s)
	for _, child := range children(bld) {
		out = sizesOf(child, out)
	}
	return out
}

// reserveSizes reserves sizes (from sizesOf) in bld and the builders below
// it, in the same order, and returns what it did not use.
func reserveSizes(bld array.Builder, sizes []builderSize) []builderSize {
	if len(sizes) == 0 {
		return nil
	}
	s := sizes[0]
	bld.Reserve(s.len)
	if sb, ok := bld.(*array.StringBuilder); ok && s.bytes > 0 {
		sb.ReserveData(s.bytes)
	}
	sizes = sizes[1:]
	for _, child := range children(bld) {
		sizes = reserveSizes(child, sizes)
	}
	return sizes
}

// children are the builders directly below bld: a list's elements, a
// struct's fields.
func children(bld array.Builder) []array.Builder {
	switch b := bld.(type) {
	case *array.ListBuilder:
		return []array.Builder{b.ValueBuilder()}
	case *array.StructBuilder:
		out := make([]array.Builder, b.NumField())
		for i := range out {
			out[i] = b.FieldBuilder(i)
		}
		return out
	}
	return nil
}

// fixedIndex locates the fixed and lineage columns; editLink is -1 when the
// table has none.
type fixedIndex struct {
	formID, submissionID, submissionTime, lastUpdatedAt, startedAt, loginEmail,
	quizScore, quizMaxScore, editLink, documents, batchID, syncedAt, deleted int
}

// cell is one decoded child of a struct value.
type cell struct {
	set   bool // the key was present (a repeated key does not fit)
	valid bool // present and not empty
	s     []byte
	f     float64
	i     int64 // int64, date (days) or timestamp (µs)
}

// NewBuilder returns a Builder for rows of table t; it works on its own
// clone of t. A nil mem means memory.DefaultAllocator. A table that fails
// validation makes every Append fail.
func NewBuilder(t *Table, mem memory.Allocator) *Builder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := &Builder{mem: mem}
	switch {
	case t == nil:
		b.err = errors.New("schema: builder without a table")
		t = &Table{}
	default:
		if err := t.validate(); err != nil {
			b.err = fmt.Errorf("schema: builder for form %s: %w", t.FormID, err)
			t = &Table{FormID: t.FormID}
		} else {
			t = t.Clone()
		}
	}
	b.ed = newEditor(t)
	b.sync()
	at := func(name string) int {
		if i, ok := b.ed.byName[name]; ok {
			return i
		}
		return -1
	}
	b.fixed = fixedIndex{
		formID: at(ColFormID), submissionID: at(ColSubmissionID), submissionTime: at(ColSubmissionTime),
		lastUpdatedAt: at(ColLastUpdatedAt), startedAt: at(ColStartedAt), loginEmail: at(ColLoginEmail),
		quizScore: at(ColQuizScore), quizMaxScore: at(ColQuizMaxScore), editLink: at(ColEditLink),
		documents: at(ColDocuments), batchID: at(ColBatchID), syncedAt: at(ColSyncedAt), deleted: at(ColDeleted),
	}
	return b
}

// ShareNames makes the builder name the columns it adds through names,
// which the other builders of its pass share (see Names).
func (b *Builder) ShareNames(names *Names) { b.ed.shared = names }

// sync creates Arrow builders for columns the table gained, back-filling
// nulls for the rows already appended.
func (b *Builder) sync() {
	if len(b.cols) < len(b.ed.t.Columns) {
		for g := range b.routes {
			b.routes[g] = b.routes[g][:0]
		}
	}
	for i := len(b.cols); i < len(b.ed.t.Columns); i++ {
		ct := b.ed.t.Columns[i].Type
		bld := array.NewBuilder(b.mem, arrowType(ct))
		bld.AppendNulls(b.rows)
		b.cols = append(b.cols, column{typ: ct, bld: bld})
	}
}

// Len is the number of rows appended since the last Finish.
func (b *Builder) Len() int { return b.rows }

// Append adds one submission as a row. Values that do not fit their column
// never fail: they are kept in its __v_json companion. It fails, appending
// nothing, only when a required column would be empty (no submission, id,
// submission time, batch id or sync time) or the builder was released or
// built on an invalid table.
func (b *Builder) Append(sub *forms.Submission, lin Lineage) error {
	switch {
	case b.err != nil:
		return b.err
	case b.released:
		return errors.New("schema: append to a released builder")
	case sub == nil:
		return fmt.Errorf("schema: append to table of form %s: no submission", b.ed.t.FormID)
	case sub.SubmissionID == "":
		return fmt.Errorf("schema: append to table of form %s: submission without an id", b.ed.t.FormID)
	case sub.SubmissionTime.IsZero():
		return fmt.Errorf("schema: append submission %s of form %s: no submission time", sub.SubmissionID, b.ed.t.FormID)
	case lin.BatchID == "" || lin.SyncedAt.IsZero():
		return fmt.Errorf("schema: append submission %s: lineage lacks a batch id or sync time", sub.SubmissionID)
	}
	if b.rows == 0 {
		b.reserve() // what the last chunk used; nothing before the first
	}
	f := &b.fixed
	b.putString(f.formID, b.ed.t.FormID)
	b.putString(f.submissionID, sub.SubmissionID)
	b.putTime(f.submissionTime, sub.SubmissionTime)
	if sub.LastUpdatedAt != nil {
		b.putTime(f.lastUpdatedAt, *sub.LastUpdatedAt)
	}
	if sub.StartedAt != nil {
		b.putTime(f.startedAt, *sub.StartedAt)
	}
	if sub.Login != nil {
		b.putString(f.loginEmail, sub.Login.Email)
	}
	if q := sub.Quiz; q != nil {
		b.putFloat(f.quizScore, q.Score)
		b.putFloat(f.quizMaxScore, q.MaxScore)
	}
	if f.editLink >= 0 {
		b.putString(f.editLink, sub.EditLink)
	}
	b.putDocuments(sub.Documents)
	b.putString(f.batchID, lin.BatchID)
	b.putTime(f.syncedAt, lin.SyncedAt)
	b.putBool(f.deleted, false)

	for i := range sub.Questions {
		a := &sub.Questions[i]
		if col := b.routeAt(groupQuestions, i, KindQuestion, a.ID, a.Name, a.Type); col >= 0 {
			b.putJSON(col, a.Value, sub.ValuesChecked)
		}
	}
	for i := range sub.Calculations {
		c := &sub.Calculations[i]
		if col := b.routeAt(groupCalculations, i, KindCalculation, c.ID, c.Name, c.Type); col >= 0 {
			b.putText(col, c.Value)
		}
	}
	for i := range sub.URLParameters {
		p := &sub.URLParameters[i]
		if col := b.routeAt(groupURLParameters, i, KindURLParameter, p.ID, p.Name, ""); col >= 0 {
			b.putText(col, p.Value)
		}
	}
	for i := range sub.Scheduling {
		s := &sub.Scheduling[i]
		if col := b.routeAt(groupScheduling, i, KindScheduling, s.ID, s.Name, ""); col >= 0 {
			b.putJSON(col, s.Value, sub.ValuesChecked)
		}
	}
	for i := range sub.Payments {
		p := &sub.Payments[i]
		if col := b.routeAt(groupPayments, i, KindPayment, p.ID, p.Name, ""); col >= 0 {
			b.putJSON(col, p.Value, sub.ValuesChecked)
		}
	}

	b.endRow()
	return nil
}

// AppendTombstone adds the row that says submission id (of submission time
// t) was deleted: its key columns, last_updated_at set to when the deletion
// was seen (the version's time), the lineage, _deleted true, and null
// answers.
func (b *Builder) AppendTombstone(id string, t, seen time.Time, lin Lineage) error {
	switch {
	case b.err != nil:
		return b.err
	case b.released:
		return errors.New("schema: append to a released builder")
	case id == "" || t.IsZero() || lin.BatchID == "" || lin.SyncedAt.IsZero():
		return fmt.Errorf("schema: tombstone of submission %q of form %s lacks its id, time or lineage", id, b.ed.t.FormID)
	case b.fixed.deleted < 0:
		return fmt.Errorf("schema: table of form %s has no %s column for tombstones", b.ed.t.FormID, ColDeleted)
	}
	f := &b.fixed
	b.putString(f.formID, b.ed.t.FormID)
	b.putString(f.submissionID, id)
	b.putTime(f.submissionTime, t)
	b.putTime(f.lastUpdatedAt, seen)
	b.putString(f.batchID, lin.BatchID)
	b.putTime(f.syncedAt, lin.SyncedAt)
	b.putBool(f.deleted, true)
	b.endRow()
	return nil
}

// endRow finishes the row: the values its __v_json columns keep, and
// nulls in every column it left empty.
func (b *Builder) endRow() {
	if len(b.kept) > 0 {
		b.flushKept()
	}
	stamp := b.rows + 1
	for i := range b.cols {
		if c := &b.cols[i]; c.stamp != stamp {
			c.bld.AppendNull()
		}
	}
	b.rows++
}

func (b *Builder) putBool(i int, v bool) {
	if i < 0 {
		return
	}
	b.cols[i].bld.(*array.BooleanBuilder).Append(v)
	b.mark(i)
}

// routeAt is route for the value at position pos of group g, through
// b.routes. Only columns are remembered: a value that is not exported or
// discarded goes through route every time, which counts discards.
func (b *Builder) routeAt(g, pos int, kind SourceKind, id, name, typ string) int {
	rs := b.routes[g]
	if pos < len(rs) {
		if r := rs[pos]; r.col >= 0 && r.id == id && r.typ == typ {
			return r.col
		}
	}
	col := b.route(kind, id, name, typ) // may add columns, emptying b.routes
	rs = b.routes[g]
	for len(rs) <= pos {
		rs = append(rs, routed{col: -1})
	}
	rs[pos] = routed{id: id, typ: typ, col: col}
	b.routes[g] = rs
	return col
}

// route returns the column a value of source (kind, id) goes to, given the
// value's own type, adding a column when the table has none for it yet. It
// returns -1 for a value that is not exported (Password) or discarded
// (unknown type).
func (b *Builder) route(kind SourceKind, id, name, typ string) int {
	k := sourceKey{kind, id}
	si, known := b.ed.sources[k]
	if typ == "" && (kind == KindQuestion || kind == KindCalculation) {
		// No type on the value: the source's current column decides.
		if !known {
			return b.addSource(kind, id, name, "", typeless(kind))
		}
		s := &b.ed.t.Sources[si]
		if s.Column == "" {
			if _, _, ok := mapType(kind, s.Type); !ok {
				b.discard(s.Type)
			}
			return -1
		}
		return b.ed.byName[s.Column]
	}
	ct, export, ok := mapType(kind, typ)
	switch {
	case !ok:
		b.discard(typ)
		return -1
	case !export:
		return -1
	case !known:
		return b.addSource(kind, id, name, typ, ct)
	}
	if col := b.ed.columnOf(k, ct); col >= 0 {
		return col
	}
	col := b.ed.addTyped(si, ct, typ, "had an answer of type "+typ)
	b.sync()
	return col
}

func (b *Builder) discard(typ string) {
	if b.stats.Discarded == nil {
		b.stats.Discarded = make(map[string]int)
	}
	b.stats.Discarded[typ]++
}

// addSource adds a source first seen in a submission, and its column.
func (b *Builder) addSource(kind SourceKind, id, name, typ string, ct ColumnType) int {
	si := b.ed.addSource(Source{Kind: kind, ID: id, Name: name, Type: typ})
	col := b.ed.addTyped(si, ct, typ, "")
	b.ed.t.Sources[si].Column = b.ed.t.Columns[col].Name
	b.ed.changes[len(b.ed.changes)-1].Detail += ", first seen in a submission (not in the form metadata read)"
	b.sync()
	return col
}

// taken reports whether column i already has a value in the current row.
func (b *Builder) taken(i int) bool { return b.cols[i].stamp == b.rows+1 }

func (b *Builder) mark(i int) { b.cols[i].stamp = b.rows + 1 }

// putString sets a string column; "" stays null.
func (b *Builder) putString(i int, s string) {
	if i < 0 || s == "" {
		return
	}
	appendString(b.cols[i].bld, s)
	b.mark(i)
}

func appendString(bld array.Builder, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	bld.(*array.StringBuilder).Append(s)
}

func (b *Builder) putTime(i int, t time.Time) {
	if i < 0 || t.IsZero() {
		return
	}
	b.cols[i].bld.(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	b.mark(i)
}

func (b *Builder) putFloat(i int, f *float64) {
	if i < 0 || f == nil {
		return
	}
	b.cols[i].bld.(*array.Float64Builder).Append(*f)
	b.mark(i)
}

func (b *Builder) putDocuments(docs []forms.Document) {
	i := b.fixed.documents
	if i < 0 || len(docs) == 0 {
		return
	}
	lb := b.cols[i].bld.(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.StructBuilder)
	lb.Append(true)
	for _, d := range docs {
		vb.Append(true)
		for j, s := range [...]string{d.ID, d.Name, d.URL} {
			if s == "" {
				vb.FieldBuilder(j).AppendNull()
			} else {
				appendString(vb.FieldBuilder(j), s)
			}
		}
	}
	b.mark(i)
}

// putText sets column i from a value the API sends as a string
// (calculations, URL parameters). A number calculation must hold a number
// in JSON's grammar ("12.50").
func (b *Builder) putText(i int, s string) {
	if s == "" {
		return
	}
	if b.taken(i) {
		b.misfitText(i, s)
		return
	}
	switch b.cols[i].typ {
	case TypeString:
		appendString(b.cols[i].bld, s)
	case TypeDouble:
		f, ok := parseDouble(s)
		if !isNumberText(s) || !ok {
			b.misfitText(i, s)
			return
		}
		b.cols[i].bld.(*array.Float64Builder).Append(f)
	default:
		b.misfitText(i, s)
		return
	}
	b.mark(i)
}

func (b *Builder) misfitText(i int, s string) {
	b.buf.Reset()
	enc := json.NewEncoder(&b.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	b.keep(i, bytes.TrimSuffix(b.buf.Bytes(), []byte("\n")))
}

// putJSON sets column i from a raw JSON value. Empty answers stay null; a
// value that does not fit the column's type goes whole to its __v_json
// companion. checked says raw is one valid, compact JSON value in valid
// UTF-8 (forms.Submission.ValuesChecked), which need not be checked again.
func (b *Builder) putJSON(i int, raw json.RawMessage, checked bool) {
	v := raw
	if !checked {
		v = trimJSON(raw)
	}
	b.text = b.text[:0]
	if b.cols[i].typ == TypeJSON && !b.taken(i) && len(v) > 0 {
		if checked {
			b.putJSONChecked(i, v)
		} else {
			b.putJSONText(i, v)
		}
		return
	}
	if !checked && !validJSON(v) {
		if len(v) > 0 {
			b.keep(i, v) // not JSON at all: kept as sent
		}
		return
	}
	if isEmpty(v) {
		return
	}
	if b.taken(i) || !b.appendValue(i, v) {
		if checked {
			b.keep(i, v)
		} else {
			b.compactKeep(i, v)
		}
		return
	}
	b.mark(i)
}

// putJSONText sets JSON column i to the compact form of v. Values usually
// arrive compact: one scan validates v and tells, and only a spaced value
// is copied by json.Compact.
func (b *Builder) putJSONText(i int, v []byte) {
	text, ok := b.compact(v)
	if !ok {
		b.keep(i, v) // not JSON at all: kept as sent
		return
	}
	if !utf8.Valid(text) {
		text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
	}
	b.putJSONChecked(i, text)
}

// putJSONChecked sets JSON column i to v, valid and compact JSON in valid
// UTF-8; an empty value leaves it null.
func (b *Builder) putJSONChecked(i int, v []byte) {
	if isEmpty(v) {
		return
	}
	b.cols[i].bld.(*array.StringBuilder).BinaryBuilder.Append(v)
	b.mark(i)
}

func (b *Builder) compactKeep(i int, v []byte) {
	text, ok := b.compact(v)
	if !ok {
		b.keep(i, v) // unreachable: v is valid
		return
	}
	b.keep(i, text)
}

// compact returns the compact form of v (v itself when it is compact
// already, else a buffer valid until the next value), or false if v is not
// JSON.
func (b *Builder) compact(v []byte) ([]byte, bool) {
	valid, compact := forms.ValidJSON(v)
	switch {
	case !valid:
		return nil, false
	case compact:
		return v, true
	}
	b.buf.Reset()
	if err := json.Compact(&b.buf, v); err != nil {
		return nil, false // unreachable: v is valid
	}
	return b.buf.Bytes(), true
}

// keep stores text in the __v_json companion of column i and counts it.
// The companion gets its value at the row's end (flushKept): an answer
// repeated within one submission (the API sent a question more than once)
// may have more than one value to keep.
func (b *Builder) keep(i int, text []byte) {
	j := b.ed.addCompanion(i)
	b.sync()
	if !utf8.Valid(text) {
		text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
	}
	start := len(b.keptText)
	b.keptText = append(b.keptText, text...)
	b.kept = append(b.kept, keptValue{col: j, start: start, end: len(b.keptText)})
	b.mark(j)
	if b.stats.Misfits == nil {
		b.stats.Misfits = make(map[string]int)
	}
	name := b.ed.t.Columns[i].Name
	b.stats.Misfits[name]++
	if _, ok := b.stats.MisfitExamples[name]; !ok {
		if b.stats.MisfitExamples == nil {
			b.stats.MisfitExamples = make(map[string]string)
		}
		b.stats.MisfitExamples[name] = Describe(text)
		if b.stats.KeptIn == nil {
			b.stats.KeptIn = make(map[string]string)
		}
		b.stats.KeptIn[name] = b.ed.t.Columns[j].Name
	}
}

// keptValue is a value of the current row that a __v_json column keeps:
// keptText[start:end].
type keptValue struct{ col, start, end int }

// flushKept appends the row's kept values to their __v_json columns. A
// column with one value holds it as it came; one with several (a repeated
// answer) holds them as a JSON array, in the order they came, each that is
// not JSON itself as a JSON string.
func (b *Builder) flushKept() {
	for n, k := range b.kept {
		if k.col < 0 {
			continue // joined into an earlier value's array
		}
		var more bool
		for _, l := range b.kept[n+1:] {
			more = more || l.col == k.col
		}
		bld := b.cols[k.col].bld.(*array.StringBuilder)
		if !more {
			bld.BinaryBuilder.Append(b.keptText[k.start:k.end])
			continue
		}
		b.buf.Reset()
		b.buf.WriteByte('[')
		for m := n; m < len(b.kept); m++ {
			l := &b.kept[m]
			if l.col != k.col {
				continue
			}
			if m > n {
				b.buf.WriteByte(',')
			}
			v := b.keptText[l.start:l.end]
			if validJSON(v) {
				b.buf.Write(v)
			} else {
				text, _ := json.Marshal(string(v)) // a string cannot fail
				b.buf.Write(text)
			}
			l.col = -1
		}
		b.buf.WriteByte(']')
		bld.BinaryBuilder.Append(b.buf.Bytes())
	}
	b.kept = b.kept[:0]
	b.keptText = b.keptText[:0]
}

// appendValue appends v (valid, trimmed, not empty) to column i if it fits
// the column's type, and appends nothing otherwise. Composite values are
// decoded whole before anything is appended, since Arrow builders cannot
// take a value back.
func (b *Builder) appendValue(i int, v []byte) bool {
	bld := b.cols[i].bld
	switch ct := b.cols[i].typ; ct {
	case TypeString:
		if v[0] != '"' {
			return false
		}
		bld.(*array.StringBuilder).BinaryBuilder.Append(b.unquote(v))
	case TypeDouble:
		f, ok := parseDouble(v)
		if !ok {
			return false
		}
		bld.(*array.Float64Builder).Append(f)
	case TypeInt64:
		n, ok := parseInt(v)
		if !ok {
			return false
		}
		bld.(*array.Int64Builder).Append(n)
	case TypeBool:
		switch string(v) {
		case "true":
			bld.(*array.BooleanBuilder).Append(true)
		case "false":
			bld.(*array.BooleanBuilder).Append(false)
		default:
			return false
		}
	case TypeDate, TypeTimestamp:
		c, ok := b.decodeCell(childOf(ct), v)
		if !ok || !c.valid {
			return false
		}
		appendCell(bld, childOf(ct), c)
	case TypeListString:
		return b.appendStrings(bld.(*array.ListBuilder), v)
	case TypeFiles:
		return b.appendFiles(bld.(*array.ListBuilder), v)
	case TypeDateRange, TypeAddress, TypeLocation, TypeScheduling, TypePayment:
		spec := structOf(ct)
		cells := b.scratchCells(len(spec.keys))
		if !b.decodeStruct(spec, v, cells) {
			return false
		}
		appendStruct(bld.(*array.StructBuilder), spec, cells)
	default:
		return false // json goes through putJSONText; documents is never read from JSON
	}
	return true
}

func childOf(ct ColumnType) childKind {
	if ct == TypeDate {
		return childDate
	}
	return childTimestamp
}

func (b *Builder) scratchCells(n int) []cell {
	if cap(b.cells) < n {
		b.cells = make([]cell, n)
	}
	return b.cells[:n]
}

// unquote decodes a string literal of the current value; the text stays
// valid until the next value.
func (b *Builder) unquote(s []byte) []byte {
	var text []byte
	text, b.text = unquote(b.text, s)
	return text
}

// appendStrings appends an array of strings. An empty element (null or
// "") does not fit: BigQuery takes no null element in an array, and one
// would fail the whole batch's load, so such an answer is kept as JSON.
func (b *Builder) appendStrings(lb *array.ListBuilder, v []byte) bool {
	if v[0] != '[' {
		return false
	}
	b.strs = b.strs[:0]
	ok := eachElement(v, func(i int) (int, bool) {
		switch v[i] {
		case '"':
			if body, end, plain := plainLiteral(v, i); plain {
				b.strs = append(b.strs, body)
				return end, len(body) > 0
			}
			end := valueEnd(v, i)
			b.strs = append(b.strs, b.unquote(v[i:end]))
			return end, true
		}
		return 0, false
	})
	if !ok {
		return false
	}
	vb := lb.ValueBuilder().(*array.StringBuilder)
	lb.Append(true)
	for _, s := range b.strs {
		vb.BinaryBuilder.Append(s)
	}
	return true
}

// appendFiles appends an array of file objects. An empty element (null or
// {}) does not fit, as in appendStrings.
func (b *Builder) appendFiles(lb *array.ListBuilder, v []byte) bool {
	if v[0] != '[' {
		return false
	}
	spec := specFile
	n := len(spec.keys)
	b.cells = b.cells[:0]
	// Each object is decoded where it starts, and its decoding finds its
	// end: finding each element's end first scanned every file twice.
	ok := eachElement(v, func(i int) (int, bool) {
		base := len(b.cells)
		for range n {
			b.cells = append(b.cells, cell{})
		}
		if v[i] == '{' && v[skipSpace(v, i+1)] != '}' {
			return b.decodeStructAt(spec, v, i, b.cells[base:base+n])
		}
		return 0, false // empty, or not a file: the value does not fit
	})
	if !ok {
		return false
	}
	vb := lb.ValueBuilder().(*array.StructBuilder)
	lb.Append(true)
	for k := range len(b.cells) / n {
		appendStruct(vb, spec, b.cells[k*n:(k+1)*n])
	}
	return true
}

// decodeStruct decodes object v into cells (one per child of spec). An
// unknown or repeated key, or a child that does not fit, makes the whole
// value a misfit: keeping it as JSON loses nothing.
func (b *Builder) decodeStruct(spec *structSpec, v []byte, cells []cell) bool {
	_, ok := b.decodeStructAt(spec, v, 0, cells)
	return ok
}

// decodeStructAt is decodeStruct of the object that starts at v[i]; it
// also returns the index just past the object.
func (b *Builder) decodeStructAt(spec *structSpec, v []byte, i int, cells []cell) (int, bool) {
	if v[i] != '{' {
		return i, false
	}
	clear(cells)
	next := 0 // the key expected next: the API sends a shape's keys in one order
	i = skipSpace(v, i+1)
	for i < len(v) && v[i] == '"' {
		k, kend := -1, 0
		if next < len(spec.keys) && jsontext.LiteralAt(v, i, spec.keys[next]) {
			k, kend = next, i+len(spec.keys[next])+2 // no need to scan or unquote it
		} else {
			kend = stringEnd(v, i)
			key, _ := unquote(nil, v[i:kend])
			k = spec.index(key)
		}
		if k < 0 || cells[k].set {
			return i, false
		}
		i = skipSpace(v, kend)
		i = skipSpace(v, i+1) // the colon
		var end int
		if c, plainEnd, ok := plainStringCell(spec.kinds[k], v, i); ok {
			cells[k], end = c, plainEnd // scanned once, not found then decoded
		} else {
			end = valueEnd(v, i)
			c, ok := b.decodeCell(spec.kinds[k], v[i:end])
			c.set = true
			cells[k] = c
			if !ok {
				return i, false
			}
		}
		next = k + 1
		i = skipSpace(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	if i >= len(v) || v[i] != '}' {
		return i, false
	}
	return i + 1, true
}

// plainStringCell decodes a string child whose literal at v[i] needs no
// unescaping or checking (printable ASCII), as decodeCell would, and
// returns the index past it; ok is false for any other child or literal.
func plainStringCell(k childKind, v []byte, i int) (c cell, end int, ok bool) {
	if k != childString {
		return cell{}, 0, false
	}
	body, end, ok := plainLiteral(v, i)
	if !ok {
		return cell{}, 0, false
	}
	c.set = true
	if len(body) > 0 { // "" is null
		c.s, c.valid = body, true
	}
	return c, end, true
}

// decodeCell decodes one scalar child; null and "" are null.
func (b *Builder) decodeCell(k childKind, v []byte) (cell, bool) {
	if v[0] == 'n' || len(v) == 2 && v[0] == '"' {
		return cell{}, true
	}
	var c cell
	ok := false
	switch k {
	case childString:
		if v[0] == '"' {
			c.s, ok = b.unquote(v), true
		}
	case childDouble:
		c.f, ok = parseDouble(v)
	case childInt64:
		c.i, ok = parseInt(v)
	case childDate:
		if v[0] == '"' {
			var d int32
			d, ok = parseDate(b.unquote(v))
			c.i = int64(d)
		}
	case childTimestamp:
		if v[0] == '"' {
			c.i, ok = parseTimestamp(b.unquote(v))
		}
	}
	c.valid = ok
	return c, ok
}

func appendStruct(sb *array.StructBuilder, spec *structSpec, cells []cell) {
	sb.Append(true)
	for i, k := range spec.kinds {
		appendCell(sb.FieldBuilder(i), k, cells[i])
	}
}

func appendCell(bld array.Builder, k childKind, c cell) {
	if !c.valid {
		bld.AppendNull()
		return
	}
	switch k {
	case childString:
		bld.(*array.StringBuilder).BinaryBuilder.Append(c.s)
	case childDouble:
		bld.(*array.Float64Builder).Append(c.f)
	case childInt64:
		bld.(*array.Int64Builder).Append(c.i)
	case childDate:
		bld.(*array.Date32Builder).Append(arrow.Date32(c.i))
	case childTimestamp:
		bld.(*array.TimestampBuilder).Append(arrow.Timestamp(c.i))
	}
}

// Finish returns the rows appended since the last Finish as one record with
// the schema of the (possibly evolved) table, that table, and what happened.
// The caller releases the record. The Builder stays usable, with the evolved
// table, for further rows.
func (b *Builder) Finish() (arrow.Record, *Table, Stats) {
	if b.released {
		b.sync() // empty builders, so that the record is still well formed
		defer b.Release()
	}
	schema := b.ed.t.ArrowSchema()
	arrs := make([]arrow.Array, len(b.cols))
	for i := range b.cols {
		c := &b.cols[i]
		c.sizes = sizesOf(c.bld, c.sizes[:0])
		arrs[i] = c.bld.NewArray()
		c.stamp = 0
	}
	rec := array.NewRecord(schema, arrs, int64(b.rows))
	for _, a := range arrs {
		a.Release()
	}
	st := b.stats
	st.Rows = b.rows
	st.Changes = b.ed.changes
	b.stats = Stats{}
	b.ed.changes = nil
	b.rows = 0
	return rec, b.ed.t.Clone(), st
}

// reserve gives every column room for a chunk like the last one. It runs
// at a chunk's first row, not at Finish, so that a builder waiting between
// chunks (while the batch is written) holds no memory.
func (b *Builder) reserve() {
	for i := range b.cols {
		c := &b.cols[i]
		reserveSizes(c.bld, c.sizes)
	}
}

// Release frees the Arrow builders. The Builder cannot be used afterwards.
func (b *Builder) Release() {
	for i := range b.cols {
		b.cols[i].bld.Release()
	}
	b.cols = nil
	b.rows = 0
	b.released = true
}
