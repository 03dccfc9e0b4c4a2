package schema

import (
	"strconv"
	"strings"

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

func newNamer(cols []Column) namer {
	n := make(namer, len(cols)+len(fixedNames))
	for _, name := range fixedNames {
		n[name] = struct{}{} // even edit_link when absent: it may be enabled later
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
