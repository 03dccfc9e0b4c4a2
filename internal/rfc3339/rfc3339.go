// Package rfc3339 reads the one timestamp shape the Forms API sends,
// without time.Parse's layout walk and without a string: every submission
// carries two or three timestamps, and parsing them was 3% of a backfill's
// CPU. Anything else is left to time.Parse, so callers keep its rules.
package rfc3339

import "time"

// Parse reads b as YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm), with 1
// to 9 fraction digits, and returns it in UTC. It accepts only text that
// time.Parse(time.RFC3339Nano, ...) accepts too, as the same instant; ok is
// false for anything else (other shapes, and values out of range), which
// the caller then hands to time.Parse.
func Parse(b []byte) (t time.Time, ok bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year := digits(b[0:4])
	month, day := digits(b[5:7]), digits(b[8:10])
	hour, minute, sec := digits(b[11:13]), digits(b[14:16]), digits(b[17:19])
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	i, nsec := 19, 0
	if b[i] == '.' {
		j := i + 1
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			nsec = nsec*10 + int(b[j]-'0')
			j++
		}
		n := j - (i + 1)
		if n < 1 || n > 9 {
			return time.Time{}, false
		}
		for ; n < 9; n++ {
			nsec *= 10
		}
		i = j
	}
	offset := 0
	switch {
	case i+1 == len(b) && b[i] == 'Z':
	case i+6 == len(b) && (b[i] == '+' || b[i] == '-') && b[i+3] == ':':
		hh, mm := digits(b[i+1:i+3]), digits(b[i+4:i+6])
		if hh < 0 || hh > 23 || mm < 0 || mm > 59 {
			return time.Time{}, false
		}
		if offset = (hh*60 + mm) * 60; b[i] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	secs := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return time.Unix(secs, int64(nsec)).UTC(), true
}

// daysSinceEpoch is the number of days from 1970-01-01 to the given date
// of the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
func daysSinceEpoch(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era-- // floor division
	}
	yoe := y - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	doy := (153*m+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// ParseDate reads b as a date, YYYY-MM-DD, and returns its days since
// 1970-01-01; ok is false for any other text or a day the month lacks.
func ParseDate(b []byte) (days int64, ok bool) {
	if len(b) != 10 || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	year, month, day := digits(b[0:4]), digits(b[5:7]), digits(b[8:10])
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
		return 0, false
	}
	return daysSinceEpoch(year, month, day), true
}

// digits is the value of b's decimal digits, or -1 if any byte is not one.
func digits(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// daysIn is the number of days of month in year (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
