// Package logkey names the log fields every package writes, once (as
// Litestream's log.go does): a line about a stream, a batch or a table
// names it by the same key wherever it is logged.
package logkey

const (
	Account = "account"  // the account a stream belongs to
	Source  = "source"   // forms, scheduling
	Stream  = "stream"   // a form id, or scheduling/bookings
	Table   = "table"    // the destination table
	BatchID = "batch_id" // a batch: its files, its load job
)
