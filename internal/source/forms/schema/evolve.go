package schema

import (
	"fmt"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// sourceKey identifies a source: ids are unique within a kind only.
type sourceKey struct {
	kind SourceKind
	id   string
}

// editor changes a table in place, keeping the indexes that evolution and
// routing need. Evolve runs one on a clone; a Builder keeps one for its own
// table.
type editor struct {
	t         *Table
	names     namer
	byName    map[string]int
	sources   map[sourceKey]int   // index in t.Sources
	bySource  map[sourceKey][]int // a source's typed columns, oldest first
	companion map[int]int         // typed column -> its __v_json column
	changes   []Change
	// shared, when set, names the columns this editor adds (a builder's,
	// beside the other builders of its pass).
	shared *Names
}

func newEditor(t *Table) *editor {
	e := &editor{
		t:         t,
		names:     newNamer(t.Columns),
		byName:    make(map[string]int, len(t.Columns)),
		sources:   make(map[sourceKey]int, len(t.Sources)),
		bySource:  make(map[sourceKey][]int, len(t.Sources)),
		companion: make(map[int]int),
	}
	for i := range t.Columns {
		e.index(i)
	}
	for i, s := range t.Sources {
		e.sources[sourceKey{s.Kind, s.ID}] = i
	}
	return e
}

func (e *editor) index(i int) {
	c := &e.t.Columns[i]
	e.byName[c.Name] = i
	e.names[c.Name] = struct{}{}
	switch {
	case c.Kind == KindVariantJSON:
		if p, ok := e.byName[c.Parent]; ok {
			e.companion[p] = i
		}
	case isSourceKind(c.Kind):
		k := sourceKey{c.Kind, c.SourceID}
		e.bySource[k] = append(e.bySource[k], i)
	}
}

// nameFor returns a free name for new column c, from want.
func (e *editor) nameFor(c Column, want string) string {
	if e.shared != nil {
		return e.shared.claim(c, want, e.names)
	}
	return e.names.take(want)
}

// appendColumn adds c at the end of the table; its name must be free.
func (e *editor) appendColumn(c Column) int {
	e.t.Columns = append(e.t.Columns, c)
	i := len(e.t.Columns) - 1
	e.index(i)
	return i
}

func (e *editor) addSource(s Source) int {
	e.t.Sources = append(e.t.Sources, s)
	i := len(e.t.Sources) - 1
	e.sources[sourceKey{s.Kind, s.ID}] = i
	return i
}

// columnOf is the column of a source with column type ct, or -1.
func (e *editor) columnOf(k sourceKey, ct ColumnType) int {
	for _, i := range e.bySource[k] {
		if e.t.Columns[i].Type == ct {
			return i
		}
	}
	return -1
}

func (e *editor) applyForm(form *forms.Form) {
	seen := make(map[sourceKey]bool, len(form.Questions))
	for _, group := range [...]struct {
		kind   SourceKind
		fields []forms.Field
	}{
		{KindQuestion, form.Questions},
		{KindCalculation, form.Calculations},
		{KindURLParameter, form.URLParameters},
		{KindScheduling, form.Scheduling},
		{KindPayment, form.Payments},
	} {
		for _, f := range group.fields {
			k := sourceKey{group.kind, f.ID}
			if seen[k] {
				continue // a repeated id: the first entry is the field
			}
			seen[k] = true
			e.applyField(group.kind, f)
		}
	}
}

// applyField brings one source in line with its metadata.
func (e *editor) applyField(kind SourceKind, f forms.Field) {
	typ := f.Type
	if kind != KindQuestion && kind != KindCalculation {
		typ = "" // the other kinds have one shape; ignore a stray type
	}
	ct, export, _ := mapType(kind, typ)
	k := sourceKey{kind, f.ID}
	si, ok := e.sources[k]
	if !ok {
		si = e.addSource(Source{Kind: kind, ID: f.ID, Name: f.Name, Type: typ})
		if export {
			col := e.addTyped(si, ct, typ, "")
			e.t.Sources[si].Column = e.t.Columns[col].Name
		}
		return
	}
	if e.t.Sources[si].Name != f.Name {
		e.rename(si, f.Name)
	}
	s := &e.t.Sources[si]
	if s.Type == typ && (s.Column != "" || !export) {
		return
	}
	old := s.Type
	s.Type = typ
	if !export {
		s.Column = ""
		e.changes = append(e.changes, Change{Kind: ChangeTypeUpdated, Column: "",
			Detail: fmt.Sprintf("%s %s changed type %s -> %s, which is not exported; its columns stay", kind, f.ID, old, typ)})
		return
	}
	if col := e.columnOf(k, ct); col >= 0 {
		c := &e.t.Columns[col]
		c.SourceType = typ
		c.Description = describe(kind, s.Name, typ)
		detail := fmt.Sprintf("%s %s changed type %s -> %s; column type %s unchanged", kind, f.ID, old, typ, ct)
		if s.Column != c.Name {
			detail = fmt.Sprintf("%s %s changed type %s -> %s; new values go back to its %s column", kind, f.ID, old, typ, ct)
		}
		s.Column = c.Name
		e.changes = append(e.changes, Change{Kind: ChangeTypeUpdated, Column: c.Name, Detail: detail})
		return
	}
	col := e.addTyped(si, ct, typ, fmt.Sprintf("changed type %s -> %s", old, typ))
	e.t.Sources[si].Column = e.t.Columns[col].Name
}

// rename makes every column of a source describe its new name; the columns
// keep their names.
func (e *editor) rename(si int, name string) {
	s := &e.t.Sources[si]
	old := s.Name
	s.Name = name
	k := sourceKey{s.Kind, s.ID}
	for _, i := range e.bySource[k] {
		c := &e.t.Columns[i]
		c.SourceName = name
		c.Description = describe(s.Kind, name, c.SourceType)
		if j, ok := e.companion[i]; ok {
			e.t.Columns[j].SourceName = name
			e.t.Columns[j].Description = describeCompanion(c)
		}
	}
	col := s.Column
	if col == "" && len(e.bySource[k]) > 0 {
		col = e.t.Columns[e.bySource[k][0]].Name
	}
	e.changes = append(e.changes, Change{Kind: ChangeRenamed, Column: col,
		Detail: fmt.Sprintf("%s %s renamed %q -> %q; its columns keep their names", s.Kind, s.ID, old, name)})
}

// addTyped adds a column of type ct for source si: its first column is named
// from the source, later ones are variants <first>__v_<type>. why says what
// prompted a variant.
func (e *editor) addTyped(si int, ct ColumnType, typ, why string) int {
	s := e.t.Sources[si]
	k := sourceKey{s.Kind, s.ID}
	change := Change{Kind: ChangeAdded}
	c := Column{Type: ct, Kind: s.Kind, SourceID: s.ID, SourceName: s.Name, SourceType: typ, Description: describe(s.Kind, s.Name, typ)}
	if first := e.bySource[k]; len(first) == 0 {
		c.Name = e.nameFor(c, baseName(s.Kind, s.Name, s.ID))
		change.Detail = fmt.Sprintf("%s %s %q (%s) as %s", s.Kind, s.ID, s.Name, typ, ct)
	} else {
		c.Name = e.nameFor(c, withSuffix(e.t.Columns[first[0]].Name, variantSuffix(ct, typ)))
		change.Kind = ChangeVariant
		change.Detail = fmt.Sprintf("%s %s %q %s: its %s values go to this new column", s.Kind, s.ID, s.Name, why, ct)
	}
	change.Column = c.Name
	e.changes = append(e.changes, change)
	return e.appendColumn(c)
}

// variantSuffix names the column a question's values of type ct go to
// when its first column has another type: __v_<type>. A type held as JSON
// text is named by its question type instead (notes__v_matrix), since
// <name>__v_json is where every column keeps the values that do not fit.
func variantSuffix(ct ColumnType, questionType string) string {
	if ct != TypeJSON {
		return "__v_" + string(ct)
	}
	t := foldName(questionType)
	if t == "" || t == string(TypeJSON) {
		t = "json_text"
	}
	return "__v_" + t
}

// addCompanion returns the __v_json column of column i, adding it if needed.
func (e *editor) addCompanion(i int) int {
	if j, ok := e.companion[i]; ok {
		return j
	}
	p := e.t.Columns[i]
	c := Column{Type: TypeJSON, Kind: KindVariantJSON, SourceID: p.SourceID,
		SourceName: p.SourceName, SourceType: p.SourceType, Parent: p.Name, Description: describeCompanion(&p)}
	c.Name = e.nameFor(c, withSuffix(p.Name, "__v_json"))
	e.changes = append(e.changes, Change{Kind: ChangeVariant, Column: c.Name,
		Detail: fmt.Sprintf("values of %s that do not fit its %s type are kept here as JSON text", p.Name, p.Type)})
	return e.appendColumn(c)
}

func describe(kind SourceKind, name, typ string) string {
	var what string
	switch kind {
	case KindQuestion:
		what = "Question"
	case KindCalculation:
		what = "Calculation"
	case KindURLParameter:
		what = "URL parameter"
	case KindScheduling:
		what = "Scheduling field"
	case KindPayment:
		what = "Payment field"
	}
	if typ == "" {
		return fmt.Sprintf("%s %q", what, name)
	}
	return fmt.Sprintf("%s %q (%s)", what, name, typ)
}

func describeCompanion(parent *Column) string {
	return fmt.Sprintf("Values of %s (%s) that did not fit its type, as compact JSON text", parent.Name, parent.SourceName)
}
