package app

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Route is a model alias ("auto", "fast", "smart") with an ordered chain of candidates.
type Route struct {
	Name       string
	Candidates []Candidate
	// Sensitive routes (privacy: sensitive) may only use local backends: the config refuses
	// a cloud candidate at start-up, and the gateway checks again before each call.
	Sensitive bool
	// Downgrade lets a request that does not fit the budget with its candidate fall to the
	// cheapest candidate that fits (x-yosan-downgraded says so).
	Downgrade bool
	// CacheTTL, when set, caches the route's complete answers for that long (opt-in).
	CacheTTL time.Duration
	// Implicit marks the one-candidate chain of a model asked for by its own name: it is
	// retried and honours cooldowns like a route's candidate, and its errors name the model.
	Implicit bool
}

// Candidate is one model of a route. With When set, the candidate is tried only when the last
// candidate actually tried failed with one of those classes (a skipped candidate does not
// change the last class).
type Candidate struct {
	Model string
	When  []ErrorClass
}

// eligible reports whether the candidate may be tried after a failure of class last ("" for
// the first attempt).
func (c Candidate) eligible(last ErrorClass) bool {
	if len(c.When) == 0 {
		return true
	}
	return last != "" && slices.Contains(c.When, last)
}

// SetRoutes adds the routes to the catalog. A route's name may not be a model's, and each of
// its candidates must be a model of the catalog. EINVALID names the problem.
func (c *Catalog) SetRoutes(routes []Route) error {
	c.routes = make(map[string]Route, len(routes))
	for _, r := range routes {
		if _, clash := c.models[r.Name]; clash {
			return Errorf(EINVALID, "route %q has the name of a model", r.Name)
		}
		if _, dup := c.routes[r.Name]; dup {
			return Errorf(EINVALID, "route %q is defined twice", r.Name)
		}
		if len(r.Candidates) == 0 {
			return Errorf(EINVALID, "route %q has no candidate", r.Name)
		}
		for _, cand := range r.Candidates {
			m, ok := c.models[cand.Model]
			if !ok {
				return Errorf(EINVALID, "route %q: candidate %q is not a model", r.Name, cand.Model)
			}
			if r.Sensitive && !m.Local {
				return Errorf(EINVALID, "route %q is privacy: sensitive, but its candidate %q runs on provider %q, which is not a local backend (only providers marked local: true may serve sensitive routes)",
					r.Name, cand.Model, m.Provider)
			}
		}
		c.routes[r.Name] = r
	}
	return nil
}

// Route returns the route alias named name, or the implicit one-candidate route when name is
// a model; false when it is neither.
func (c *Catalog) Route(name string) (Route, bool) {
	if r, ok := c.routes[name]; ok {
		return r, true
	}
	if _, ok := c.models[name]; ok {
		return Route{Name: name, Candidates: []Candidate{{Model: name}}, Implicit: true}, true
	}
	return Route{}, false
}

// Routes lists the configured routes by name.
func (c *Catalog) Routes() []Route {
	out := make([]Route, 0, len(c.routes))
	for _, r := range c.routes {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Route) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Cooldown is a provider account or model the gateway is not calling for now.
type Cooldown struct {
	Provider string
	// Model is "" for the whole provider account.
	Model     string
	Class     ErrorClass
	Code      string
	ResetAt   time.Time
	Message   string
	FirstSeen time.Time
	LastSeen  time.Time
	Count     int64
}

// CooldownStore remembers failures that make a provider or model wait.
type CooldownStore interface {
	// Active returns the cooldown in force for provider and model (or the whole provider).
	Active(provider, model string, now time.Time) (Cooldown, bool)
	// Record starts or extends the cooldown a classified failure calls for (nothing for
	// classes that do not cool down).
	Record(ctx context.Context, provider, model string, cls Classification, until time.Time) error
}

// CooldownUntil is when a failure of class cls seen at now stops cooling down: the time the
// provider gave, else about 90 s for throttling, a short pause for a failing backend, a week
// for what needs a human, and defaultQuota for an exhausted window without a reset time. It
// returns the zero time for classes that do not cool down (the caller's faults, bad answers,
// a request too large).
func CooldownUntil(cls Classification, now time.Time, defaultQuota time.Duration) time.Time {
	switch cls.Class {
	case ClassRateLimited:
		switch {
		case !cls.ResetAt.IsZero() && cls.ResetAt.After(now):
			return cls.ResetAt
		case cls.RetryAfter > 0:
			return now.Add(cls.RetryAfter)
		}
		return now.Add(90 * time.Second)
	case ClassQuotaExhausted:
		if !cls.ResetAt.IsZero() && cls.ResetAt.After(now) {
			return cls.ResetAt
		}
		if cls.RetryAfter > 0 {
			return now.Add(cls.RetryAfter)
		}
		return now.Add(defaultQuota)
	case ClassManualAction:
		return now.Add(7 * 24 * time.Hour)
	case ClassBackendError:
		return now.Add(30 * time.Second)
	}
	return time.Time{}
}

// Retries is how many times the same candidate is tried again after a failure of class cls
// before the chain moves on: throttling twice (with backoff), a failing backend once, nothing
// else.
func Retries(cls ErrorClass) int {
	switch cls {
	case ClassRateLimited:
		return 2
	case ClassBackendError:
		return 1
	}
	return 0
}

// Backoff is the wait before retry number n (1-based) of class cls: the provider's
// RetryAfter when short, else 250 ms doubling, spread by jitter in [0, 1).
func Backoff(cls Classification, n int, jitter float64) time.Duration {
	if cls.RetryAfter > 0 && cls.RetryAfter <= 2*time.Second {
		return cls.RetryAfter
	}
	d := 250 * time.Millisecond << (n - 1)
	return time.Duration(float64(d) * (0.5 + jitter))
}

// Chain walks a route's candidates for one request: it says which candidate to try next,
// honouring each candidate's When against the class of the last candidate actually tried, and
// turns the failures into the final answer when every candidate failed.
type Chain struct {
	Route Route
	next  int
	last  ErrorClass
	// Failures are the classified failures of the candidates tried, in order.
	Failures []Failure
	// Skipped are the candidates passed over (cooldown, plan) with the reason.
	Skipped []string
}

// Failure is one candidate's final failure.
type Failure struct {
	Model string
	Cls   Classification
	Err   error
}

// Next returns the next candidate to try, or false when the chain is done.
func (ch *Chain) Next() (Candidate, bool) {
	for ch.next < len(ch.Route.Candidates) {
		c := ch.Route.Candidates[ch.next]
		ch.next++
		if c.eligible(ch.last) {
			return c, true
		}
	}
	return Candidate{}, false
}

// Skip records a candidate passed over without being tried (not usable with the caller's key):
// it does not change the last class. A candidate cooling down is not skipped but recorded with
// Failed, with the class of its cooldown.
func (ch *Chain) Skip(model, why string) {
	ch.Skipped = append(ch.Skipped, model+": "+why)
}

// Failed records the final failure of a candidate that was tried.
func (ch *Chain) Failed(model string, cls Classification, err error) {
	ch.last = cls.Class
	ch.Failures = append(ch.Failures, Failure{Model: model, Cls: cls, Err: err})
}

// Err is the answer when no candidate answered: request_too_large (400) when every tried
// candidate found the request too large, budget and quota classes as 429 with the earliest
// reset, the caller's fault as is, and any fault as 502. skippedErr is returned when nothing
// was tried at all (every candidate skipped).
func (ch *Chain) Err(now time.Time, skippedErr error) error {
	if len(ch.Failures) == 0 {
		return skippedErr
	}
	allTooLarge, quota := true, false
	var reset time.Time
	for _, f := range ch.Failures {
		if f.Cls.Class != ClassRequestTooLarge {
			allTooLarge = false
		}
		if f.Cls.Class == ClassRateLimited || f.Cls.Class == ClassQuotaExhausted {
			quota = true
			if r := f.resetAt(now); !r.IsZero() && (reset.IsZero() || r.Before(reset)) {
				reset = r
			}
		}
	}
	last := ch.Failures[len(ch.Failures)-1]
	var qf *QuotaFull
	if ch.Route.Implicit {
		// One model, asked for by name: say what happened to it.
		var e *Error
		switch {
		case errors.As(last.Err, &qf) && errors.As(last.Err, &e):
			return e // the gateway's own quota window, with its reset
		case allTooLarge:
			return &Error{Code: EINVALID, Param: "messages", Message: "request_too_large: the request is too large for the model '" +
				ch.Route.Name + "' (" + last.Cls.Message + ")", Err: last.Err}
		case quota:
			e := &Error{Code: ERATELIMIT, Message: "the model '" + ch.Route.Name + "' is rate limited or out of quota at its provider; retry later", Err: last.Err}
			if !reset.IsZero() {
				e.RetryAfter = reset.Sub(now)
			}
			return e
		}
		msg := "the model '" + ch.Route.Name + "' is unavailable (" + string(last.Cls.Class) + ")"
		if last.Err == nil && last.Cls.Message != "" {
			msg += ": " + last.Cls.Message // a cooldown
		}
		return &Error{Code: EUPSTREAM, Message: msg, Err: last.Err}
	}
	switch {
	case allTooLarge:
		return &Error{Code: EINVALID, Param: "messages", Message: "request_too_large: the request is too large for every candidate of '" +
			ch.Route.Name + "' (" + last.Cls.Message + ")", Err: last.Err}
	case quota && !hasFault(ch.Failures):
		e := &Error{Code: ERATELIMIT, Message: "every candidate of '" + ch.Route.Name + "' is rate limited or out of quota; retry later", Err: last.Err}
		if !reset.IsZero() {
			e.RetryAfter = reset.Sub(now)
		}
		return e
	}
	return &Error{Code: EUPSTREAM, Message: "every candidate of '" + ch.Route.Name + "' failed (last: " + last.Model + ", " +
		string(last.Cls.Class) + ")", Err: last.Err}
}

func (f Failure) resetAt(now time.Time) time.Time {
	if !f.Cls.ResetAt.IsZero() {
		return f.Cls.ResetAt
	}
	if f.Cls.RetryAfter > 0 {
		return now.Add(f.Cls.RetryAfter)
	}
	return time.Time{}
}

func hasFault(fs []Failure) bool {
	for _, f := range fs {
		switch f.Cls.Class {
		case ClassBackendError, ClassSchemaInvalid, ClassManualAction:
			return true
		}
	}
	return false
}
