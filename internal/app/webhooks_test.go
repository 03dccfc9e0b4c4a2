package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/table"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// TestWebhooksRegisterLookupTrigger: a scheduled pass registers a webhook
// per selected form once; deliveries are looked up against the accounts'
// forms; a triggered pass commits through the engine; a silent webhook is
// registered again; remove deletes them all.
func TestWebhooksRegisterLookupTrigger(t *testing.T) {
	sim := testkit.StartSim(t, formsim.Config{Seed: 9, Forms: 3, Submissions: 20})
	ids := sim.FormIDs()
	dir := t.TempDir()
	cfg := accountsConfig(t, dir, sim.BaseURL, "  webhooks: {public_url: \"http://127.0.0.1:9\", secret: \"0123456789abcdef-secret\"}\n", fmt.Sprintf(`  - {name: acme, api_key: "${KEY}", exclude: [%s]}
  - {name: listed, api_key: "${KEY}", forms: [{id: %s}]}
`, ids[2], ids[0]))
	ctx := context.Background()
	a, err := Open(ctx, cfg, zap.NewNop(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	acme := a.Account("acme")
	entries := acme.DaemonEntries()
	defer func() {
		for _, e := range entries {
			e.Close()
		}
	}()
	pass := func() {
		t.Helper()
		for _, r := range entries[0].Pass(ctx) {
			if r.Err != nil {
				t.Fatalf("pass of %s: %v", r.Stream, r.Err)
			}
		}
	}
	pass()
	rec, err := LoadWebhooks(ctx, a.Store, acme.Cfg.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Streams[poller.SourceForms]) != 2 || rec.Streams[poller.SourceForms][ids[0]].ID == "" || rec.Streams[poller.SourceForms][ids[1]].ID == "" || len(sim.Webhooks()) != 2 {
		t.Fatalf("recorded %+v, the service has %+v: want one webhook per selected form", rec.Streams[poller.SourceForms], sim.Webhooks())
	}
	pass()
	if n := len(sim.Webhooks()); n != 2 {
		t.Fatalf("a second pass registered again: %d webhooks", n)
	}

	for _, tc := range []struct {
		s    webhook.Stream
		want webhook.Presence
	}{
		{webhook.Stream{Account: "acme", Source: poller.SourceForms, Stream: ids[0]}, webhook.Here},
		{webhook.Stream{Account: "acme", Source: poller.SourceForms, Stream: ids[2]}, webhook.Unknown}, // excluded
		{webhook.Stream{Account: "acme", Source: poller.SourceForms, Stream: "nope"}, webhook.Unknown}, // not listed
		{webhook.Stream{Account: "listed", Source: poller.SourceForms, Stream: ids[1]}, webhook.Unknown},
		{webhook.Stream{Account: "listed", Source: poller.SourceForms, Stream: ids[0]}, webhook.Here},
		{webhook.Stream{Account: "acme", Source: scheduling.Name}, webhook.Unknown}, // no sign-in configured
		{webhook.Stream{Account: "nobody", Source: poller.SourceForms, Stream: ids[0]}, webhook.Unknown},
	} {
		if got := a.webhookPresence(tc.s); got != tc.want {
			t.Errorf("%+v: presence %d, want %d", tc.s, got, tc.want)
		}
	}

	// A triggered pass commits what arrived.
	if _, err := sim.SubmitNow(ids[0]); err != nil {
		t.Fatal(err)
	}
	// With safety_lag 0s a window ends now: past the submission's
	// millisecond, as the Bell's wait of the safety lag makes it.
	time.Sleep(5 * time.Millisecond)
	if out := a.triggeredPass(ctx, webhook.Stream{Account: "acme", Source: poller.SourceForms, Stream: ids[0]}, nil); out.Busy || !out.OK {
		t.Fatalf("triggered pass: busy %v ok %v", out.Busy, out.OK)
	}
	after, err := a.Store.Get(ctx, table.StreamKey(acme.Cfg.Namespace(), ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sim.ExpectedIDs(ids[0])); after.Rows != int64(n) {
		t.Errorf("after the triggered pass the state counts %d rows of the form's %d", after.Rows, n)
	}

	// The service loses ids[0]'s webhook: the next scheduled pass finds a
	// submission no delivery announced and registers it again.
	lost := rec.Streams[poller.SourceForms][ids[0]].ID
	for _, h := range sim.Webhooks() {
		if fmt.Sprint(h.ID) == lost {
			sim.ForgetWebhook(h.ID)
		}
	}
	if _, err := sim.SubmitNow(ids[0]); err != nil {
		t.Fatal(err)
	}
	pass()
	rec, _ = LoadWebhooks(ctx, a.Store, acme.Cfg.Namespace())
	if got := rec.Streams[poller.SourceForms][ids[0]].ID; got == lost || got == "" || len(sim.Webhooks()) != 2 {
		t.Errorf("the silent webhook %s was not registered again: record %+v, service %+v", lost, rec.Streams[poller.SourceForms], sim.Webhooks())
	}
	// A form with deliveries is not registered again.
	acme.noteDelivery(ids[1], time.Now())
	if _, err := sim.SubmitNow(ids[1]); err != nil {
		t.Fatal(err)
	}
	kept := rec.Streams[poller.SourceForms][ids[1]].ID
	pass()
	rec, _ = LoadWebhooks(ctx, a.Store, acme.Cfg.Namespace())
	if rec.Streams[poller.SourceForms][ids[1]].ID != kept {
		t.Errorf("a form whose deliveries arrive was registered again")
	}

	removed, err := acme.RemoveWebhooks(ctx)
	if err != nil || len(removed) != 2 || len(sim.Webhooks()) != 0 {
		t.Errorf("remove: %v, %+v; the service still has %+v", err, removed, sim.Webhooks())
	}
}
