package httpapi

import (
	"sync"
	"time"
)

// waitLog lets through at most one line per key per second.
type waitLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newWaitLog() *waitLog { return &waitLog{last: make(map[string]time.Time)} }

// waitLogKeys bounds the memory of the throttle: past it, keys silent for a
// second are forgotten (they would be let through anyway).
const waitLogKeys = 1024

// allow reports whether a line for key may be written at now, and if so
// records it.
func (w *waitLog) allow(key string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[key]; ok && now.Sub(t) < time.Second && now.Sub(t) > -time.Second {
		return false
	}
	if len(w.last) >= waitLogKeys {
		for k, t := range w.last {
			if now.Sub(t) >= time.Second {
				delete(w.last, k)
			}
		}
	}
	w.last[key] = now
	return true
}
