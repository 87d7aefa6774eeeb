package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration as operators write it: Go's units (90s,
// 15m, 2h) plus d (days) and w (weeks), and combinations such as 1d12h.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '.' {
			j++
		}
		if i == 0 || j == i {
			return 0, fmt.Errorf("%q is not a duration (examples: 30m, 2h, 7d, 2w)", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (examples: 30m, 2h, 7d, 2w)", s)
		}
		var unit time.Duration
		switch rest[i:j] {
		case "w":
			unit = 7 * 24 * time.Hour
		case "d":
			unit = 24 * time.Hour
		case "h":
			unit = time.Hour
		case "m":
			unit = time.Minute
		case "s":
			unit = time.Second
		case "ms":
			unit = time.Millisecond
		default:
			return 0, fmt.Errorf("%q is not a duration (examples: 30m, 2h, 7d, 2w)", s)
		}
		total += time.Duration(n * float64(unit))
		rest = rest[j:]
	}
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	return total, nil
}

// ParseTime reads a point in time relative to now: a duration ago ("2h",
// "2h ago", "7d"), "now", "today", "yesterday", an RFC 3339 time, or a date
// and time in now's zone ("2026-11-20", "2026-11-20 15:04").
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
	if d, err := ParseDuration(strings.TrimSuffix(s, " ago")); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (examples: 2h, 7d, yesterday, 2026-11-20, 2026-11-20T15:04:05Z)", s)
}
