package bqrules

import (
	"strings"
	"testing"
)

func TestDatasetIDProblem(t *testing.T) {
	cases := []struct {
		id   string
		want string // a part of the problem; "" when BigQuery takes the id
	}{
		{"analytics", ""},
		{"Forms_2024", ""},
		{strings.Repeat("a", 1024), ""},
		{"", "is not a BigQuery dataset id"},
		{"my-data.set", `e.g. my_data_set`},
		{"données", "letters, digits and underscores only"},
		{strings.Repeat("a", 1025), "is 1025 characters long"},
	}
	for _, c := range cases {
		got := DatasetIDProblem(c.id)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("DatasetIDProblem(%.20q) = %q, want %q", c.id, got, c.want)
		}
	}
}
