// Package suggest finds the known names closest to one a person typed, for
// errors that say "did you mean".
package suggest

import (
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Closest returns up to n of known, nearest to typed first (edit distance,
// ignoring case; ties keep known's order). Names that need more than two
// thirds of their length changed are too far to suggest.
func Closest(typed string, known []string, n int) []string {
	type scored struct {
		name string
		dist int
		i    int
	}
	t := strings.ToLower(typed)
	var list []scored
	for i, k := range known {
		d := levenshtein.ComputeDistance(t, strings.ToLower(k))
		if d > max(len(t), len(k))*2/3 {
			continue
		}
		list = append(list, scored{k, d, i})
	}
	sort.Slice(list, func(a, b int) bool {
		if list[a].dist != list[b].dist {
			return list[a].dist < list[b].dist
		}
		return list[a].i < list[b].i
	})
	out := make([]string, 0, min(n, len(list)))
	for _, s := range list[:min(n, len(list))] {
		out = append(out, s.name)
	}
	return out
}

// Phrase is "closest: a, b, c" for an error message, or "" when there is
// nothing close.
func Phrase(typed string, known []string) string {
	c := Closest(typed, known, 3)
	if len(c) == 0 {
		return ""
	}
	return "closest: " + strings.Join(c, ", ")
}
