package source

import "context"

// Validator is a Source that `syncd validate` checks an account against
// its service with, without syncing: its credentials, and each stream the
// account's configuration names. It is the richer Prober: a check per
// line, each reported as it ends.
type Validator interface {
	// Validate reports each check (ok, and its text: what was checked,
	// and on failure why and the fix; who names the account in it when
	// the configuration has many) and returns how many failed. env.Store
	// reads the state read-only (a sign-in kept there); the API's
	// timeouts in env.Config are validate's, short. (0, false) when the
	// account does not use the source.
	Validate(ctx context.Context, env Env, who string, report func(ok bool, text string)) (failed int, used bool)
}
