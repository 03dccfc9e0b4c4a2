package shutdown

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestInterruption(t *testing.T) {
	for _, tc := range []struct {
		sig  os.Signal // nil: none came
		code int
		ok   bool
	}{
		{nil, 0, false},
		{syscall.SIGINT, 130, true},
		{syscall.SIGTERM, 143, true},
	} {
		s := New()
		if tc.sig != nil {
			s.Stop(func() {}, tc.sig)
		}
		if code, ok := s.Interruption(); code != tc.code || ok != tc.ok {
			t.Errorf("signal %v: (%d, %v), want (%d, %v)", tc.sig, code, ok, tc.code, tc.ok)
		}
	}
}

// TestStopDrainsThenCancels: the first signal closes Stopping and drains
// at once; the cancel waits for the grace.
func TestStopDrainsThenCancels(t *testing.T) {
	s := New()
	drained := make(chan struct{})
	s.OnStop(func() { close(drained) }, 50*time.Millisecond)
	cancelled := make(chan struct{})
	s.Stop(func() { close(cancelled) }, syscall.SIGTERM)
	select {
	case <-s.Stopping():
	default:
		t.Fatal("Stopping is open after the first signal")
	}
	select {
	case <-drained:
	default:
		t.Fatal("the first signal did not drain")
	}
	select {
	case <-cancelled:
		t.Fatal("cancelled before the grace")
	default:
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("not cancelled after the grace")
	}
}

// TestStopWithoutDrainCancels: a command that registered nothing to drain
// stops at once.
func TestStopWithoutDrainCancels(t *testing.T) {
	s := New()
	cancelled := false
	s.Stop(func() { cancelled = true }, syscall.SIGINT)
	if !cancelled {
		t.Fatal("not cancelled at once")
	}
}
