package schema

import (
	"strconv"
	"strings"
	"sync"

	"github.com/syncd-dev/syncd/internal/table"
)

// The naming rule is the engine's (internal/table): a table's name follows
// it as its columns' do.
const MaxNameLen = table.MaxNameLen

// SanitizeName is table.SanitizeName.
func SanitizeName(s string) string { return table.SanitizeName(s) }

func foldName(s string) string            { return table.FoldName(s) }
func finishName(s string) string          { return table.FinishName(s) }
func truncateName(s string, n int) string { return table.TruncateName(s, n) }
func validName(name string) bool          { return table.ValidName(name) }

// withSuffix appends a suffix, shortening the name so that the whole fits.
func withSuffix(name, suffix string) string {
	return truncateName(name, MaxNameLen-len(suffix)) + suffix
}

// namer hands out column names unique within one table. All names are ASCII
// lowercase, so exact uniqueness is case-insensitive uniqueness.
type namer map[string]struct{}

// partitionKeys are the keys of the folders a table's Parquet files are
// partitioned in (parquetsink's layouts, and app.AccountFolder, the folder
// of a named account's tables): a reader's hive_partitioning gives a
// column of that name the folder's value, so no question may take one.
var partitionKeys = []string{"submission_date", "submission_month", "submission_year", "version_date", "version_month", "version_year", "account"}

func newNamer(cols []Column) namer {
	n := make(namer, len(cols)+len(fixedNames)+len(partitionKeys))
	for _, name := range fixedNames {
		n[name] = struct{}{} // even edit_link when absent: it may be enabled later
	}
	for _, name := range partitionKeys {
		n[name] = struct{}{}
	}
	for _, c := range cols {
		n[c.Name] = struct{}{}
	}
	return n
}

// take returns name, or name with the first free suffix _2, _3, ...
func (n namer) take(name string) string {
	if _, used := n[name]; !used {
		n[name] = struct{}{}
		return name
	}
	stem := strings.TrimRight(name, "_")
	for i := 2; ; i++ {
		c := withSuffix(stem, "_"+strconv.Itoa(i))
		if _, used := n[c]; !used {
			n[c] = struct{}{}
			return c
		}
	}
}

// Names hands out the names of the columns that the builders of one pass
// add. Windows of a pass are built concurrently, each on its own copy of
// the pass's table: without one authority, two builders could give one
// name to two different columns (two new questions both named "Email"),
// and a batch's files would hold under that name what the merged table
// says is another column's.
type Names struct {
	mu         sync.Mutex
	used       namer
	byIdentity map[string]string
}

// NewNames starts the names of a pass on table t.
func NewNames(t *Table) *Names {
	n := &Names{used: newNamer(t.Columns), byIdentity: make(map[string]string, len(t.Columns))}
	for _, c := range t.Columns {
		n.byIdentity[identity(c)] = c.Name
	}
	return n
}

// claim returns the name of column c: the one any builder of the pass
// gave the same column, else want (or want with a suffix) if no builder
// has taken it and local (the asking builder's names) does not hold it.
func (n *Names) claim(c Column, want string, local namer) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := identity(c)
	if name, ok := n.byIdentity[id]; ok {
		if _, clash := local[name]; !clash {
			local[name] = struct{}{}
			return name
		}
	}
	for name := range local {
		n.used[name] = struct{}{} // a name the pass's table did not have when the pass began
	}
	name := n.used.take(want)
	local[name] = struct{}{}
	if _, ok := n.byIdentity[id]; !ok {
		n.byIdentity[id] = name
	}
	return name
}

// kindPrefix is put before the names of non-question sources, so that they
// cannot collide with questions and read as what they are.
func kindPrefix(k SourceKind) string {
	switch k {
	case KindCalculation:
		return "calc_"
	case KindURLParameter:
		return "param_"
	case KindScheduling:
		return "scheduling_"
	case KindPayment:
		return "payment_"
	}
	return ""
}

// baseName derives the name of a source's first column from its name, else
// its id, else the kind itself.
func baseName(k SourceKind, name, id string) string {
	s := foldName(name)
	if s == "" {
		s = foldName(id)
	}
	if s == "" {
		s = string(k)
	}
	return finishName(kindPrefix(k) + s)
}
