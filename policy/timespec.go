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

// ParseTime reads a point in time relative to now: a duration ago ("2h",
// "2h ago", "7d", "3 days ago", "1y", git's "2.hours.ago"; months and years
// count on the calendar), "now", "today", "yesterday", an RFC 3339 time,
// or a date and time in now's zone ("2026-11-20", "2026-11-20 15:04").
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "now":
		return now, nil
	case "today":
		y, m, d := now.Date()
		return time.Date(y, m, d, 0, 0, 0, 0, now.Location()), nil
	case "yesterday":
		y, m, d := now.AddDate(0, 0, -1).Date()
		return time.Date(y, m, d, 0, 0, 0, 0, now.Location()), nil
	}
	if sp, err := parseSpan(strings.TrimRight(strings.TrimSuffix(s, "ago"), " .")); err == nil {
		return now.AddDate(-sp.years, -sp.months, 0).Add(-sp.d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (examples: 2h, '3 days ago', 1y, yesterday, 2026-11-20, 2026-11-20T15:04:05Z)", s)
}
