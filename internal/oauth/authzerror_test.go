package oauth

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

// TestAuthorizationErrorIsTerminalSafe: a redirect's error and
// error_description come from a URL anyone can craft; the error the
// terminal shows must hold no control characters (an escape sequence that
// rewrites the screen, a new line that fakes more output) and stay short.
func TestAuthorizationErrorIsTerminalSafe(t *testing.T) {
	tests := []struct {
		name, query string
		want        string // must appear, when set
	}{
		{"plain", "error=access_denied&error_description=The+user+said+no", "access_denied (The user said no)"},
		{"escape in the description", "error=access_denied&error_description=" + url.QueryEscape("no\x1b[2J\x1b[1;1Hsigned in\n"), "(no?[2J?[1;1Hsigned in?)"},
		{"new line in the code", "error=" + url.QueryEscape("access_denied\nsyncd: signed in"), "access_denied?syncd: signed in"},
		{"long description", "error=server_error&error_description=" + strings.Repeat("x", 5000), "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = codeFrom(q, "st")
			if err == nil {
				t.Fatal("a refused redirect gave a code")
			}
			msg := err.Error()
			if strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
				t.Errorf("the error holds a control character: %q", msg)
			}
			if len(msg) > 600 {
				t.Errorf("the error is %d bytes long", len(msg))
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("the error %q does not hold %q", msg, tc.want)
			}
		})
	}
}
