package app

import (
	"testing"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
)

// The forms are listed first, so that a pass syncs them before the other
// sources, and the receiver's first endpoint is still theirs.
func TestSourceListHoldsTheFormsFirst(t *testing.T) {
	list := sourceList()
	if len(list) < 2 || list[0].Name() != poller.SourceForms || list[1].Name() != scheduling.Name {
		names := make([]string, len(list))
		for i, s := range list {
			names[i] = s.Name()
		}
		t.Fatalf("sourceList = %v, want forms, then scheduling", names)
	}
	eps := webhookEndpoints(list)
	if len(eps) < 2 || eps[0].Source() != poller.SourceForms || eps[1].Source() != scheduling.Name {
		t.Fatalf("webhookEndpoints start with %d endpoints, want the forms' then the bookings'", len(eps))
	}
}
