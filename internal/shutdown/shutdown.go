// Package shutdown is how a syncd command stops on SIGINT or SIGTERM: the
// first signal stops new work and gives the batches in flight a grace
// period to commit; the second signal, or the end of the grace, cancels
// them (their intents are resolved on the next start). A command that a
// signal stopped exits as shells report it, 128 + the signal's number.
package shutdown

import (
	"context"
	"os"
	"sync"
	"syscall"
	"time"
)

// ExitInterrupted is the exit code of a command stopped by a signal that
// has no number (os.Interrupt elsewhere than on Unix).
const ExitInterrupted = 130

// Shutdown is one command's stop: what the first signal drains, for how
// long, and which signal came. It is safe for concurrent use.
type Shutdown struct {
	mu       sync.Mutex
	stopping chan struct{} // closed at the first signal
	signal   os.Signal     // that first signal
	drain    func()        // stops planning new windows
	grace    time.Duration // how long batches in flight may take to commit
}

// New is a Shutdown no signal has reached.
func New() *Shutdown { return &Shutdown{stopping: make(chan struct{})} }

// Stop is the first signal: drain, then cancel everything after the
// grace; at once when nothing registered a drain.
func (s *Shutdown) Stop(cancel context.CancelFunc, sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signal = sig
	close(s.stopping)
	if s.drain == nil {
		cancel()
		return
	}
	s.drain()
	time.AfterFunc(s.grace, cancel)
}

// Stopping is closed at the first signal.
func (s *Shutdown) Stopping() chan struct{} { return s.stopping }

// Interruption is the exit code of a command a signal stopped: 128 + the
// signal's number, as shells report it (130 for SIGINT, 143 for SIGTERM).
// ok is false when no signal came.
func (s *Shutdown) Interruption() (code int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signal == nil {
		return 0, false
	}
	if n, isSys := s.signal.(syscall.Signal); isSys {
		return 128 + int(n), true
	}
	return ExitInterrupted, true
}

// OnStop registers what the first signal drains and for how long.
func (s *Shutdown) OnStop(drain func(), grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drain, s.grace = drain, grace
}
