package formsim

// The catalog: which questions and features each simulated form has. These
// tables are read-only.

// DocumentedTypes are the question types the service documents, in the order
// form 0 asks them.
func DocumentedTypes() []string {
	out := make([]string, len(form0Questions)-len(form0Extras))
	for i := range out {
		out[i] = form0Questions[i].typ
	}
	return out
}

type qdef struct{ typ, name string }

// form0Extras are appended to the 38 documented types: names that differ
// from another only in case ("email" vs "Email"), accents and punctuation,
// and one that starts with a digit, so a schema mapper has to sanitise them.
var form0Extras = []qdef{
	{"ShortAnswer", "email"},
	{"ShortAnswer", "Nom de l'entreprise (société)"},
	{"NumberInput", "2024 revenue (€)"},
}

var form0Questions = append([]qdef{
	{"Address", "Shipping address"},
	{"AudioRecording", "Record a short voice message"},
	{"Calcom", "Book a demo (Cal.com)"},
	{"Calendly", "Schedule a call"},
	{"Captcha", "Captcha"},
	{"Checkbox", "I agree to the terms & conditions"},
	{"Checkboxes", "Which products do you use?"},
	{"ColorPicker", "Favourite colour"},
	{"CurrencyInput", "Budget (USD)"},
	{"DatePicker", "Date of birth"},
	{"DateRange", "Travel dates"},
	{"DateTimePicker", "Preferred appointment time"},
	{"Dropdown", "Country of residence"},
	{"EmailInput", "Email"},
	{"FileUpload", "Upload your CV"},
	{"ImagePicker", "Pick a logo"},
	{"LocationCoordinates", "Where are you?"},
	{"LongAnswer", "Any other comments?"},
	{"Matrix", "Rate our services"},
	{"MultiSelect", "Interests"},
	{"MultipleChoice", "How did you hear about us?"},
	{"NumberInput", "Number of attendees"},
	{"OpinionScale", "How likely are you to recommend us? (0-10)"},
	{"Password", "Choose a password"},
	{"Payment", "Pay the deposit"},
	{"PhoneNumber", "Phone number"},
	{"Ranking", "Rank these features"},
	{"RecordPicker", "Select a record"},
	{"ShortAnswer", "Prénom"},
	{"Signature", "Signature"},
	{"Slider", "Satisfaction (%)"},
	{"StarRating", "Overall rating ★"},
	{"Subform", "Add your team members"},
	{"SubmissionPicker", "Link a previous submission"},
	{"Switch", "Subscribe to our newsletter?"},
	{"Table", "Line items"},
	{"TimePicker", "Preferred time"},
	{"URLInput", "Website / portfolio URL"},
}, form0Extras...)

// Narrow forms always ask these (a text and a number question at least, so
// type-change scenarios have something to change) plus a few of narrowPool.
var narrowBase = []qdef{
	{"ShortAnswer", "Full name"},
	{"EmailInput", "E-mail address"},
	{"NumberInput", "How many people?"},
	{"MultipleChoice", "Préférence de contact"},
	{"Checkbox", "I accept the privacy policy"},
	{"DatePicker", "1st visit date"},
}

var narrowPool = []qdef{
	{"LongAnswer", "What could we do better?"},
	{"StarRating", "Rating"},
	{"Dropdown", "Department"},
	{"MultiSelect", "Topics of interest"},
	{"PhoneNumber", "Mobile / cell"},
	{"Switch", "Contact me again"},
	{"DateTimePicker", "Arrival (date & time)"},
	{"FileUpload", "Attachments"},
	{"Address", "Billing address"},
	{"Slider", "Effort score"},
	{"ShortAnswer", "FULL NAME"},
	{"CurrencyInput", "Amount (£)"},
}

// realisticExtras follow the shuffled narrowPool in a form shaped with
// FormShape.Questions: common types of form 0's list.
var realisticExtras = []qdef{
	{"OpinionScale", "How likely are you to recommend us? (0-10)"},
	{"Checkboxes", "Which products do you use?"},
	{"URLInput", "Website / portfolio URL"},
	{"TimePicker", "Preferred time"},
	{"Matrix", "Rate our services"},
	{"Ranking", "Rank these features"},
}

var formNames = []string{
	"Customer Feedback 2024", "Event Registration", "Job Application", "Support Request",
	"Newsletter Sign-up", "Product Survey (Q3)", "Réservation — Restaurant", "Volunteer Onboarding",
}

var formTags = [][]string{
	{"feedback", "customers"}, {"events"}, {"hr", "recruiting"}, {"support"}, {}, {"product"}, {"fr"}, {"community"},
}

// Choices and pools for generated values: realistic, with accents,
// punctuation, quotes, newlines and emoji so encoders and mappers see them.
var (
	firstNames = []string{"Amélie", "José", "Zoë", "Łukasz", "Siobhán", "Chloé", "Björn", "Nguyễn", "Mary-Jane", "Aiko", "Mohammed", "Tomás", "Fatima", "Liam", "Ana", "Grace"}
	asciiFirst = []string{"amelie", "jose", "zoe", "lukasz", "siobhan", "chloe", "bjorn", "nguyen", "mary-jane", "aiko", "mohammed", "tomas", "fatima", "liam", "ana", "grace"}
	lastNames  = []string{"García", "Müller", "O'Brien", "Dubois", "Kowalski", "Smith", "Nakamura", "Johansson", "da Silva", "Ng", "van der Berg", "Łoś"}
	asciiLast  = []string{"garcia", "muller", "obrien", "dubois", "kowalski", "smith", "nakamura", "johansson", "dasilva", "ng", "vanderberg", "los"}
	domains    = []string{"example.com", "example.org", "mail.example.net", "exemple.fr"}
	comments   = []string{
		`Great service — "would recommend"!`,
		"Delivery was late.\nSecond line: the box was damaged.",
		"Très bien, merci 👍",
		"N/A",
		"Could you call me back after 5pm? My number's on file.",
		"Everything OK; nothing to add.",
		"Price: $49.99 (incl. VAT) — fair.",
		"Tab\tseparated\tthoughts",
		`Back-slash \ and <html> & "stuff"`,
		"日本語のコメントです。",
	}
	countries   = []string{"United States", "France", "Deutschland", "España", "日本", "Côte d'Ivoire", "Brasil", "United Kingdom"}
	hearAbout   = []string{"Search engine", "Friend / colleague", "Social media", "Newsletter", "Other"}
	contactPref = []string{"E-mail", "Téléphone", "SMS", "Courrier"}
	departments = []string{"Sales", "R&D", "Support", "Finance", "Ops"}
	products    = []string{"Forms", "Scheduling", "Payments", "Workflows", "Analytics"}
	interests   = []string{"Music", "Sport", "Travel", "Cooking", "Reading", "Gaming", "Art & design"}
	rankables   = []string{"Speed", "Price", "Quality", "Support"}
	logos       = []string{"Logo A", "Logo B", "Logo C", "Logo D"}
	matrixRows  = []string{"Quality", "Speed", "Price"}
	matrixCols  = []string{"Poor", "Fair", "Good", "Excellent"}
	items       = []string{"Widget", "Gadget", "Sprocket", "Doohickey"}
	roles       = []string{"Designer", "Engineer", "Product manager", "CEO"}
	companies   = []string{"Acme Corp", "Globex", "Initech", "Umbrella GmbH", "Société Générale de Test"}
	timezones   = []string{"Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC"}
	tiers       = []string{"Gold tier", "Silver tier", "Bronze tier"}
	utmSources  = []string{"newsletter", "google", "twitter", "partner-site", ""}
	refs        = []string{"spring_sale", "abc123", "friend", ""}
	addresses   = []struct{ street, city, state, zip, country string }{
		{"Main St", "Springfield", "IL", "62701", "US"},
		{"Rue de la Paix", "Paris", "Île-de-France", "75002", "France"},
		{"Königstraße", "Stuttgart", "Baden-Württemberg", "70173", "Germany"},
		{"Calle Mayor", "Madrid", "Madrid", "28013", "Spain"},
		{"High Street", "Oxford", "Oxfordshire", "OX1 4AA", "United Kingdom"},
	}
	places = []struct{ lat, lng float64 }{
		{48.8566, 2.3522}, {40.7128, -74.006}, {35.6762, 139.6503}, {-33.8688, 151.2093}, {51.5072, -0.1276},
	}
)
