package suggest

import (
	"reflect"
	"testing"
)

func TestClosest(t *testing.T) {
	known := []string{"vLp2aX", "k8sT0q", "vLp2aY", "abcdef", "zz"}
	tests := []struct {
		typed string
		n     int
		want  []string
	}{
		{"vLp2ax", 2, []string{"vLp2aX", "vLp2aY"}}, // case is ignored
		{"k8sT0", 3, []string{"k8sT0q"}},
		{"qqqqqqqqqqqqq", 3, []string{}},
		{"zz", 1, []string{"zz"}},
	}
	for _, tc := range tests {
		got := Closest(tc.typed, known, tc.n)
		if len(got) == 0 && len(tc.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Closest(%q, %d) = %v, want %v", tc.typed, tc.n, got, tc.want)
		}
	}
	if p := Phrase("nothing-like-it-at-all", []string{"a"}); p != "" {
		t.Errorf("Phrase with nothing close = %q", p)
	}
}
