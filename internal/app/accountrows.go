package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// AccountsTable is the accounts as `syncd accounts` lists them: its header
// and one row per account.
func AccountsTable(list []status.Account) (header []string, rows [][]string) {
	header = []string{"ACCOUNT", "FORMS", "BOOKINGS", "SIGN-IN", "ROWS", "LAST SUCCESS", "LAG", "LAST ERROR"}
	rows = make([][]string, 0, len(list))
	for _, a := range list {
		rows = append(rows, []string{a.Name, strconv.Itoa(a.Forms), yesNo(a.Bookings), signInText(a.SignIn), strconv.FormatInt(a.Rows, 10),
			timeText(a.LastSuccess), lagText(a.LagSeconds), textfmt.OrDash(a.LastError)})
	}
	return header, rows
}

// NotConfiguredNote names the streams the state still holds of the
// account that the configuration no longer names; "" when there are none.
func NotConfiguredNote(a status.Account) string {
	n := len(a.NotConfigured)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("account %s: the state still holds %s the configuration no longer names, not synced and not counted above: %s (`syncd state forget ID --yes` removes a record)",
		a.Name, textfmt.Plural(int64(n), "stream"), strings.Join(a.NotConfigured, ", "))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func signInText(s *status.SignIn) string {
	switch {
	case s == nil:
		return "-"
	case s.Error != "":
		return "unreadable"
	case !s.SignedIn:
		return "not signed in"
	default:
		return textfmt.OrDash(s.User)
	}
}

func timeText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func lagText(s *float64) string {
	if s == nil {
		return "-"
	}
	return textfmt.Age(time.Duration(*s * float64(time.Second)))
}
