package table

import "github.com/apache/arrow-go/v18/arrow"

// The managed columns: every stream's table carries them, whatever its
// source, and the sinks read them back (the inventory, the version index,
// the latest view). They are named here once.
const (
	// ColBatchID names the batch that wrote a row (Lineage.BatchID).
	ColBatchID = "_batch_id"
	// ColSyncedAt is when syncd fetched the row, UTC (Lineage.SyncedAt).
	ColSyncedAt = "_synced_at"
	// ColDeleted is true on a tombstone row: the record was deleted at
	// its source.
	ColDeleted = "_deleted"
)

// BatchIDField is the Arrow field of ColBatchID: a string every row has.
func BatchIDField() arrow.Field {
	return arrow.Field{Name: ColBatchID, Type: arrow.BinaryTypes.String}
}

// SyncedAtField is the Arrow field of ColSyncedAt: a UTC timestamp in
// microseconds every row has.
func SyncedAtField() arrow.Field {
	return arrow.Field{Name: ColSyncedAt, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}
}

// DeletedField is the Arrow field of ColDeleted; nullable for a table
// whose older rows predate tombstones.
func DeletedField(nullable bool) arrow.Field {
	return arrow.Field{Name: ColDeleted, Type: arrow.FixedWidthTypes.Boolean, Nullable: nullable}
}
