// Package clock is the hand-moved clock the contract suites share (the
// store suite's and the source suite's): a test moves it, and whatever
// reads it from a goroutine of its own (a lease's renewal, a service's
// handlers) sees the move.
package clock

import (
	"sync"
	"time"
)

// Clock is a clock a test moves by hand; it is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New starts a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
