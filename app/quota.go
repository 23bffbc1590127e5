package app

import (
	"fmt"
	"strconv"
	"time"
)

// QuotaKind is one of a provider's rate windows.
type QuotaKind string

// Provider quota windows: requests per minute, requests per day, tokens per minute.
const (
	QuotaRPM QuotaKind = "rpm"
	QuotaRPD QuotaKind = "rpd"
	QuotaTPM QuotaKind = "tpm"
)

// Quota is what a provider account allows one model: the providers' own limits, as the
// operator configured them. The gateway holds each window to Limit x (1 - ReserveRatio), so
// other users of the same account (or the provider's rounding) keep some room.
type Quota struct {
	RPM, RPD, TPM int64
	// ReserveRatio is the share of each limit the gateway leaves unused, in [0, 1).
	ReserveRatio float64
	// Location is where the provider's day starts and ends (RPD resets at its midnight:
	// America/Los_Angeles for Gemini).
	Location *time.Location
}

// Effective is the share of limit the gateway may use: floor(limit x (1 - ReserveRatio)),
// where a product that binary floating point leaves a hair under a whole number (100 x 0.71)
// counts as that number.
func (q *Quota) Effective(limit int64) int64 {
	return int64(float64(limit)*(1-q.ReserveRatio) + 1e-9)
}

// QuotaClaim is one request's share of one window: Amount requests or tokens of the window
// [Start, End) of a provider account's model, admitted only while the window's reserved plus
// used amount stays within Limit (the effective limit).
type QuotaClaim struct {
	Provider string
	Model    string
	Kind     QuotaKind
	Start    time.Time
	End      time.Time
	Amount   int64
	Limit    int64
}

// String names the window for messages: "gemini/gemini-2.5-flash rpd 250".
func (c QuotaClaim) String() string {
	return c.Provider + "/" + c.Model + " " + string(c.Kind) + " " + strconv.FormatInt(c.Limit, 10)
}

// Claims returns the windows a request of tokens (its worst case: input plus maximum output)
// takes at now: one per configured limit. Minute windows are aligned on the minute (UTC); day
// windows run from midnight to midnight in q.Location, so a DST day is 23 or 25 hours long.
func (q *Quota) Claims(provider, model string, now time.Time, tokens int64) []QuotaClaim {
	if q == nil {
		return nil
	}
	var out []QuotaClaim
	minute := now.UTC().Truncate(time.Minute)
	if q.RPM > 0 {
		out = append(out, QuotaClaim{provider, model, QuotaRPM, minute, minute.Add(time.Minute), 1, q.Effective(q.RPM)})
	}
	if q.RPD > 0 {
		start, end := DayWindow(now, q.Location)
		out = append(out, QuotaClaim{provider, model, QuotaRPD, start, end, 1, q.Effective(q.RPD)})
	}
	if q.TPM > 0 {
		out = append(out, QuotaClaim{provider, model, QuotaTPM, minute, minute.Add(time.Minute), tokens, q.Effective(q.TPM)})
	}
	return out
}

// DayWindow returns the day containing now in loc, from its midnight to the next.
func DayWindow(now time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// QuotaFull says a candidate cannot take a request because one of its provider quota windows
// has no room (or the request alone is larger than the window: TooLarge). It is not the
// provider's failure: nothing cools down, and the window frees itself at Claim.End.
type QuotaFull struct {
	Claim    QuotaClaim
	TooLarge bool
}

func (e *QuotaFull) Error() string {
	if e.TooLarge {
		return fmt.Sprintf("the request's %d tokens exceed the %s window of %s (effective limit %d)",
			e.Claim.Amount, e.Claim.Kind, e.Claim.Provider+"/"+e.Claim.Model, e.Claim.Limit)
	}
	return fmt.Sprintf("the %s window of %s (effective limit %d) is full until %s",
		e.Claim.Kind, e.Claim.Provider+"/"+e.Claim.Model, e.Claim.Limit, e.Claim.End.UTC().Format(time.RFC3339))
}

// Classification is how a route treats the full window: too large for this candidate,
// exhausted for the day, or throttled for the minute, resetting at the window's end.
func (e *QuotaFull) Classification() Classification {
	switch {
	case e.TooLarge:
		return Classification{Class: ClassRequestTooLarge, Code: "gateway_quota_" + string(e.Claim.Kind), Message: e.Error()}
	case e.Claim.Kind == QuotaRPD:
		return Classification{Class: ClassQuotaExhausted, Code: "gateway_quota_rpd", ResetAt: e.Claim.End, Message: e.Error()}
	}
	return Classification{Class: ClassRateLimited, Code: "gateway_quota_" + string(e.Claim.Kind), ResetAt: e.Claim.End, Message: e.Error()}
}

// quotaError is the client's error for a full window of a model asked for by name.
func quotaError(qf *QuotaFull, model string, now time.Time) error {
	if qf.TooLarge {
		return &Error{Code: EINVALID, Param: "messages", Message: "request_too_large: this request's worst case of " +
			strconv.FormatInt(qf.Claim.Amount, 10) + " tokens is more than the model '" + model + "' may use in a minute (" +
			strconv.FormatInt(qf.Claim.Limit, 10) + " tokens); shorten the input or lower max_tokens", Err: qf}
	}
	what := map[QuotaKind]string{QuotaRPM: "requests per minute", QuotaRPD: "requests per day", QuotaTPM: "tokens per minute"}[qf.Claim.Kind]
	return &Error{Code: ERATELIMIT, Message: "the model '" + model + "' has reached its provider's " + what +
		" limit; retry after " + qf.Claim.End.UTC().Format(time.RFC3339), RetryAfter: qf.Claim.End.Sub(now), Err: qf}
}
