package storetest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
)

// Fixture is what the fixtures written before format 3 hold
// (internal/state/testdata: format2.db, a state file of format 2, and
// object-format1.json, a state object of format 1, hold the same state),
// read from the object's JSON without the store.
type Fixture struct {
	// Index is form-a's version index.
	Index map[string]state.Version
	// OpenBatch is form-a's open reconcile batch, OpenCounts what it
	// writes; After is the index once it is committed.
	OpenBatch  string
	OpenCounts state.ReconcileCounts
	After      map[string]state.Version
}

// FixtureBolt and FixtureObject are the fixtures' paths.
var (
	FixtureBolt   = fixturePath("format2.db")
	FixtureObject = fixturePath("object-format1.json")
)

func fixturePath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", name)
}

// legacy is a version as formats before 3 kept it: the record's time and
// its lastUpdatedAt, in Unix microseconds.
type legacy [2]int64

func (v legacy) version() state.Version {
	return state.Version{Time: time.UnixMicro(v[0]).UTC(), Hash: state.TimeVersion(time.UnixMicro(v[1]))}
}

// LoadFixture reads the fixture's form-a.
func LoadFixture(t *testing.T) Fixture {
	t.Helper()
	raw, err := os.ReadFile(FixtureObject)
	if err != nil {
		t.Fatalf("read the fixture: %v", err)
	}
	var doc struct {
		Forms map[string]struct {
			Versions map[string]legacy `json:"versions"`
			Intents  map[string]struct {
				Reconcile bool              `json:"reconcile"`
				Versions  map[string]legacy `json:"versions"`
				Gone      []string          `json:"gone"`
			} `json:"intents"`
		} `json:"forms"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("read the fixture: %v", err)
	}
	a := doc.Forms["form-a"]
	fx := Fixture{Index: map[string]state.Version{}, After: map[string]state.Version{}}
	for id, v := range a.Versions {
		fx.Index[id] = v.version()
		fx.After[id] = v.version()
	}
	if len(a.Intents) != 1 || len(fx.Index) != 41 {
		t.Fatalf("the fixture's form-a has %d intents and %d versions, want 1 and 41", len(a.Intents), len(fx.Index))
	}
	for id, in := range a.Intents {
		fx.OpenBatch = id
		fx.OpenCounts = state.ReconcileCounts{Versions: len(in.Versions), Tombstones: len(in.Gone)}
		for k, v := range in.Versions {
			fx.After[k] = v.version()
		}
		for _, k := range in.Gone {
			delete(fx.After, k)
		}
	}
	return fx
}

// FlipRows flips the low bit of the first digit of the first "rows": in
// raw at or after from (what Place.Damage does); ok is false when there is
// none.
func FlipRows(raw []byte, from int) (out []byte, ok bool) {
	i := bytes.Index(raw[from:], []byte(`"rows":`))
	if i < 0 {
		return raw, false
	}
	i += from + len(`"rows":`)
	if i >= len(raw) || raw[i] < '0' || raw[i] > '9' {
		return raw, false
	}
	out = bytes.Clone(raw)
	out[i] ^= 0x01
	return out, true
}
