package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/syncd-dev/syncd/internal/config"
)

// The webhooks a source registers at its service, so that the service
// announces its changes to the receiver (internal/webhook) between
// scheduled passes. The app keeps the state's record of them (their ids)
// and decides when to register: the source says what a webhook covers,
// builds its URL and secret, and makes the requests.

// WebhookSource is a Source whose accounts register webhooks
// (WebhookRegistrar): what the app knows of them without opening an
// account (`syncd webhooks`, a delivery for another replica's account).
type WebhookSource interface {
	// Webhooks describes the source's webhooks.
	Webhooks() WebhookInfo
	// Receives reports whether a delivery for stream (empty: for the
	// webhook of all the account's streams) may be acct's, as its
	// configuration says: what a replica of a shared state answers for
	// an account another replica has open.
	Receives(acct config.Account, stream string) bool
}

// WebhookInfo is what one of a source's webhooks covers, and the words
// the app logs its registration with.
type WebhookInfo struct {
	// Covers names what one webhook covers when it covers all of an
	// account's streams of the source (the bookings: one webhook per
	// user), as `syncd webhooks` lists it; its deliveries name no stream.
	// Empty: each stream has its own webhook, named by the stream's id
	// (the forms: one per form).
	Covers string
	// Failed is the warning of a failed registration: what then arrives
	// by polling, until the next pass tries again.
	Failed string
	// NoScope is the warning, said once per process, of a registration
	// refused with ErrNoWebhookScope.
	NoScope string
}

// Webhook is one webhook to register: where its deliveries go.
type Webhook struct {
	// PublicURL is where the service reaches the receiver
	// (sync.webhooks.public_url).
	PublicURL string
	// Secret is the receiver's secret (sync.webhooks.secret): a source
	// derives its path tokens or signing secrets from it.
	Secret []byte
	// Account is the account's name, as the delivery paths carry it.
	Account string
	// Stream is the stream's id (a form's); empty for the webhook of all
	// the account's streams of the source.
	Stream string
}

// Registration is a webhook a registrar registered.
type Registration struct {
	// ID is the service's id of the new webhook.
	ID string
	// Stale is the id of the webhook the new one replaces, which the
	// caller removes (RemoveWebhook) once it recorded the new one; empty
	// when there was none, or the source removed it first (a service that
	// refuses two webhooks at one URL).
	Stale string
}

// ErrNoWebhookScope is a registration the service refused because the
// account's sign-in lacks the scope it takes: its streams arrive by polling
// alone until the account signs in again with it. A registrar's error
// wraps it.
var ErrNoWebhookScope = errors.New("the sign-in lacks the scope to register webhooks")

// WebhookRegistrar is an Account whose service announces its changes by
// webhooks syncd registers, and records in the state by id (which
// WebhookRemover, in source.go, deletes).
type WebhookRegistrar interface {
	WebhookRemover
	// WebhookIdent identifies the registration of w in the state's
	// record: it changes with w's URL and secret, so that a changed
	// public_url or secret registers again. It is a hash (HashIdent): a
	// URL may carry a token.
	WebhookIdent(w Webhook) string
	// RegisterWebhook registers w at the service. old is the id recorded
	// for w, which the new webhook replaces ("": none).
	RegisterWebhook(ctx context.Context, w Webhook, old string) (Registration, error)
}

// WebhookVerifier is a WebhookRegistrar whose service lists its webhooks:
// a recorded webhook is looked up before each pass, and one the service
// lost is registered again. A registrar without it is trusted by the
// record.
type WebhookVerifier interface {
	// WebhookExists reports whether the webhook of id, registered for w,
	// is still active at the service with w's URL. A sign-in that may not
	// list webhooks reports true: the record is all syncd can know.
	WebhookExists(ctx context.Context, w Webhook, id string) (bool, error)
}

// HashIdent is a WebhookIdent of parts (a URL, a signing secret): the
// first 8 bytes of their SHA-256 in hex, parts joined by NUL.
func HashIdent(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}
