package table

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// The naming rule of tables and columns: what every warehouse accepts.

// MaxNameLen bounds every column name, suffixes included.
const MaxNameLen = 128

// digitPrefix is put before a name that would start with a digit, which no
// warehouse accepts: "1st choice" becomes "n_1st_choice".
const digitPrefix = "n_"

// SanitizeName is the pure naming rule (no uniqueness): compatibility
// decomposition with combining marks removed ("Prénom" -> "prenom"), a few
// letters without a decomposition spelled out ("ß" -> "ss"), ASCII lowercase,
// every other character to "_", runs of "_" collapsed and trimmed, a name
// starting with a digit prefixed with "n_", at most MaxNameLen bytes, and a
// reserved BigQuery keyword suffixed with "_" ("select" -> "select_").
// Leading underscores are trimmed, so no result can carry one of BigQuery's
// reserved prefixes (_TABLE_, _FILE_, _PARTITION, __ROOT__, ...), nor contain
// "__", which the variant suffixes use. It returns "" when nothing usable is
// left ("???", "日本").
func SanitizeName(s string) string {
	return FinishName(FoldName(s))
}

// FoldName does the character mapping of SanitizeName, without the digit,
// length and keyword rules, so that a kind prefix can be put in front first.
func FoldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pendingSep := false
	for _, r := range norm.NFKD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		repl, ok := foldTable[r]
		if !ok {
			switch {
			case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				repl = string(r)
			case r >= 'A' && r <= 'Z':
				repl = string(r + 'a' - 'A')
			default:
				pendingSep = true
				continue
			}
		}
		if pendingSep && b.Len() > 0 {
			b.WriteByte('_')
		}
		pendingSep = false
		b.WriteString(repl)
	}
	return b.String()
}

// foldTable spells out letters that have no Unicode decomposition to ASCII.
var foldTable = map[rune]string{
	'ß': "ss", 'ẞ': "ss", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe",
	'ø': "o", 'Ø': "o", 'đ': "d", 'Đ': "d", 'ð': "d", 'Ð': "d",
	'ł': "l", 'Ł': "l", 'þ': "th", 'Þ': "th", 'ı': "i", 'ħ': "h", 'Ħ': "h",
}

// FinishName applies the digit, length and keyword rules to a folded name.
func FinishName(s string) string {
	if s == "" {
		return ""
	}
	if s[0] >= '0' && s[0] <= '9' {
		s = digitPrefix + s
	}
	s = TruncateName(s, MaxNameLen)
	if reservedWords[s] {
		s += "_"
	}
	return s
}

// TruncateName cuts a folded (ASCII) name to n bytes without leaving a
// trailing "_".
func TruncateName(s string, n int) string {
	if len(s) > n {
		s = strings.TrimRight(s[:n], "_")
	}
	return s
}

// reservedWords are BigQuery's reserved keywords, lowercase. A column may not
// be named one of them unquoted.
var reservedWords = map[string]bool{
	"all": true, "and": true, "any": true, "array": true, "as": true, "asc": true,
	"assert_rows_modified": true, "at": true, "between": true, "by": true, "case": true,
	"cast": true, "collate": true, "contains": true, "create": true, "cross": true,
	"cube": true, "current": true, "default": true, "define": true, "desc": true,
	"distinct": true, "else": true, "end": true, "enum": true, "escape": true,
	"except": true, "exclude": true, "exists": true, "extract": true, "false": true,
	"fetch": true, "following": true, "for": true, "from": true, "full": true,
	"group": true, "grouping": true, "groups": true, "hash": true, "having": true,
	"if": true, "ignore": true, "in": true, "include": true, "inner": true,
	"intersect": true, "interval": true, "into": true, "is": true, "join": true,
	"lateral": true, "left": true, "like": true, "limit": true, "lookup": true,
	"merge": true, "natural": true, "new": true, "no": true, "not": true, "null": true,
	"nulls": true, "of": true, "on": true, "or": true, "order": true, "outer": true,
	"over": true, "partition": true, "pivot": true, "preceding": true, "proto": true,
	"qualify": true, "range": true, "recursive": true, "respect": true, "right": true,
	"rollup": true, "rows": true, "select": true, "set": true, "some": true,
	"struct": true, "tablesample": true, "then": true, "to": true, "treat": true,
	"true": true, "unbounded": true, "union": true, "unnest": true, "unpivot": true,
	"using": true, "when": true, "where": true, "window": true, "with": true,
	"within": true,
}

// ValidName reports whether name could have been produced by the rule:
// the check applied to a stored schema.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// StreamKey is the key of an account's stream in the state store and in
// batch ids: the stream's own key for the default account (namespace ""),
// so a single-account syncd keeps its state, and namespace/key otherwise.
func StreamKey(namespace, key string) string {
	if namespace == "" {
		return key
	}
	return namespace + "/" + key
}

// SplitStreamKey undoes StreamKey. A key of the default account either has
// no "/" (a form) or starts with a source that names its streams with one
// (scheduling/bookings); account names "scheduling" is reserved for that.
func SplitStreamKey(k string) (namespace, key string) {
	ns, rest, ok := strings.Cut(k, "/")
	if !ok || ns == ReservedNamespace {
		return "", k
	}
	return ns, rest
}

// ReservedNamespace cannot name an account: the default account's bookings
// stream is scheduling/bookings.
const ReservedNamespace = "scheduling"
