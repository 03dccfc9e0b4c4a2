package oauth

import (
	"regexp"
	"slices"
	"strings"
)

// ParseScopes reads a space- or comma-separated scope list.
func ParseScopes(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
	if len(f) == 0 {
		return nil
	}
	return f
}

// HasScope reports whether granted satisfies needed. An ORG_ scope also
// grants the TEAM_ scope of the same suffix (ORG_PROFILE_READ satisfies
// TEAM_PROFILE_READ), never the reverse.
func HasScope(granted []string, needed string) bool {
	if slices.Contains(granted, needed) {
		return true
	}
	if rest, ok := strings.CutPrefix(needed, "TEAM_"); ok {
		return slices.Contains(granted, "ORG_"+rest)
	}
	return false
}

// requiredRE and hasRE read Cal.com's refusal: "insufficient_scope: token
// does not have the required scopes. Required: X. Token has: A, B".
var (
	requiredRE = regexp.MustCompile(`Required:\s*([A-Z_, ]+?)\.`)
	hasRE      = regexp.MustCompile(`Token has:\s*([A-Z_, ]*)`)
)

// NewScopeError builds the error of a 403 on endpoint, which needs the scope
// needed. The server's message, when it names them, says which scope is
// missing and which the token has; it wins over what syncd believes the
// token has (granted).
func NewScopeError(endpoint, needed string, granted []string, serverMessage string) *ScopeError {
	e := &ScopeError{Endpoint: endpoint, Needed: needed, Granted: granted}
	if m := requiredRE.FindStringSubmatch(serverMessage); m != nil {
		if req := ParseScopes(m[1]); len(req) > 0 {
			e.Needed = strings.Join(req, ", ")
		}
	}
	if m := hasRE.FindStringSubmatch(serverMessage); m != nil {
		e.Granted = ParseScopes(m[1])
	}
	return e
}

// IsScopeRefusal reports whether a 403 message is a scope refusal rather
// than another permission problem.
func IsScopeRefusal(serverMessage string) bool {
	return strings.Contains(serverMessage, "insufficient_scope")
}
