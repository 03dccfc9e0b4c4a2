package poller

import "testing"

func TestKeySource(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"vLp2aX", SourceForms},
		{"scheduling/bookings", "scheduling"},
		{"acme/vLp2aX", SourceForms},
		{"acme/scheduling/bookings", "scheduling"},
	} {
		if got := keySource(tc.key); got != tc.want {
			t.Errorf("keySource(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
