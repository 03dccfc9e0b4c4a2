package textfmt

import (
	"strings"
	"testing"
	"time"
)

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		noun string
		want string
	}{
		{1, "row", "1 row"}, {0, "row", "0 rows"}, {2, "batch", "2 batches"}, {3, "pass", "3 passes"},
	} {
		if got := Plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

func TestTime(t *testing.T) {
	if got := Time(time.Unix(0, 0)); got != "beginning" {
		t.Errorf("Time(epoch) = %q, want beginning", got)
	}
	at := time.Date(2024, 1, 31, 10, 4, 5, 6e6, time.FixedZone("x", 3600))
	if got, want := Time(at), "2024-01-31T09:04:05.006Z"; got != want {
		t.Errorf("Time(%v) = %q, want %q", at, got, want)
	}
}

func TestTableAligns(t *testing.T) {
	var b strings.Builder
	if err := Table(&b, []string{"ID", "NAME"}, [][]string{{"abc", "x"}, {"a", "longer"}}); err != nil {
		t.Fatal(err)
	}
	want := "ID   NAME\nabc  x\na    longer\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
