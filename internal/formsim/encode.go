package formsim

import (
	"strconv"
	"unicode/utf8"
)

// Pages are written by hand into a reused buffer: the values are generated
// straight into JSON, with no intermediate maps or reflection. Output is
// valid JSON that encoding/json decodes to the same values (tests check).

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendStringBody(b, s)
	return append(b, '"')
}

// appendStringBody appends s JSON-escaped, without quotes. Like
// encoding/json it replaces invalid UTF-8 with U+FFFD and escapes U+2028 and
// U+2029; unlike it, it leaves <, > and & alone (this is not HTML).
func appendStringBody(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// rowRef is one row to render, copied out of the server's state under its
// lock: the index record, the edit time if the row was edited, and the
// created row for ordinals past the generated ones.
type rowRef struct {
	r       rec
	updated int64 // lastUpdatedAt after an edit, Unix ms; 0: never edited
	cr      *createdRow
}

// renderOpts are the per-request choices that change a row's JSON.
type renderOpts struct {
	editLink bool
	badRate  float64 // Faults.BadValueRate
}

const (
	emptyRate = 0.03   // share of answers left empty ("" or null)
	badSalt   = 0xbad5 // separates the misfit decision from the value stream
)

func (v *formView) rowSeed(ord uint32) uint64 { return mix64(v.key ^ uint64(ord+1)*golden) }

// generated reports whether the row's answers come from the generator.
func (ref *rowRef) generated() bool { return ref.cr == nil || ref.cr.generated }

// appendSubmission appends one submission object; it returns the buffer
// and how many answers were made not to fit their type.
func (v *formView) appendSubmission(b []byte, ref rowRef, o renderOpts) ([]byte, int) {
	ord, t := ref.r.ord, ref.r.t
	seed := v.rowSeed(ord)
	rr := newRng(seed)
	c := valueCtx{t: t, who: person{rr.intn(len(firstNames)), rr.intn(len(lastNames))}}
	gen := ref.generated()

	b = append(b, `{"submissionId":"`...)
	b = v.ids.appendID(b, v.idx, ord)
	b = append(b, `","submissionTime":"`...)
	b = appendMsTime(b, t)
	updated := t
	switch {
	case ref.updated != 0:
		updated = ref.updated
	case ref.cr != nil:
		updated = ref.cr.updated
	case ref.r.cls != classInProgress && rr.intn(8) == 0:
		// Some were edited after submitting; never past the history's end.
		updated = max(t, min(t+60000+int64(rr.intn(int(3*dayMs))), v.endMs-1))
	}
	b = append(b, `","lastUpdatedAt":"`...)
	b = appendMsTime(b, updated)
	b = append(b, '"')
	if v.startedAt && gen {
		b = append(b, `,"startedAt":"`...)
		b = appendMsTime(b, t-20000-int64(rr.intn(25*60000)))
		b = append(b, '"')
	}

	b = append(b, `,"questions":[`...)
	b, bad := v.appendQuestions(b, ref, o, &c, seed, false)
	b = append(b, ']')

	b = append(b, `,"calculations":[`...)
	for i, f := range v.calcs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.prefix...)
		b = appendCalc(b, f.Type, newRng(mix64(seed^f.key)))
		b = append(b, '}')
	}
	b = append(b, `],"urlParameters":[`...)
	if gen {
		for i, f := range v.urlParams {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f.prefix...)
			pr := newRng(mix64(seed ^ f.key))
			opts := utmSources
			if f.Name == "ref" {
				opts = refs
			}
			b = appendString(b, pr.pick(opts))
			b = append(b, '}')
		}
	} else {
		for i, p := range ref.cr.urlParams {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, p.ID)
			b = append(b, `,"name":`...)
			b = appendString(b, p.Name)
			b = append(b, `,"value":`...)
			b = appendString(b, p.Value)
			b = append(b, '}')
		}
	}
	b = append(b, ']')

	if v.quiz && gen && ref.r.cls != classInProgress {
		b = append(b, `,"quiz":{"score":`...)
		b = strconv.AppendInt(b, int64(rr.intn(11)), 10)
		b = append(b, `,"maxScore":10}`...)
	} else {
		b = append(b, `,"quiz":{}`...)
	}
	if len(v.sched) > 0 {
		b = v.appendEntries(b, ref, v.sched, seed, &c, false)
	}
	if len(v.pays) > 0 {
		b = v.appendEntries(b, ref, v.pays, seed, &c, true)
	}
	if v.login && gen {
		b = append(b, `,"login":{"email":"`...)
		b = c.who.appendEmail(b, domains[0])
		b = append(b, `"}`...)
	}
	if v.documents {
		b = append(b, `,"documents":[`...)
		if gen && ref.r.cls != classInProgress {
			b = append(b, `{"id":"doc_`...)
			b = appendHex(b, &rr, 10)
			b = append(b, `","name":"Invoice `...)
			b = strconv.AppendInt(b, int64(ord)+1000, 10)
			b = append(b, `.pdf","url":"https://files.example.com/documents/`...)
			b = appendHex(b, &rr, 16)
			b = append(b, `.pdf"}`...)
		}
		b = append(b, ']')
	}
	if o.editLink {
		b = append(b, `,"editLink":"https://forms.example.com/t/`...)
		b = append(b, v.id...)
		b = append(b, "?session="...)
		b = v.ids.appendID(b, v.idx, ord)
		b = append(b, '"')
	}
	return append(b, '}'), bad
}

// appendQuestions appends the answers of a row: as JSON objects, or with
// valuesOnly just the values separated by NUL bytes (which JSON output never
// contains), for the search filter.
func (v *formView) appendQuestions(b []byte, ref rowRef, o renderOpts, c *valueCtx, seed uint64, valuesOnly bool) ([]byte, int) {
	bad := 0
	half := len(v.questions) / 2
	for i, q := range v.questions {
		e := q.epochAt(ref.r.ord)
		if valuesOnly {
			b = append(b, 0)
		} else {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, e.prefix...)
		}
		switch {
		case ref.r.ord < q.since:
			b = append(b, "null"...)
		case !ref.generated():
			if raw, ok := ref.cr.answers[q.id]; ok {
				b = append(b, raw...)
			} else {
				b = append(b, "null"...)
			}
		case ref.r.cls == classInProgress && i >= half:
			b = append(b, "null"...) // not reached yet
		default:
			qs := mix64(seed ^ q.key)
			qr := newRng(qs)
			switch {
			case o.badRate > 0 && float64(mix64(qs^badSalt)>>11)/(1<<53) < o.badRate:
				b = appendMisfit(b, e.kind)
				bad++
			case qr.chance(emptyRate):
				b = appendEmpty(b, e.kind.shape(), &qr)
			default:
				b = appendValue(b, e.kind, q.opts, &qr, c)
			}
		}
		if !valuesOnly {
			b = append(b, '}')
		}
	}
	return b, bad
}

// appendCalc appends a calculation value: always a string, even for numbers.
func appendCalc(b []byte, typ string, r rng) []byte {
	if r.chance(emptyRate) {
		return append(b, `""`...)
	}
	switch typ {
	case "number":
		b = append(b, '"')
		b = strconv.AppendFloat(b, float64(r.intn(100000))/100, 'f', 2, 64)
		return append(b, '"')
	case "duration":
		s := 30 + r.intn(2*3600)
		h, m := s/3600, s/60%60
		s %= 60
		return append(b, '"', byte('0'+h/10), byte('0'+h%10), ':', byte('0'+m/10), byte('0'+m%10), ':', byte('0'+s/10), byte('0'+s%10), '"')
	}
	return appendString(b, r.pick(tiers))
}

// appendEntries appends the scheduling or payments array of a row.
func (v *formView) appendEntries(b []byte, ref rowRef, fs []field, seed uint64, c *valueCtx, payments bool) []byte {
	if payments {
		b = append(b, `,"payments":[`...)
	} else {
		b = append(b, `,"scheduling":[`...)
	}
	n := 0
	for _, f := range fs {
		var raw []byte
		if !ref.generated() {
			m := ref.cr.sched
			if payments {
				m = ref.cr.pays
			}
			var ok bool
			if raw, ok = m[f.ID]; !ok {
				continue
			}
		} else if ref.r.cls == classInProgress {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, f.prefix...)
		if raw != nil {
			b = append(b, raw...)
		} else if r := newRng(mix64(seed ^ f.key)); payments {
			b = appendPayment(b, &r, c, r.intn(5) == 0)
		} else {
			b = appendScheduling(b, &r, c)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}
