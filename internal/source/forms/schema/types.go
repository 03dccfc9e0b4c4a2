package schema

import "github.com/apache/arrow-go/v18/arrow"

// ColumnType is the warehouse type of a column, independent of Arrow so that
// the pinned schema stays readable JSON.
type ColumnType string

// The column types. Struct and list types have fixed children, listed in
// arrowType.
const (
	TypeString     ColumnType = "string"
	TypeDouble     ColumnType = "double"
	TypeInt64      ColumnType = "int64"
	TypeBool       ColumnType = "bool"
	TypeListString ColumnType = "list_string"
	TypeDate       ColumnType = "date"
	TypeTimestamp  ColumnType = "timestamp"
	TypeDateRange  ColumnType = "date_range"
	TypeFiles      ColumnType = "files"
	TypeAddress    ColumnType = "address"
	TypeLocation   ColumnType = "location"
	TypeJSON       ColumnType = "json"
	TypeScheduling ColumnType = "scheduling"
	TypePayment    ColumnType = "payment"
	TypeDocuments  ColumnType = "documents"
)

// SourceKind says where a column's values come from.
type SourceKind string

// The source kinds. KindVariantJSON is a <column>__v_json companion that keeps
// the values which did not fit its parent column.
const (
	KindFixed        SourceKind = "fixed"
	KindLineage      SourceKind = "lineage"
	KindQuestion     SourceKind = "question"
	KindCalculation  SourceKind = "calculation"
	KindURLParameter SourceKind = "url_parameter"
	KindScheduling   SourceKind = "scheduling"
	KindPayment      SourceKind = "payment"
	KindVariantJSON  SourceKind = "variant_json"
)

// questionTypes maps the 38 documented question types to their column type.
// Password maps to "": it is known but never exported.
var questionTypes = map[string]ColumnType{
	"ShortAnswer":         TypeString,
	"LongAnswer":          TypeString,
	"EmailInput":          TypeString,
	"PhoneNumber":         TypeString,
	"URLInput":            TypeString,
	"ColorPicker":         TypeString,
	"Dropdown":            TypeString,
	"MultipleChoice":      TypeString,
	"TimePicker":          TypeString,
	"Captcha":             TypeString,
	"NumberInput":         TypeDouble,
	"CurrencyInput":       TypeDouble,
	"Slider":              TypeDouble,
	"StarRating":          TypeInt64,
	"OpinionScale":        TypeInt64,
	"Checkbox":            TypeBool,
	"Switch":              TypeBool,
	"Checkboxes":          TypeListString,
	"MultiSelect":         TypeListString,
	"Ranking":             TypeListString,
	"ImagePicker":         TypeListString,
	"DatePicker":          TypeDate,
	"DateTimePicker":      TypeTimestamp,
	"DateRange":           TypeDateRange,
	"FileUpload":          TypeFiles,
	"Signature":           TypeFiles,
	"AudioRecording":      TypeFiles,
	"Address":             TypeAddress,
	"LocationCoordinates": TypeLocation,
	"Matrix":              TypeJSON,
	"Table":               TypeJSON,
	"Subform":             TypeJSON,
	"Payment":             TypeJSON,
	"Calcom":              TypeJSON,
	"Calendly":            TypeJSON,
	"RecordPicker":        TypeJSON,
	"SubmissionPicker":    TypeJSON,
	"Password":            "",
}

// KnownQuestionType reports whether typ is one of the documented question
// types (case-sensitive, as the API sends them). Answers of any other type
// are discarded, as the contract asks.
func KnownQuestionType(typ string) bool {
	_, ok := questionTypes[typ]
	return ok
}

// mapType is the column type of a source of kind k and source type typ.
// export is false for a known type that is never exported (Password); known
// is false for a question type that is not documented.
func mapType(k SourceKind, typ string) (ct ColumnType, export, known bool) {
	switch k {
	case KindQuestion:
		ct, known = questionTypes[typ]
		return ct, known && ct != "", known
	case KindCalculation:
		if typ == "number" {
			return TypeDouble, true, true
		}
		return TypeString, true, true // text, duration and anything new
	case KindURLParameter:
		return TypeString, true, true
	case KindScheduling:
		return TypeScheduling, true, true
	case KindPayment:
		return TypePayment, true, true
	}
	return "", false, false
}

// typeless is the column type given to an answer that names no type and
// belongs to a source the table has never seen: JSON text keeps any value.
func typeless(k SourceKind) ColumnType {
	if k == KindQuestion {
		return TypeJSON
	}
	ct, _, _ := mapType(k, "")
	return ct
}

// childKind is the scalar type of one child of a struct column.
type childKind uint8

const (
	childString childKind = iota
	childDouble
	childInt64
	childDate
	childTimestamp
)

// structSpec describes a struct column: the JSON key each child is read from,
// its snake_case name in the warehouse and its type.
type structSpec struct {
	keys  []string
	names []string
	kinds []childKind
}

func (s *structSpec) arrowType() *arrow.StructType {
	fields := make([]arrow.Field, len(s.keys))
	for i := range s.keys {
		fields[i] = arrow.Field{Name: s.names[i], Type: childArrowType(s.kinds[i]), Nullable: true}
	}
	return arrow.StructOf(fields...)
}

func (s *structSpec) index(key []byte) int {
	for i, k := range s.keys {
		if k == string(key) {
			return i
		}
	}
	return -1
}

// The struct shapes. Keys are the API's; names are the warehouse's.
var (
	specDateRange = &structSpec{
		keys:  []string{"start", "end"},
		names: []string{"start", "end"},
		kinds: []childKind{childDate, childDate},
	}
	specFile = &structSpec{
		keys:  []string{"url", "filename", "type", "size"},
		names: []string{"url", "filename", "type", "size"},
		kinds: []childKind{childString, childString, childString, childInt64},
	}
	specAddress = &structSpec{
		keys:  []string{"address", "city", "state", "zipCode", "country"},
		names: []string{"address", "city", "state", "zip_code", "country"},
		kinds: []childKind{childString, childString, childString, childString, childString},
	}
	specLocation = &structSpec{
		keys:  []string{"latitude", "longitude"},
		names: []string{"latitude", "longitude"},
		kinds: []childKind{childDouble, childDouble},
	}
	specScheduling = &structSpec{
		keys: []string{"fullName", "email", "timezone", "eventStartTime", "eventEndTime", "eventId",
			"eventUrl", "rescheduleOrCancelUrl", "userId", "scheduledUserEmail", "meetingNotes"},
		names: []string{"full_name", "email", "timezone", "event_start_time", "event_end_time", "event_id",
			"event_url", "reschedule_or_cancel_url", "user_id", "scheduled_user_email", "meeting_notes"},
		kinds: []childKind{childString, childString, childString, childTimestamp, childTimestamp, childString,
			childString, childString, childInt64, childString, childString},
	}
	specPayment = &structSpec{
		keys: []string{"paymentId", "processorCustomerId", "processorCustomerUrl", "processorPaymentUrl",
			"totalAmount", "currency", "email", "discountCode", "status", "processorSubscriptionId"},
		names: []string{"payment_id", "processor_customer_id", "processor_customer_url", "processor_payment_url",
			"total_amount", "currency", "email", "discount_code", "status", "processor_subscription_id"},
		kinds: []childKind{childString, childString, childString, childString,
			childDouble, childString, childString, childString, childString, childString},
	}
	specDocument = &structSpec{
		keys:  []string{"id", "name", "url"},
		names: []string{"id", "name", "url"},
		kinds: []childKind{childString, childString, childString},
	}
)

// structOf is the spec of a struct column type (for files and documents: of
// the list's element), or nil.
func structOf(ct ColumnType) *structSpec {
	switch ct {
	case TypeDateRange:
		return specDateRange
	case TypeFiles:
		return specFile
	case TypeAddress:
		return specAddress
	case TypeLocation:
		return specLocation
	case TypeScheduling:
		return specScheduling
	case TypePayment:
		return specPayment
	case TypeDocuments:
		return specDocument
	}
	return nil
}

// timestampType is every timestamp syncd writes: microseconds, UTC.
var timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func childArrowType(k childKind) arrow.DataType {
	switch k {
	case childDouble:
		return arrow.PrimitiveTypes.Float64
	case childInt64:
		return arrow.PrimitiveTypes.Int64
	case childDate:
		return arrow.FixedWidthTypes.Date32
	case childTimestamp:
		return timestampType
	}
	return arrow.BinaryTypes.String
}

// validType reports whether ct is one of the column types.
func validType(ct ColumnType) bool {
	switch ct {
	case TypeString, TypeDouble, TypeInt64, TypeBool, TypeListString, TypeDate, TypeTimestamp,
		TypeDateRange, TypeFiles, TypeAddress, TypeLocation, TypeJSON, TypeScheduling, TypePayment,
		TypeDocuments:
		return true
	}
	return false
}

// arrowType is the Arrow type of a column type. Tables are validated before
// use, so an unknown type cannot reach it; it falls back to string rather
// than returning nil.
func arrowType(ct ColumnType) arrow.DataType {
	switch ct {
	case TypeDouble:
		return arrow.PrimitiveTypes.Float64
	case TypeInt64:
		return arrow.PrimitiveTypes.Int64
	case TypeBool:
		return arrow.FixedWidthTypes.Boolean
	case TypeListString:
		return arrow.ListOf(arrow.BinaryTypes.String)
	case TypeDate:
		return arrow.FixedWidthTypes.Date32
	case TypeTimestamp:
		return timestampType
	case TypeFiles, TypeDocuments:
		return arrow.ListOf(structOf(ct).arrowType())
	case TypeDateRange, TypeAddress, TypeLocation, TypeScheduling, TypePayment:
		return structOf(ct).arrowType()
	}
	return arrow.BinaryTypes.String // string, json
}
