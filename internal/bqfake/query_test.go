package bqfake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/api/iterator"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// TestQueryRunsOverLoadedRowsAndViews: jobs.query answers what the loaded
// rows hold, through a view too; a nested column or a missing table is
// refused as BigQuery refuses it.
func TestQueryRunsOverLoadedRowsAndViews(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: tsUTC},
		{Name: "_deleted", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "_synced_at", Type: tsUTC},
		{Name: "_batch_id", Type: arrow.BinaryTypes.String},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	tb := setup(t, c, "US", nil)
	data := parquetFile(t, schema, `[
		{"id":"a","v":"2024-05-01T10:00:00.000001Z","_deleted":false,"_synced_at":"2024-05-02T00:00:00Z","_batch_id":"b1","tags":["x"]},
		{"id":"a","v":"2024-05-01T11:00:00Z","_deleted":false,"_synced_at":"2024-05-02T00:00:00Z","_batch_id":"b2","tags":null},
		{"id":"b","v":"2024-05-01T10:00:00Z","_deleted":false,"_synced_at":"2024-05-02T00:00:00Z","_batch_id":"b1","tags":null},
		{"id":"b","v":"2024-05-01T12:00:00Z","_deleted":true,"_synced_at":"2024-05-02T00:00:00Z","_batch_id":"b2","tags":null}]`, parquetsink.EncodeOptions{})
	j, err := load(ctx, tb, data, loadOpts{createIfNeeed: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, ctx, j); st.Err() != nil {
		t.Fatal(st.Err())
	}
	if err := c.Dataset("d").Table("t_latest").Create(ctx, &bigquery.TableMetadata{ViewQuery: sink.LatestQuery("`proj.d.t`", "id", "v")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, q string
		want    []string // rows, fmt.Sprint of each value, sorted
		fails   bool
	}{
		{"group by", "SELECT _batch_id, COUNT(*) AS n FROM `proj.d.t` GROUP BY _batch_id", []string{"[b1 2]", "[b2 2]"}, false},
		{"timestamps keep microseconds", "SELECT `id`, v FROM `proj.d.t` WHERE _batch_id = 'b1' AND id = 'a'", []string{"[a 2024-05-01 10:00:00.000001 +0000 UTC]"}, false},
		{"a view", "SELECT id, v FROM `proj.d.t_latest`", []string{"[a 2024-05-01 11:00:00 +0000 UTC]"}, false},
		{"a nested column", "SELECT tags FROM `proj.d.t`", nil, true},
		{"a missing table", "SELECT id FROM `proj.d.nope`", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runQuery(ctx, c, tc.q)
			if tc.fails {
				if err == nil {
					t.Fatalf("query answered %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func runQuery(ctx context.Context, c *bigquery.Client, q string) ([]string, error) {
	it, err := c.Query(q).Read(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, err
		}
		for i, v := range row {
			if ts, ok := v.(time.Time); ok {
				row[i] = ts.UTC()
			}
		}
		out = append(out, fmt.Sprint(row))
	}
	slices.Sort(out)
	return out, nil
}
