package policy

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30m": 30 * time.Minute, "2h": 2 * time.Hour, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "1.5h": 90 * time.Minute, "90s": 90 * time.Second,
		"7 days": 7 * 24 * time.Hour, "1y": 365 * 24 * time.Hour, "2 weeks": 14 * 24 * time.Hour,
		"1 day 12 hours": 36 * time.Hour, "2.hours": 2 * time.Hour, "3mo": 90 * 24 * time.Hour,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "7", "-2h", "h2", "7 fortnights", "1.5y", "2h ago"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 21, 15, 30, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"now":                       now,
		"2h":                        now.Add(-2 * time.Hour),
		"2h ago":                    now.Add(-2 * time.Hour),
		"7d":                        now.AddDate(0, 0, -7),
		"today":                     time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC),
		"yesterday":                 time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
		"2026-11-01":                time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-01 08:15":          time.Date(2026, 11, 1, 8, 15, 0, 0, time.UTC),
		"2026-11-01T08:15:00Z":      time.Date(2026, 11, 1, 8, 15, 0, 0, time.UTC),
		"2026-11-01T08:15:00+02:00": time.Date(2026, 11, 1, 6, 15, 0, 0, time.UTC),
		"3 days ago":                now.AddDate(0, 0, -3),
		"2.hours.ago":               now.Add(-2 * time.Hour),
		"1y":                        time.Date(2025, 11, 21, 15, 30, 0, 0, time.UTC),
		"1 year ago":                time.Date(2025, 11, 21, 15, 30, 0, 0, time.UTC),
		"2 months 1 day ago":        time.Date(2026, 9, 20, 15, 30, 0, 0, time.UTC),
		"1.week.ago":                now.AddDate(0, 0, -7),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "tomorrow-ish", "2026-13-01", "last week", "ago", "3 ago"} {
		if _, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
}
