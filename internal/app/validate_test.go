package app

import (
	"reflect"
	"testing"
)

// The JSON of validate is its lines, one check each: the text before the
// first ": " names the check, and each line of a message of many lines
// is a check of its own, as it always was.
func TestChecksJSONIsOneCheckPerLine(t *testing.T) {
	var lines string
	for _, c := range []Check{
		{CheckOK, "config"},
		{CheckWarn, "quota: 90% used"},
		{CheckFail, "form f1: no answer: from x\nsecond line"},
	} {
		lines += c.Line() + "\n"
	}
	want := []CheckJSON{
		{Status: "ok", Check: "config"},
		{Status: "warn", Check: "quota", Message: "90% used"},
		{Status: "fail", Check: "form f1", Message: "no answer: from x"},
		{Status: "ok", Check: "second line"},
	}
	if got := ChecksJSON(lines); !reflect.DeepEqual(got, want) {
		t.Errorf("ChecksJSON =\n%+v\nwant\n%+v", got, want)
	}
	if got := ChecksJSON(""); got == nil || len(got) != 0 {
		t.Errorf("ChecksJSON of nothing = %#v, want an empty list", got)
	}
}
