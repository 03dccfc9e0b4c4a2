// Package textfmt holds the little helpers the text forms of syncd's views
// share (a pass's results, a dry run's plan, the state's view): counts
// spelled with their noun, a dash for nothing, times as the views print
// them. The views' JSON forms are beside the same views; only the text
// needs these.
package textfmt

import (
	"fmt"
	"strings"
	"time"
)

// Plural is "1 row", "2 rows", "1 batch", "3 batches".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// OrDash is s, or "-" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Time is a window's bound as the text views print it: UTC to the
// millisecond, "beginning" for the Unix epoch.
func Time(t time.Time) string {
	if t.Equal(time.Unix(0, 0)) {
		return "beginning"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
