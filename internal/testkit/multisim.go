package testkit

import (
	"net/http/httptest"
	"testing"

	"github.com/syncd-dev/syncd/internal/formsim"
)

// MultiSim is a running many-account Forms API simulator.
type MultiSim struct {
	*formsim.Multi
	BaseURL string // server URL + formsim.BasePath, the same for every account
}

// StartMultiSim serves one account per Config behind one URL (see
// formsim.NewMulti); it stops at cleanup.
func StartMultiSim(t testing.TB, cfgs ...formsim.Config) *MultiSim {
	t.Helper()
	m, err := formsim.NewMulti(cfgs...)
	if err != nil {
		t.Fatalf("start many-account simulator: %v", err)
	}
	ts := httptest.NewServer(m)
	t.Cleanup(func() { ts.Close(); m.Close() })
	return &MultiSim{Multi: m, BaseURL: ts.URL + formsim.BasePath}
}
