package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// span is a length of time as people write it: calendar years and months,
// and a fixed duration for the rest.
type span struct {
	years, months int
	d             time.Duration
}

// units are the spellings of a unit after a number, git's among them.
var units = map[string]span{
	"s": {d: time.Second}, "sec": {d: time.Second}, "secs": {d: time.Second}, "second": {d: time.Second}, "seconds": {d: time.Second},
	"ms": {d: time.Millisecond},
	"m":  {d: time.Minute}, "min": {d: time.Minute}, "mins": {d: time.Minute}, "minute": {d: time.Minute}, "minutes": {d: time.Minute},
	"h": {d: time.Hour}, "hr": {d: time.Hour}, "hrs": {d: time.Hour}, "hour": {d: time.Hour}, "hours": {d: time.Hour},
	"d": {d: 24 * time.Hour}, "day": {d: 24 * time.Hour}, "days": {d: 24 * time.Hour},
	"w": {d: 7 * 24 * time.Hour}, "wk": {d: 7 * 24 * time.Hour}, "week": {d: 7 * 24 * time.Hour}, "weeks": {d: 7 * 24 * time.Hour},
	"mo": {months: 1}, "month": {months: 1}, "months": {months: 1},
	"y": {years: 1}, "yr": {years: 1}, "year": {years: 1}, "years": {years: 1},
}

// parseSpan reads "1d12h", "90s", "1.5h", "3 days", "1y", "2.hours" (git's
// dotted form): numbers, each followed by a unit, with spaces or dots
// between the parts.
func parseSpan(s string) (span, error) {
	var sp span
	bad := fmt.Errorf("%q is not a duration (examples: 30m, 2h, 7d, 2w, 1y, '3 days')", s)
	rest := strings.TrimSpace(s)
	if rest == "" {
		return sp, fmt.Errorf("empty duration")
	}
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		num := strings.TrimSuffix(rest[:i], ".") // "2.hours": the dot separates
		rest = strings.TrimLeft(rest[i:], " .")
		j := 0
		for j < len(rest) && (rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= 'A' && rest[j] <= 'Z') {
			j++
		}
		unit, ok := units[strings.ToLower(rest[:j])]
		n, err := strconv.ParseFloat(num, 64)
		if num == "" || j == 0 || !ok || err != nil {
			return span{}, bad
		}
		rest = strings.TrimLeft(rest[j:], " .")
		if unit.years+unit.months > 0 {
			if n != float64(int(n)) {
				return span{}, bad // 1.5 months is not a calendar length
			}
			sp.years += unit.years * int(n)
			sp.months += unit.months * int(n)
		}
		sp.d += time.Duration(n * float64(unit.d))
	}
	return sp, nil
}

// ParseDuration reads a duration as operators write it: Go's units (90s,
// 15m, 2h) plus d (days), w (weeks), mo (30 days) and y (365 days), their
// words (3 days, 2 weeks), and combinations such as 1d12h.
func ParseDuration(s string) (time.Duration, error) {
	sp, err := parseSpan(s)
	return sp.d + time.Duration(sp.months)*30*24*time.Hour + time.Duration(sp.years)*365*24*time.Hour, err
}

// ParseTime reads a point in time as operators write it, relative to now:
//
//   - a duration ago, gitmem's way: "2h", "7d", "1y", "3 days ago",
//     "2.hours.ago", "last week", "two weeks ago" (days and shorter are
//     exact seconds; months and years go by the calendar);
//   - "now", "yesterday" (24 hours ago), "midnight" (today at 00:00),
//     "noon" (12:00, today once it has passed, else yesterday's), in
//     order ("yesterday midnight"); "today" is gitmem's, today at 00:00;
//   - "@1700000000": seconds since 1970;
//   - a time with a zone: RFC 3339 or ISO 8601 ("2026-11-20T15:04:05Z",
//     "2026-11-20 15:04:05 +0200");
//   - a date and time without a zone ("2026-11-20 15:04", "2026-11-20T15:04:05"):
//     in now's location (its offset that day);
//   - a day without a time ("2026-11-20", "Nov 20", "20 Nov", "Nov 20 2025";
//     without a year, this year's unless the month is still to come): that
//     day at now's time of day, at now's offset.
//
// Wherever git's approxidate (git log --since/--until, @{...}) reads these
// forms it means the same second (git's own quirks included: a day
// without a time keeps now's time of day and UTC offset). gitmem's
// durations "2h", "7d", "1y" and "today" are its own (git reads the first
// three as the 2nd, 7th and 1st of this month). The caller chooses the
// zone by now's location: the CLI passes the local zone, as git uses.
func ParseTime(s string, now time.Time) (time.Time, error) {
	now = now.Truncate(time.Second) // git's clock has whole seconds, and so do commits
	s = strings.TrimSpace(s)
	if t, ok := unixTime(s, now.Location()); ok {
		return t, nil
	}
	if t, ok := dayWords(strings.ToLower(s), now); ok {
		return t, nil
	}
	if sp, err := parseSpan(spanText(s)); err == nil {
		t := now.In(offsetOf(now)).AddDate(-sp.years, -sp.months, 0).Add(-sp.d)
		return t.In(now.Location()), nil
	}
	for _, layout := range zonedLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range localLayouts {
		if w, err := time.Parse(layout, s); err == nil {
			t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, now.Location())
			if t.Hour() != w.Hour() || t.Minute() != w.Minute() {
				// A time the zone skipped (the hour daylight saving time
				// begins): git (mktime) reads it at the offset before.
				t = wall(t.Add(-24*time.Hour), w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second())
			}
			return t, nil
		}
	}
	if y, m, d, ok := parseDay(s, now); ok {
		return wall(now, y, m, d, now.Hour(), now.Minute(), now.Second()), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (examples: 2h, '3 days ago', 'last week', yesterday, 2026-11-20, 'Nov 20', 2026-11-20T15:04:05, @1700000000)", s)
}

// zonedLayouts and localLayouts are the date-and-time forms, with a zone
// and without one.
var zonedLayouts, localLayouts []string

func init() {
	for _, sep := range []string{"T", " "} {
		for _, clock := range []string{"15:04:05", "15:04"} {
			localLayouts = append(localLayouts, "2006-01-02"+sep+clock)
			for _, zone := range []string{"Z07:00", " Z07:00", "-0700", " -0700"} {
				zonedLayouts = append(zonedLayouts, "2006-01-02"+sep+clock+zone)
			}
		}
	}
}

// offsetOf is a fixed zone at t's UTC offset: where git changes a day's
// fields, it keeps the offset of the time it changed (mktime with its
// daylight saving flag), not the one the zone has on the new day.
func offsetOf(t time.Time) *time.Location {
	name, off := t.Zone()
	return time.FixedZone(name, off)
}

// wall is the day and time given at t's UTC offset, in t's location.
func wall(t time.Time, y int, m time.Month, d, hour, min, sec int) time.Time {
	return time.Date(y, m, d, hour, min, sec, 0, offsetOf(t)).In(t.Location())
}

// unixTime reads "@N" (and git's "@N +0000"): seconds since 1970.
func unixTime(s string, loc *time.Location) (time.Time, bool) {
	rest, ok := strings.CutPrefix(s, "@")
	if !ok {
		return time.Time{}, false
	}
	if num, zone, hasZone := strings.Cut(rest, " "); hasZone {
		if len(zone) != 5 || (zone[0] != '+' && zone[0] != '-') || !allDigits(zone[1:]) {
			return time.Time{}, false
		}
		rest = num
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || !allDigits(rest) {
		return time.Time{}, false
	}
	return time.Unix(n, 0).In(loc), true
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// dayWords reads words among now, yesterday, today, midnight and noon,
// applied in order as git does.
func dayWords(s string, now time.Time) (time.Time, bool) {
	words := strings.Fields(s)
	if len(words) == 0 {
		return time.Time{}, false
	}
	t := now
	for _, w := range words {
		switch w {
		case "now":
		case "yesterday":
			t = t.Add(-24 * time.Hour)
		case "today", "midnight":
			t = wall(t, t.Year(), t.Month(), t.Day(), 0, 0, 0)
		case "noon":
			if t.Hour() < 12 {
				t = t.Add(-24 * time.Hour)
			}
			t = wall(t, t.Year(), t.Month(), t.Day(), 12, 0, 0)
		default:
			return time.Time{}, false
		}
	}
	return t, true
}

var numberWords = map[string]string{"one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
	"six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "last": "1"}

// spanText is a duration ago as parseSpan reads it: "ago" dropped, and a
// leading "last" or number word ("last week", "two days ago") a number.
func spanText(s string) string {
	s = strings.TrimRight(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "ago"), " .")
	if first, rest, ok := strings.Cut(s, " "); ok && numberWords[first] != "" {
		return numberWords[first] + " " + rest
	}
	return s
}

var monthNames = []string{"january", "february", "march", "april", "may", "june", "july",
	"august", "september", "october", "november", "december"}

// month reads a month's name, or its first three letters or more.
func month(w string) (time.Month, bool) {
	w = strings.ToLower(strings.TrimSuffix(w, "."))
	for i, name := range monthNames {
		if len(w) >= 3 && strings.HasPrefix(name, w) {
			return time.Month(i + 1), true
		}
	}
	return 0, false
}

// parseDay reads a day without a time: 2026-11-20, Nov 20, 20 Nov,
// Nov 20 2025, Nov 20, 2025 or 20 Nov 2025. Without a year it is this
// year's, or last year's when the month is still to come (as git).
func parseDay(s string, now time.Time) (int, time.Month, int, bool) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.Year(), t.Month(), t.Day(), true
	}
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(f) < 2 || len(f) > 3 {
		return 0, 0, 0, false
	}
	m, ok := month(f[0])
	dayField := f[1]
	if !ok {
		m, ok = month(f[1])
		dayField = f[0]
	}
	if !ok || !allDigits(dayField) || len(dayField) > 2 {
		return 0, 0, 0, false
	}
	d, _ := strconv.Atoi(dayField)
	y := now.Year()
	if m > now.Month() {
		y--
	}
	if len(f) == 3 {
		if !allDigits(f[2]) || len(f[2]) != 4 {
			return 0, 0, 0, false
		}
		y, _ = strconv.Atoi(f[2])
	}
	if d < 1 || time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Day() != d { // not a day of that month
		return 0, 0, 0, false
	}
	return y, m, d, true
}
