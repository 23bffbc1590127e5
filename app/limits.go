package app

import (
	"strconv"
	"sync"
)

// ECONCURRENCY is the error code of a request refused because a concurrency limit is full (web
// maps it to 429 with code "concurrency_limit").
const ECONCURRENCY = "concurrency_limit"

// Limits bounds the upstream calls in flight at once. Zero (or a provider missing from
// PerProvider) means unlimited.
type Limits struct {
	// PerKey bounds the calls of one API key, PerOrg those of one org.
	PerKey, PerOrg int
	// PerProvider bounds the calls to one provider account, by provider name.
	PerProvider map[string]int
}

// Limiter counts the upstream calls in flight per key, org and provider, and refuses a call
// that would exceed a limit. The counts live in this process's memory: with several gateway
// processes, each one enforces the limits on its own calls, so the whole gateway may run up to
// the number of processes times each limit. (Budgets are different: the ledger enforces them
// across processes.) A Limiter is safe for concurrent use.
type Limiter struct {
	limits Limits

	mu       sync.Mutex
	keys     map[string]int
	orgs     map[string]int
	provider map[string]int
}

// NewLimiter returns a Limiter enforcing limits (PerProvider is copied).
func NewLimiter(limits Limits) *Limiter {
	pp := make(map[string]int, len(limits.PerProvider))
	for k, v := range limits.PerProvider {
		pp[k] = v
	}
	limits.PerProvider = pp
	return &Limiter{limits: limits, keys: map[string]int{}, orgs: map[string]int{}, provider: map[string]int{}}
}

// Acquire takes one in-flight slot of the key, the org and the provider together, or none of
// them: it returns ECONCURRENCY naming the first full limit (key, then org, then provider).
// On success the caller must call release on every exit path once the upstream call is over
// (a stream: when its last byte is relayed or it broke); release is idempotent.
func (l *Limiter) Acquire(keyID, orgID, provider string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case full(l.keys[keyID], l.limits.PerKey):
		return nil, concurrencyError("your API key", l.limits.PerKey)
	case full(l.orgs[orgID], l.limits.PerOrg):
		return nil, concurrencyError("your organization", l.limits.PerOrg)
	case full(l.provider[provider], l.limits.PerProvider[provider]):
		return nil, concurrencyError("the upstream provider '"+provider+"'", l.limits.PerProvider[provider])
	}
	l.keys[keyID]++
	l.orgs[orgID]++
	l.provider[provider]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			decrement(l.keys, keyID)
			decrement(l.orgs, orgID)
			decrement(l.provider, provider)
		})
	}, nil
}

// InFlight returns the calls in flight now, by "key:<id>", "org:<id>" and "provider:<name>";
// only non-zero counts appear.
func (l *Limiter) InFlight() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.keys)+len(l.orgs)+len(l.provider))
	for k, n := range l.keys {
		out["key:"+k] = n
	}
	for k, n := range l.orgs {
		out["org:"+k] = n
	}
	for k, n := range l.provider {
		out["provider:"+k] = n
	}
	return out
}

func full(inFlight, limit int) bool { return limit > 0 && inFlight >= limit }

// decrement lowers a count, dropping it at zero so the maps hold only what is in flight.
func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

func concurrencyError(who string, limit int) *Error {
	return &Error{Code: ECONCURRENCY, Message: "too many concurrent requests: " + who + " already has " +
		strconv.Itoa(limit) + " requests in flight, its limit; retry when one finishes"}
}
