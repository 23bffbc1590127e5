package app

import (
	"testing"
	"time"
)

func TestDayWindowFollowsDST(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		now       time.Time
		start     string
		length    time.Duration
		endUTCStr string
	}{
		// PST: midnight is 08:00 UTC.
		{"winter", time.Date(2026, 1, 15, 7, 59, 0, 0, time.UTC), "2026-01-14T00:00:00-08:00", 24 * time.Hour, "2026-01-15T08:00:00Z"},
		{"winter after midnight", time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC), "2026-01-15T00:00:00-08:00", 24 * time.Hour, "2026-01-16T08:00:00Z"},
		// 2026-03-08 springs forward: a 23-hour day ending at 07:00 UTC.
		{"spring forward", time.Date(2026, 3, 8, 20, 0, 0, 0, time.UTC), "2026-03-08T00:00:00-08:00", 23 * time.Hour, "2026-03-09T07:00:00Z"},
		// 2026-11-01 falls back: a 25-hour day.
		{"fall back", time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), "2026-11-01T00:00:00-07:00", 25 * time.Hour, "2026-11-02T08:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, end := DayWindow(tc.now, la)
			if got := start.Format(time.RFC3339); got != tc.start {
				t.Errorf("start %s, want %s", got, tc.start)
			}
			if end.Sub(start) != tc.length {
				t.Errorf("length %s, want %s", end.Sub(start), tc.length)
			}
			if got := end.UTC().Format(time.RFC3339); got != tc.endUTCStr {
				t.Errorf("end %s, want %s", got, tc.endUTCStr)
			}
		})
	}
}

func TestQuotaClaims(t *testing.T) {
	var none *Quota
	if c := none.Claims("p", "m", time.Now(), 10); c != nil {
		t.Fatalf("no quota gave claims %v", c)
	}
	q := &Quota{RPM: 10, RPD: 1000, TPM: 1000, ReserveRatio: 0.1, Location: time.UTC}
	now := time.Date(2026, 11, 30, 22, 31, 45, 0, time.UTC)
	got := q.Claims("gemini", "gemini-2.5-flash", now, 300)
	want := []QuotaClaim{
		{"gemini", "gemini-2.5-flash", QuotaRPM, time.Date(2026, 11, 30, 22, 31, 0, 0, time.UTC), time.Date(2026, 11, 30, 22, 32, 0, 0, time.UTC), 1, 9},
		{"gemini", "gemini-2.5-flash", QuotaRPD, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 1, 900},
		{"gemini", "gemini-2.5-flash", QuotaTPM, time.Date(2026, 11, 30, 22, 31, 0, 0, time.UTC), time.Date(2026, 11, 30, 22, 32, 0, 0, time.UTC), 300, 900},
	}
	if len(got) != len(want) {
		t.Fatalf("claims %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) {
			t.Errorf("claim %d window %s..%s, want %s..%s", i, got[i].Start, got[i].End, want[i].Start, want[i].End)
		}
		got[i].Start, got[i].End = want[i].Start, want[i].End
		if got[i] != want[i] {
			t.Errorf("claim %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, tc := range []struct {
		limit int64
		ratio float64
		want  int64
	}{{100, 0.29, 71}, {60, 0.17, 49}, {10, 0.1, 9}, {1, 0, 1}, {250, 0.1, 225}, {3, 0.5, 1}} {
		if got := (&Quota{ReserveRatio: tc.ratio}).Effective(tc.limit); got != tc.want {
			t.Errorf("Effective(%d) with reserve ratio %v = %d, want %d", tc.limit, tc.ratio, got, tc.want)
		}
	}
	only := (&Quota{TPM: 5000, Location: time.UTC}).Claims("p", "m", now, 7)
	if len(only) != 1 || only[0].Kind != QuotaTPM || only[0].Limit != 5000 {
		t.Errorf("tpm-only claims %+v", only)
	}
}

func TestQuotaFullClassification(t *testing.T) {
	end := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		qf    QuotaFull
		class ErrorClass
		reset bool
	}{
		{QuotaFull{Claim: QuotaClaim{Kind: QuotaRPM, End: end}}, ClassRateLimited, true},
		{QuotaFull{Claim: QuotaClaim{Kind: QuotaTPM, End: end}}, ClassRateLimited, true},
		{QuotaFull{Claim: QuotaClaim{Kind: QuotaRPD, End: end}}, ClassQuotaExhausted, true},
		{QuotaFull{Claim: QuotaClaim{Kind: QuotaTPM, End: end, Amount: 9000, Limit: 800}, TooLarge: true}, ClassRequestTooLarge, false},
	}
	for _, tc := range cases {
		cls := tc.qf.Classification()
		if cls.Class != tc.class || cls.ResetAt.Equal(end) != tc.reset {
			t.Errorf("%+v classified %+v, want class %s (reset %v)", tc.qf, cls, tc.class, tc.reset)
		}
	}
	now := end.Add(-90 * time.Second)
	err := quotaError(&QuotaFull{Claim: QuotaClaim{Kind: QuotaRPD, End: end}}, "flash", now)
	if ErrorCode(err) != ERATELIMIT || err.(*Error).RetryAfter != 90*time.Second {
		t.Errorf("full window error %v, want rate_limited with Retry-After 90s", err)
	}
	err = quotaError(&QuotaFull{Claim: QuotaClaim{Kind: QuotaTPM, Amount: 9000, Limit: 800}, TooLarge: true}, "flash", now)
	if ErrorCode(err) != EINVALID {
		t.Errorf("too large error %v, want invalid (request_too_large)", err)
	}
}
