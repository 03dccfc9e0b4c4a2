package icebergsink

// SetBeforeCompactCommit runs f between a compaction's plan and its
// commit (a test's hook, on this sink only).
func (s *Sink) SetBeforeCompactCommit(f func(table string)) {
	s.beforeCompactCommit = f
}
