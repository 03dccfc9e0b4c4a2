package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
)

// TestFindStreamNamesTheClosest: a key the state lacks is an
// *UnknownStreamError that names the closest keys it holds; a key it
// holds is found, in the list and in a view of it.
func TestFindStreamNamesTheClosest(t *testing.T) {
	list := []state.StreamState{{Key: "vLp2aX"}, {Key: "qQ7zzz"}}
	if st, err := FindStream(list, "qQ7zzz"); err != nil || st.Key != "qQ7zzz" {
		t.Fatalf("FindStream(qQ7zzz) = %q, %v", st.Key, err)
	}
	_, err := FindStream(list, "vLp2aY")
	var unknown *UnknownStreamError
	if !errors.As(err, &unknown) {
		t.Fatalf("FindStream(vLp2aY) = %v, want an *UnknownStreamError", err)
	}
	for _, want := range []string{"the state holds no form vLp2aY", "vLp2aX", "nothing was changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	forms := []status.Form{{Stream: "vLp2aX", Rows: 3}, {Stream: "qQ7zzz"}}
	if f, err := FindView(forms, "vLp2aX"); err != nil || f.Rows != 3 {
		t.Fatalf("FindView(vLp2aX) = %+v, %v", f, err)
	}
	if _, err := FindView(forms, "vLp2aY"); err == nil || err.Error() != unknown.Error() {
		t.Fatalf("FindView(vLp2aY) = %v, want %v", err, unknown)
	}
}
