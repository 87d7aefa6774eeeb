package policy

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	now := time.Date(2026, 11, 21, 15, 30, 0, 0, time.UTC)
	day := func(y int, m time.Month, d, h, min, sec int) time.Time {
		return time.Date(y, m, d, h, min, sec, 0, time.UTC)
	}
	for in, want := range map[string]time.Time{
		"now":                       now,
		"2h":                        now.Add(-2 * time.Hour),
		"2h ago":                    now.Add(-2 * time.Hour),
		"7d":                        now.AddDate(0, 0, -7),
		"today":                     day(2026, 11, 21, 0, 0, 0),
		"midnight":                  day(2026, 11, 21, 0, 0, 0),
		"noon":                      day(2026, 11, 21, 12, 0, 0),
		"yesterday":                 day(2026, 11, 20, 15, 30, 0),
		"yesterday midnight":        day(2026, 11, 20, 0, 0, 0),
		"Yesterday Noon":            day(2026, 11, 20, 12, 0, 0),
		"2026-11-01":                day(2026, 11, 1, 15, 30, 0), // git keeps now's time of day
		"2026-11-01 08:15":          day(2026, 11, 1, 8, 15, 0),
		"2026-11-01T08:15:07":       day(2026, 11, 1, 8, 15, 7),
		"2026-11-01T08:15:00Z":      day(2026, 11, 1, 8, 15, 0),
		"2026-11-01T08:15:00+02:00": day(2026, 11, 1, 6, 15, 0),
		"2026-11-01 08:15:00 +0200": day(2026, 11, 1, 6, 15, 0),
		"2026-11-01T08:15:00.25Z":   time.Date(2026, 11, 1, 8, 15, 0, 250e6, time.UTC),
		"@1700000000":               time.Unix(1700000000, 0),
		"@1700000000 +0200":         time.Unix(1700000000, 0),
		"Nov 20":                    day(2026, 11, 20, 15, 30, 0),
		"november 20":               day(2026, 11, 20, 15, 30, 0),
		"20 Nov":                    day(2026, 11, 20, 15, 30, 0),
		"Nov 20 2025":               day(2025, 11, 20, 15, 30, 0),
		"Nov 20, 2025":              day(2025, 11, 20, 15, 30, 0),
		"Dec 1":                     day(2025, 12, 1, 15, 30, 0), // a month still to come: last year's
		"3 days ago":                now.AddDate(0, 0, -3),
		"2.hours.ago":               now.Add(-2 * time.Hour),
		"last week":                 now.AddDate(0, 0, -7),
		"last month":                day(2026, 10, 21, 15, 30, 0),
		"two weeks ago":             now.AddDate(0, 0, -14),
		"1y":                        day(2025, 11, 21, 15, 30, 0),
		"1 year ago":                day(2025, 11, 21, 15, 30, 0),
		"2 months 1 day ago":        day(2026, 9, 20, 15, 30, 0),
		"1.week.ago":                now.AddDate(0, 0, -7),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "tomorrow-ish", "2026-13-01", "Nov 31", "Nov", "Nov 20 25", "ago", "3 ago",
		"last", "@17x", "@", "a while ago", "noonish"} {
		if _, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
}

// TestParseTimeZones: a time without a zone is read in now's location;
// where git changes the fields of a day (a day without a time, months
// back) it keeps now's UTC offset, across a change of daylight saving
// time too. The expected seconds are git 2.39's (GIT_TEST_DATE_NOW=1795000000
// TZ=America/New_York git rev-parse --since=...).
func TestParseTimeZones(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	now := time.Unix(1795000000, 0).In(ny) // 2026-11-18 06:06:40 EST
	for in, want := range map[string]int64{
		"last month":           1792321600, // 2026-10-18 06:06:40 -0500, though that day is EDT
		"2026-10-18":           1792321600,
		"Oct 18":               1792321600,
		"2026-10-18 11:06:40":  1792336000, // a time without a zone: EDT that day
		"last week":            1794395200,
		"yesterday":            1794913600,
		"midnight":             1794978000,
		"noon":                 1794934800, // before noon: yesterday's
		"2026-11-20T15:04:05":  1795205045,
		"2026-11-20T15:04:05Z": 1795187045,
	} {
		got, err := ParseTime(in, now)
		if err != nil || got.Unix() != want {
			t.Errorf("ParseTime(%q) = %v (%d), %v; want %d", in, got, got.Unix(), err, want)
		}
	}
}
