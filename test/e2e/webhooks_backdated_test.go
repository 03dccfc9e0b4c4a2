package e2e

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestWebhookBackdatedSubmissionIsCommitted: the Forms service (formsim) delivers
// a created submission whose submissionTime lies behind the checkpoint (an
// import; forms-api-field-notes: "Created (imported) submissions may set any
// submissionTime"). The receiver takes it (202, accepted), the bell runs a
// pass and syncd_webhook_latency_seconds gets a sample ("the time from a
// delivery to the end of the pass that committed it"), but the triggered
// pass is an incremental one that only plans gaps after the checkpoint: the
// announced row is not committed (it waits for the daily reconcile).
func TestWebhookBackdatedSubmissionIsCommitted(t *testing.T) {
	h := startHooks(t)
	cmd, stderr := h.daemon(t)
	defer stop(t, cmd, stderr)
	form := h.forms.FormIDs()[0]
	time.Sleep(2 * time.Second)
	latBefore := scrape(t, h.addr, `syncd_webhook_latency_seconds_count{source="forms"}`)
	passesBefore := sumMetric(t, h.addr, "syncd_webhook_passes_total")
	ids, err := h.forms.Insert(form, time.Now().Add(-90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	// The delivery's pass: it ends within a few seconds (lag 1s + debounce 250ms).
	if !eventually(20*time.Second, func() bool {
		return scrape(t, h.addr, `syncd_webhook_latency_seconds_count{source="forms"}`) > latBefore
	}) {
		t.Fatalf("no triggered pass observed for the delivery")
	}
	passes := sumMetric(t, h.addr, "syncd_webhook_passes_total") - passesBefore
	duck := testkit.OpenDuck(t)
	table := poller.DefaultTable(form)
	ok := eventually(10*time.Second, func() bool {
		_, in := committedAt(t, duck, h.w.Out, table, "submission_id")[id]
		return in
	})
	if !ok {
		t.Errorf("submission %s (announced by a delivery that was accepted, %.0f triggered pass(es), and counted in syncd_webhook_latency_seconds as committed) is not in the output: the triggered pass left it behind the checkpoint", id, passes)
	}
}
