package gcpolicy

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name            string
		live, threshold uint64
		want            int
	}{
		{"nothing marked yet", 0, 64 * mib, 1000},
		{"far below: the most", 4 * mib, 64 * mib, 1000},
		{"below: the heap reaches the threshold", 32 * mib, 64 * mib, 100},
		{"a third of the way", 16 * mib, 64 * mib, 300},
		{"near it: the least", 60 * mib, 64 * mib, 50},
		{"at it", 64 * mib, 64 * mib, 50},
		{"past it", 200 * mib, 64 * mib, 50},
	}
	for _, tc := range tests {
		if got := Percent(tc.live, tc.threshold, 50, 1000); got != tc.want {
			t.Errorf("%s: Percent(%d MiB, %d MiB) = %d, want %d", tc.name, tc.live/mib, tc.threshold/mib, got, tc.want)
		}
	}
}

// The tuner follows the live heap, and sets the runtime's GOGC.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuner := Start(16<<20, 50, 1000)
	defer tuner.Stop()

	settle := func(want func(int) bool) int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			runtime.GC() // the tuner runs after each collection, on the finalizer goroutine
			time.Sleep(5 * time.Millisecond)
			if p := tuner.Percent(); want(p) || time.Now().After(deadline) {
				return p
			}
		}
	}
	if p := settle(func(p int) bool { return p > 100 }); p <= 100 {
		t.Fatalf("GOGC %d with a live heap of a few MiB under a 16 MiB threshold, want above 100", p)
	}
	var held []*[1 << 16]byte
	for range 512 { // 32 MiB live, twice the threshold
		held = append(held, new([1 << 16]byte))
	}
	if p := settle(func(p int) bool { return p == 50 }); p != 50 {
		t.Fatalf("GOGC %d with 32 MiB live over a 16 MiB threshold, want 50", p)
	}
	if got := debug.SetGCPercent(50); got != 50 {
		t.Fatalf("the runtime's GOGC is %d, the tuner's 50", got)
	}
	runtime.KeepAlive(held)
	held = nil
	if p := settle(func(p int) bool { return p > 100 }); p <= 100 {
		t.Fatalf("GOGC %d once the 32 MiB are garbage, want above 100 again", p)
	}
	tuner.Stop()
	debug.SetGCPercent(77)
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := debug.SetGCPercent(100); got != 77 {
		t.Fatalf("a stopped tuner set GOGC %d", got)
	}
}
