package app

import (
	"errors"
	"testing"
	"time"
)

func TestChainWhenRules(t *testing.T) {
	r := Route{Name: "auto", Candidates: []Candidate{
		{Model: "a"},
		{Model: "b", When: []ErrorClass{ClassRateLimited}},
		{Model: "c", When: []ErrorClass{ClassQuotaExhausted}},
		{Model: "d"},
	}}
	t.Run("FirstFailureDecides", func(t *testing.T) {
		ch := &Chain{Route: r}
		if c, _ := ch.Next(); c.Model != "a" {
			t.Fatalf("first %s", c.Model)
		}
		ch.Failed("a", Classification{Class: ClassQuotaExhausted}, nil)
		if c, _ := ch.Next(); c.Model != "c" {
			t.Fatalf("after quota: %s, want c (b only follows rate_limited)", c.Model)
		}
	})
	t.Run("SkippedCandidateKeepsTheLastClass", func(t *testing.T) {
		ch := &Chain{Route: r}
		ch.Next()
		ch.Failed("a", Classification{Class: ClassRateLimited}, nil)
		c, _ := ch.Next()
		if c.Model != "b" {
			t.Fatalf("after rate_limited: %s", c.Model)
		}
		ch.Skip("b", "cooling down")
		if c, _ := ch.Next(); c.Model != "d" {
			t.Fatalf("after skipping b: %s, want d (c needs quota_exhausted; the last class is still rate_limited)", c.Model)
		}
		if _, ok := ch.Next(); ok {
			t.Fatal("the chain did not end")
		}
	})
	t.Run("WhenOnFirstCandidateNeedsAFailure", func(t *testing.T) {
		ch := &Chain{Route: Route{Candidates: []Candidate{{Model: "x", When: []ErrorClass{ClassBackendError}}, {Model: "y"}}}}
		if c, _ := ch.Next(); c.Model != "y" {
			t.Fatalf("first eligible %s", c.Model)
		}
	})
}

func TestChainErr(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	skipped := errors.New("skipped")
	cases := []struct {
		name  string
		fails []Classification
		code  string
		retry time.Duration
	}{
		{"NothingTried", nil, "", 0},
		{"AllTooLarge", []Classification{{Class: ClassRequestTooLarge}, {Class: ClassRequestTooLarge}}, EINVALID, 0},
		{"QuotaEarliestReset", []Classification{{Class: ClassQuotaExhausted, ResetAt: now.Add(time.Hour)}, {Class: ClassRateLimited, RetryAfter: 20 * time.Second}}, ERATELIMIT, 20 * time.Second},
		{"FaultWins", []Classification{{Class: ClassRateLimited}, {Class: ClassBackendError}}, EUPSTREAM, 0},
		{"TooLargeAndQuota", []Classification{{Class: ClassRequestTooLarge}, {Class: ClassQuotaExhausted}}, ERATELIMIT, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := &Chain{Route: Route{Name: "auto"}}
			for i, f := range tc.fails {
				ch.Failed(string(rune('a'+i)), f, nil)
			}
			err := ch.Err(now, skipped)
			if tc.code == "" {
				if err != skipped {
					t.Fatalf("err %v, want the skipped error", err)
				}
				return
			}
			if ErrorCode(err) != tc.code {
				t.Fatalf("code %s, want %s (%v)", ErrorCode(err), tc.code, err)
			}
			if e := AsError(err); e.RetryAfter != tc.retry {
				t.Errorf("retry after %s, want %s", e.RetryAfter, tc.retry)
			}
		})
	}
}

func TestCooldownUntil(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		cls  Classification
		want time.Time
	}{
		{"RateDefault90s", Classification{Class: ClassRateLimited}, now.Add(90 * time.Second)},
		{"RateRetryAfter", Classification{Class: ClassRateLimited, RetryAfter: 7 * time.Second}, now.Add(7 * time.Second)},
		{"RateReset", Classification{Class: ClassRateLimited, ResetAt: now.Add(time.Minute)}, now.Add(time.Minute)},
		{"QuotaReset", Classification{Class: ClassQuotaExhausted, ResetAt: now.Add(5 * time.Hour)}, now.Add(5 * time.Hour)},
		{"QuotaDefault", Classification{Class: ClassQuotaExhausted}, now.Add(time.Hour)},
		{"QuotaResetInThePast", Classification{Class: ClassQuotaExhausted, ResetAt: now.Add(-time.Hour)}, now.Add(time.Hour)},
		{"ManualWeek", Classification{Class: ClassManualAction}, now.Add(7 * 24 * time.Hour)},
		{"Backend30s", Classification{Class: ClassBackendError}, now.Add(30 * time.Second)},
		{"ClientNone", Classification{Class: ClassClientError}, time.Time{}},
		{"TooLargeNone", Classification{Class: ClassRequestTooLarge}, time.Time{}},
		{"SchemaNone", Classification{Class: ClassSchemaInvalid}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CooldownUntil(tc.cls, now, time.Hour); !got.Equal(tc.want) {
				t.Errorf("until %s, want %s", got, tc.want)
			}
		})
	}
	if Retries(ClassRateLimited) != 2 || Retries(ClassBackendError) != 1 || Retries(ClassQuotaExhausted) != 0 || Retries(ClassRequestTooLarge) != 0 {
		t.Error("retry counts")
	}
	if b := Backoff(Classification{RetryAfter: 644 * time.Millisecond}, 1, 0.9); b != 644*time.Millisecond {
		t.Errorf("backoff honours a short Retry-After: %s", b)
	}
	if b := Backoff(Classification{}, 2, 0.5); b != 500*time.Millisecond {
		t.Errorf("second backoff %s, want 500ms at mid jitter", b)
	}
}
