package icebergsink

// SetBeforeCompactCommit runs f between a compaction's plan and its
// commit, until the returned func restores the previous hook.
func SetBeforeCompactCommit(f func(table string)) (restore func()) {
	old := beforeCompactCommit
	beforeCompactCommit = f
	return func() { beforeCompactCommit = old }
}
