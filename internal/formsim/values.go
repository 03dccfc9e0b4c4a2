package formsim

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// kind selects a question's value generator; it is resolved from the type
// name once, when a question or a type change is created.
type kind uint8

const (
	kUnknown kind = iota // a type this simulator does not know: an object
	kShortAnswer
	kLongAnswer
	kEmail
	kPhone
	kURL
	kColor
	kDropdown
	kMultipleChoice
	kTime
	kCaptcha
	kPassword
	kNumber
	kCurrency
	kSlider
	kStar
	kOpinion
	kCheckbox
	kSwitch
	kCheckboxes
	kMultiSelect
	kRanking
	kImagePicker
	kDate
	kDateTime
	kDateRange
	kFileUpload
	kSignature
	kAudio
	kAddress
	kLocation
	kMatrix
	kTable
	kSubform
	kPayment
	kCalcom
	kCalendly
	kRecordPicker
	kSubmissionPicker
)

func kindOf(typ string) kind {
	switch typ {
	case "ShortAnswer":
		return kShortAnswer
	case "LongAnswer":
		return kLongAnswer
	case "EmailInput":
		return kEmail
	case "PhoneNumber":
		return kPhone
	case "URLInput":
		return kURL
	case "ColorPicker":
		return kColor
	case "Dropdown":
		return kDropdown
	case "MultipleChoice":
		return kMultipleChoice
	case "TimePicker":
		return kTime
	case "Captcha":
		return kCaptcha
	case "Password":
		return kPassword
	case "NumberInput":
		return kNumber
	case "CurrencyInput":
		return kCurrency
	case "Slider":
		return kSlider
	case "StarRating":
		return kStar
	case "OpinionScale":
		return kOpinion
	case "Checkbox":
		return kCheckbox
	case "Switch":
		return kSwitch
	case "Checkboxes":
		return kCheckboxes
	case "MultiSelect":
		return kMultiSelect
	case "Ranking":
		return kRanking
	case "ImagePicker":
		return kImagePicker
	case "DatePicker":
		return kDate
	case "DateTimePicker":
		return kDateTime
	case "DateRange":
		return kDateRange
	case "FileUpload":
		return kFileUpload
	case "Signature":
		return kSignature
	case "AudioRecording":
		return kAudio
	case "Address":
		return kAddress
	case "LocationCoordinates":
		return kLocation
	case "Matrix":
		return kMatrix
	case "Table":
		return kTable
	case "Subform":
		return kSubform
	case "Payment":
		return kPayment
	case "Calcom":
		return kCalcom
	case "Calendly":
		return kCalendly
	case "RecordPicker":
		return kRecordPicker
	case "SubmissionPicker":
		return kSubmissionPicker
	}
	return kUnknown
}

// shape is the JSON kind of a type's values, for empty and misfit answers.
type shape uint8

const (
	shapeString shape = iota
	shapeNumber
	shapeBool
	shapeList
	shapeObject
)

func (k kind) shape() shape {
	switch k {
	case kNumber, kCurrency, kSlider, kStar, kOpinion:
		return shapeNumber
	case kCheckbox, kSwitch:
		return shapeBool
	case kCheckboxes, kMultiSelect, kRanking, kImagePicker, kFileUpload, kSignature, kAudio, kTable, kSubform, kRecordPicker, kSubmissionPicker:
		return shapeList
	case kDateRange, kAddress, kLocation, kMatrix, kPayment, kCalcom, kCalendly, kUnknown:
		return shapeObject
	}
	return shapeString
}

// optionsFor picks the choices of a choice question from its name, so a
// "Department" dropdown does not offer countries.
func optionsFor(k kind, name string) []string {
	lower := strings.ToLower(name)
	switch k {
	case kDropdown:
		if strings.Contains(lower, "department") {
			return departments
		}
		return countries
	case kMultipleChoice:
		if strings.Contains(lower, "contact") {
			return contactPref
		}
		return hearAbout
	case kCheckboxes:
		return products
	case kMultiSelect:
		return interests
	case kRanking:
		return rankables
	case kImagePicker:
		return logos
	case kShortAnswer:
		if strings.Contains(lower, "entreprise") || strings.Contains(lower, "company") {
			return companies
		}
	}
	return nil
}

// person is the respondent of one row, shared by its name-like answers.
type person struct{ first, last int }

func (p person) name() string { return firstNames[p.first] + " " + lastNames[p.last] }

func (p person) appendEmail(b []byte, domain string) []byte {
	b = append(b, asciiFirst[p.first]...)
	b = append(b, '.')
	b = append(b, asciiLast[p.last]...)
	b = append(b, '@')
	return append(b, domain...)
}

// valueCtx is what a value may depend on besides its own random stream.
type valueCtx struct {
	t   int64 // the row's submission time, Unix ms
	who person
}

const (
	dateLayout = "2006-01-02"
	msLayout   = "2006-01-02T15:04:05.000Z"
)

func appendMsTime(b []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(b, msLayout)
}

func appendDate(b []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(b, dateLayout)
}

func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'f', -1, 64) }

func appendHex(b []byte, r *rng, n int) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < n; i++ {
		b = append(b, hex[r.intn(16)])
	}
	return b
}

// appendSubset appends a non-empty subset of opts in their order.
func appendSubset(b []byte, r *rng, opts []string, max int) []byte {
	n := 1 + r.intn(min(max, len(opts)))
	start := r.intn(len(opts))
	b = append(b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, opts[(start+i)%len(opts)])
	}
	return append(b, ']')
}

const dayMs = int64(24 * time.Hour / time.Millisecond)

// appendEmpty appends an empty answer of the shape: "" for text, null or an
// empty list otherwise, as the service does.
func appendEmpty(b []byte, s shape, r *rng) []byte {
	switch {
	case s == shapeString:
		return append(b, `""`...)
	case s == shapeList && r.intn(2) == 0:
		return append(b, `[]`...)
	}
	return append(b, "null"...)
}

// appendMisfit appends a value that does not fit the shape: a string where a
// number belongs, an object where a list belongs, and so on.
func appendMisfit(b []byte, k kind) []byte {
	switch k.shape() {
	case shapeNumber:
		return append(b, `"n/a"`...)
	case shapeBool:
		return append(b, `"yes"`...)
	case shapeList:
		return append(b, `{"unexpected":"object"}`...)
	case shapeObject:
		return append(b, `"see attached"`...)
	}
	switch k {
	case kDate:
		return append(b, `"next Tuesday"`...)
	case kDateTime:
		return append(b, `"yesterday at noon"`...)
	}
	return append(b, `{"text":42}`...)
}

// appendValue appends a realistic value of kind k.
func appendValue(b []byte, k kind, opts []string, r *rng, c *valueCtx) []byte {
	switch k {
	case kShortAnswer:
		if opts != nil {
			return appendString(b, r.pick(opts))
		}
		return appendString(b, c.who.name())
	case kLongAnswer:
		return appendString(b, r.pick(comments))
	case kEmail:
		b = append(b, '"')
		b = c.who.appendEmail(b, r.pick(domains))
		return append(b, '"')
	case kPhone:
		switch r.intn(3) {
		case 0:
			b = append(b, `"+1 415 555 `...)
		case 1:
			b = append(b, `"+44 20 7946 `...)
		default:
			b = append(b, `"+33 1 23 45 `...)
		}
		b = strconv.AppendInt(b, int64(1000+r.intn(9000)), 10)
		return append(b, '"')
	case kURL:
		b = append(b, `"https://www.`...)
		b = append(b, r.pick(domains)...)
		b = append(b, "/portfolio/"...)
		b = append(b, asciiFirst[c.who.first]...)
		return append(b, '"')
	case kColor:
		b = append(b, `"#`...)
		b = appendHex(b, r, 6)
		return append(b, '"')
	case kDropdown, kMultipleChoice:
		return appendString(b, r.pick(opts))
	case kTime:
		h, m := 8+r.intn(12), 15*r.intn(4)
		return append(b, '"', byte('0'+h/10), byte('0'+h%10), ':', byte('0'+m/10), byte('0'+m%10), '"')
	case kCaptcha:
		b = append(b, `"03AFcWeA`...)
		b = appendHex(b, r, 24)
		return append(b, '"')
	case kPassword:
		b = append(b, `"S3cret-`...)
		b = appendHex(b, r, 8)
		return append(b, '"')
	case kNumber:
		if r.intn(5) == 0 {
			return appendFloat(b, float64(r.intn(1000))/4)
		}
		return strconv.AppendInt(b, int64(1+r.intn(250)), 10)
	case kCurrency:
		return appendFloat(b, float64(500+r.intn(500000))/100)
	case kSlider:
		return strconv.AppendInt(b, int64(r.intn(101)), 10)
	case kStar:
		return strconv.AppendInt(b, int64(1+r.intn(5)), 10)
	case kOpinion:
		return strconv.AppendInt(b, int64(r.intn(11)), 10)
	case kCheckbox:
		return strconv.AppendBool(b, r.intn(10) != 0)
	case kSwitch:
		return strconv.AppendBool(b, r.intn(2) == 0)
	case kCheckboxes, kMultiSelect:
		return appendSubset(b, r, opts, 3)
	case kImagePicker:
		return appendSubset(b, r, opts, 2)
	case kRanking:
		start := r.intn(len(opts))
		b = append(b, '[')
		for i := range opts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, opts[(start+i)%len(opts)])
		}
		return append(b, ']')
	case kDate:
		b = append(b, '"')
		b = appendDate(b, c.t-int64(r.intn(20000))*dayMs)
		return append(b, '"')
	case kDateTime:
		at := (c.t + int64(1+r.intn(60*24*30))*60000) / (15 * 60000) * (15 * 60000)
		b = append(b, '"')
		b = appendMsTime(b, at)
		return append(b, '"')
	case kDateRange:
		start := c.t + int64(1+r.intn(60))*dayMs
		b = append(b, `{"start":"`...)
		b = appendDate(b, start)
		b = append(b, `","end":"`...)
		b = appendDate(b, start+int64(r.intn(15))*dayMs)
		return append(b, `"}`...)
	case kFileUpload:
		n := 1 + r.intn(2)
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if i == 0 {
				b = appendFile(b, r, "CV – "+firstNames[c.who.first]+".pdf", "application/pdf")
			} else {
				b = appendFile(b, r, "cover letter (final).docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
			}
		}
		return append(b, ']')
	case kSignature:
		return append(appendFile(append(b, '['), r, "signature.png", "image/png"), ']')
	case kAudio:
		return append(appendFile(append(b, '['), r, "voice-message.webm", "audio/webm"), ']')
	case kAddress:
		a := addresses[r.intn(len(addresses))]
		b = append(b, `{"address":"`...)
		b = strconv.AppendInt(b, int64(1+r.intn(250)), 10)
		b = append(b, ' ')
		b = appendStringBody(b, a.street)
		b = append(b, `","city":`...)
		b = appendString(b, a.city)
		b = append(b, `,"state":`...)
		b = appendString(b, a.state)
		b = append(b, `,"zipCode":`...)
		b = appendString(b, a.zip)
		b = append(b, `,"country":`...)
		b = appendString(b, a.country)
		return append(b, '}')
	case kLocation:
		p := places[r.intn(len(places))]
		b = append(b, `{"latitude":`...)
		b = appendFloat(b, math.Round((p.lat+r.float()/10-0.05)*1e6)/1e6)
		b = append(b, `,"longitude":`...)
		b = appendFloat(b, math.Round((p.lng+r.float()/10-0.05)*1e6)/1e6)
		return append(b, '}')
	case kMatrix:
		b = append(b, '{')
		for i, row := range matrixRows {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, row)
			b = append(b, ':')
			b = appendString(b, r.pick(matrixCols))
		}
		return append(b, '}')
	case kTable:
		n := 1 + r.intn(3)
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"Item":`...)
			b = appendString(b, r.pick(items))
			b = append(b, `,"Quantity":`...)
			b = strconv.AppendInt(b, int64(1+r.intn(10)), 10)
			b = append(b, `,"Unit price":`...)
			b = appendFloat(b, float64(99+r.intn(9900))/100)
			b = append(b, '}')
		}
		return append(b, ']')
	case kSubform:
		n := 1 + r.intn(3)
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			p := person{r.intn(len(firstNames)), r.intn(len(lastNames))}
			b = append(b, `{"Name":`...)
			b = appendString(b, p.name())
			b = append(b, `,"Role":`...)
			b = appendString(b, r.pick(roles))
			b = append(b, `,"Email":"`...)
			b = p.appendEmail(b, r.pick(domains))
			b = append(b, `"}`...)
		}
		return append(b, ']')
	case kPayment:
		return appendPayment(b, r, c, false)
	case kCalcom, kCalendly:
		return appendScheduling(b, r, c)
	case kRecordPicker:
		b = append(b, `[{"id":"rec`...)
		b = appendHex(b, r, 14)
		b = append(b, `","name":`...)
		b = appendString(b, r.pick(companies))
		return append(b, `}]`...)
	case kSubmissionPicker:
		b = append(b, `["`...)
		b = appendHex(b, r, 8)
		b = append(b, '-')
		b = appendHex(b, r, 4)
		b = append(b, '-')
		b = appendHex(b, r, 4)
		b = append(b, '-')
		b = appendHex(b, r, 4)
		b = append(b, '-')
		b = appendHex(b, r, 12)
		return append(b, `"]`...)
	}
	// A type nobody documented yet: some object the client must discard.
	b = append(b, `{"hologram":{"depth":`...)
	b = strconv.AppendInt(b, int64(r.intn(100)), 10)
	b = append(b, `,"hue":`...)
	b = appendString(b, r.pick(matrixCols))
	return append(b, `}}`...)
}

func appendFile(b []byte, r *rng, name, typ string) []byte {
	b = append(b, `{"url":"https://files.example.com/uploads/`...)
	b = appendHex(b, r, 16)
	b = append(b, '/')
	b = appendStringBody(b, url.PathEscape(name))
	b = append(b, `","filename":`...)
	b = appendString(b, name)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(1000+r.intn(5_000_000)), 10)
	return append(b, '}')
}

// appendScheduling appends a scheduling value object (also the value of the
// Calcom and Calendly question types).
func appendScheduling(b []byte, r *rng, c *valueCtx) []byte {
	start := (c.t + int64(1+r.intn(60*24*14))*60000) / (30 * 60000) * (30 * 60000)
	b = append(b, `{"fullName":`...)
	b = appendString(b, c.who.name())
	b = append(b, `,"email":"`...)
	b = c.who.appendEmail(b, r.pick(domains))
	b = append(b, `","timezone":`...)
	b = appendString(b, r.pick(timezones))
	b = append(b, `,"eventStartTime":"`...)
	b = appendMsTime(b, start)
	b = append(b, `","eventEndTime":"`...)
	b = appendMsTime(b, start+int64(15+15*r.intn(4))*60000)
	b = append(b, `","eventId":"evt_`...)
	b = appendHex(b, r, 12)
	b = append(b, `","eventUrl":"https://calendar.example.com/event/`...)
	b = appendHex(b, r, 12)
	b = append(b, `","rescheduleOrCancelUrl":"https://calendar.example.com/reschedule/`...)
	b = appendHex(b, r, 12)
	b = append(b, `","userId":`...)
	b = strconv.AppendInt(b, int64(1000+r.intn(9000)), 10)
	b = append(b, `,"scheduledUserEmail":"host@example.com","meetingNotes":`...)
	b = appendString(b, r.pick(comments))
	return append(b, '}')
}

// appendPayment appends a payment value object.
func appendPayment(b []byte, r *rng, c *valueCtx, subscription bool) []byte {
	b = append(b, `{"paymentId":"pi_`...)
	b = appendHex(b, r, 16)
	b = append(b, `","processorCustomerId":"cus_`...)
	b = appendHex(b, r, 12)
	b = append(b, `","processorCustomerUrl":"https://payments.example.com/customers/`...)
	b = appendHex(b, r, 12)
	b = append(b, `","processorPaymentUrl":"https://payments.example.com/payments/`...)
	b = appendHex(b, r, 12)
	b = append(b, `","totalAmount":`...)
	b = appendFloat(b, float64(100+r.intn(100000))/100)
	b = append(b, `,"currency":`...)
	b = appendString(b, [...]string{"USD", "EUR", "GBP"}[r.intn(3)])
	b = append(b, `,"email":"`...)
	b = c.who.appendEmail(b, r.pick(domains))
	b = append(b, '"')
	if r.intn(4) == 0 {
		b = append(b, `,"discountCode":"SPRING10"`...)
	}
	b = append(b, `,"status":`...)
	b = appendString(b, [...]string{"succeeded", "succeeded", "succeeded", "pending", "failed"}[r.intn(5)])
	if subscription {
		b = append(b, `,"processorSubscriptionId":"sub_`...)
		b = appendHex(b, r, 12)
		b = append(b, '"')
	}
	return append(b, '}')
}
