package webhook_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// TestRefusedDeliveryBodyDeadline: README promises "A delivery's body must
// arrive within 10 s" (webhook.ReadTimeout). The receiver set that read deadline
// only in read(), which the forms refusals (a wrong path token, an unknown
// form, a path of neither source, a method other than POST) never reach;
// net/http then drained the unread body before writing the refusal, with no
// deadline (the daemon's server has none beyond ReadHeaderTimeout): a forged
// delivery that declared a body and sent only part of it held its
// connection and goroutine for ever. Served as internal/daemon serves it
// (ReadHeaderTimeout 5s, no ReadTimeout).
func TestRefusedDeliveryBodyDeadline(t *testing.T) {
	where := map[webhook.Stream]webhook.Presence{{Account: "acme", Source: "forms", Stream: "f1"}: webhook.Here}
	rc, _ := newReceiver(where)
	srv := httptest.NewUnstartedServer(rc)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Start()
	defer srv.Close()

	good, _ := url.Parse(formsource.WebhookURL("http://syncd.test", testSecret, "acme", "f1"))
	forgedPath := good.Path[:len(good.Path)-4] + "abcd" // a guessed token

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Declares 100 bytes, sends 10, then stalls (a slowloris).
	req := "POST " + forgedPath + " HTTP/1.1\r\nHost: syncd.test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + `{"formId":`
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(webhook.ReadTimeout + 3*time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("a forged delivery with a stalled body got neither an answer nor a closed connection within %s (webhook.ReadTimeout %s): the refusal paths have no body deadline", time.Since(start).Round(time.Second), webhook.ReadTimeout)
		}
		return // the server closed the connection: bounded
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
	if !strings.HasPrefix(resp.Status, "404") {
		t.Logf("status %s", resp.Status)
	}
}
