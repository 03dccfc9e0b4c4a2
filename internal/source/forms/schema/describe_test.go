package schema

import (
	"strings"
	"testing"
)

func TestDescribeRedacts(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"jane.doe@example.com"`, "string(20 chars)"},
		{`"Zoë"`, "string(3 chars)"},
		{`""`, "string(0 chars)"},
		{`+4477009001`, "text(11 bytes)"},
		{`-12.5`, "number(5 chars)"},
		{`{"city":"Leeds"}`, "object(16 bytes)"},
		{`[1,2]`, "array(5 bytes)"},
		{`true`, "boolean"},
		{`null`, "null"},
		{`  `, "empty"},
		{`{"a":`, "object(5 bytes)"},
	}
	for _, tt := range tests {
		got := Describe([]byte(tt.in))
		if got != tt.want {
			t.Errorf("Describe(%s) = %q, want %q", tt.in, got, tt.want)
		}
		if inner := strings.Trim(tt.in, `"{}[] `); len(inner) > 4 && strings.Contains(got, inner) {
			t.Errorf("Describe(%s) = %q shows the value", tt.in, got)
		}
	}
}
