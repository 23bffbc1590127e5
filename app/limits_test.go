package app_test

import (
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"yosan/app"
)

func mustAcquire(tb testing.TB, l *app.Limiter, key, org, provider string) func() {
	tb.Helper()
	release, err := l.Acquire(key, org, provider)
	if err != nil {
		tb.Fatalf("Acquire(%s, %s, %s): %v", key, org, provider, err)
	}
	return release
}

func mustConcurrencyError(tb testing.TB, release func(), err error, want string) {
	tb.Helper()
	if err == nil {
		release()
		tb.Fatal("acquired past a full limit")
	}
	if release != nil {
		tb.Fatal("a refused Acquire returned a release func")
	}
	e := app.AsError(err)
	if e == nil || e.Code != app.ECONCURRENCY || !strings.Contains(e.Message, want) {
		tb.Fatalf("error %v: want code %s naming %q", err, app.ECONCURRENCY, want)
	}
}

func mustInFlight(tb testing.TB, l *app.Limiter, want map[string]int) {
	tb.Helper()
	if got := l.InFlight(); !maps.Equal(got, want) {
		tb.Fatalf("in flight %v, want %v", got, want)
	}
}

func TestLimiterAcquire(t *testing.T) {
	tests := []struct {
		name   string
		limits app.Limits
		// held are acquired first; then key/org/provider is tried.
		held               [][3]string
		key, org, provider string
		wantErr            string // "" for success; else the limit named
	}{
		{"OK", app.Limits{PerKey: 2, PerOrg: 2, PerProvider: map[string]int{"openai": 2}},
			[][3]string{{"k1", "o1", "openai"}}, "k1", "o1", "openai", ""},
		{"ErrKeyFull", app.Limits{PerKey: 1},
			[][3]string{{"k1", "o1", "openai"}}, "k1", "o1", "anthropic", "your API key already has 1 requests in flight"},
		{"OtherKeyFree", app.Limits{PerKey: 1},
			[][3]string{{"k1", "o1", "openai"}}, "k2", "o1", "openai", ""},
		{"ErrOrgFull", app.Limits{PerKey: 5, PerOrg: 2},
			[][3]string{{"k1", "o1", "openai"}, {"k2", "o1", "gemini"}}, "k3", "o1", "anthropic", "your organization already has 2"},
		{"OtherOrgFree", app.Limits{PerOrg: 1},
			[][3]string{{"k1", "o1", "openai"}}, "k2", "o2", "openai", ""},
		{"ErrProviderFull", app.Limits{PerProvider: map[string]int{"openai": 2}},
			[][3]string{{"k1", "o1", "openai"}, {"k2", "o2", "openai"}}, "k3", "o3", "openai", "the upstream provider 'openai' already has 2"},
		{"ProviderNotListedIsUnlimited", app.Limits{PerProvider: map[string]int{"openai": 1}},
			[][3]string{{"k1", "o1", "gemini"}, {"k1", "o1", "gemini"}}, "k1", "o1", "gemini", ""},
		{"ProviderZeroIsUnlimited", app.Limits{PerProvider: map[string]int{"openai": 0}},
			[][3]string{{"k1", "o1", "openai"}, {"k1", "o1", "openai"}}, "k1", "o1", "openai", ""},
		{"KeyNamedBeforeOrg", app.Limits{PerKey: 1, PerOrg: 1, PerProvider: map[string]int{"openai": 1}},
			[][3]string{{"k1", "o1", "openai"}}, "k1", "o1", "openai", "your API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := app.NewLimiter(tt.limits)
			for _, h := range tt.held {
				mustAcquire(t, l, h[0], h[1], h[2])
			}
			before := l.InFlight()
			release, err := l.Acquire(tt.key, tt.org, tt.provider)
			if tt.wantErr != "" {
				mustConcurrencyError(t, release, err, tt.wantErr)
				mustInFlight(t, l, before) // nothing taken
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			release()
			mustInFlight(t, l, before)
		})
	}
}

func TestLimiterAllOrNothing(t *testing.T) {
	l := app.NewLimiter(app.Limits{PerKey: 3, PerOrg: 3, PerProvider: map[string]int{"openai": 1}})
	r1 := mustAcquire(t, l, "k1", "o1", "openai")
	// The provider is full; the key and org have room but must not keep a slot for the refusal.
	for range 10 {
		release, err := l.Acquire("k1", "o1", "openai")
		mustConcurrencyError(t, release, err, "provider 'openai'")
	}
	mustInFlight(t, l, map[string]int{"key:k1": 1, "org:o1": 1, "provider:openai": 1})
	// Had the refusals leaked key slots, k1 could not take its two remaining ones elsewhere.
	r2 := mustAcquire(t, l, "k1", "o1", "anthropic")
	r3 := mustAcquire(t, l, "k1", "o1", "gemini")
	mustInFlight(t, l, map[string]int{"key:k1": 3, "org:o1": 3, "provider:openai": 1, "provider:anthropic": 1, "provider:gemini": 1})
	r1()
	r2()
	r3()
	mustInFlight(t, l, map[string]int{})
}

func TestLimiterReleaseIdempotent(t *testing.T) {
	l := app.NewLimiter(app.Limits{PerKey: 2})
	r1 := mustAcquire(t, l, "k1", "o1", "openai")
	r2 := mustAcquire(t, l, "k1", "o1", "openai")
	r1()
	r1() // a deferred release after an explicit one
	r1()
	mustInFlight(t, l, map[string]int{"key:k1": 1, "org:o1": 1, "provider:openai": 1})
	// r2 still holds its slot: one more fits, a second does not.
	r3 := mustAcquire(t, l, "k1", "o1", "openai")
	release, err := l.Acquire("k1", "o1", "openai")
	mustConcurrencyError(t, release, err, "your API key")
	r2()
	r3()
	mustInFlight(t, l, map[string]int{})

	t.Run("Concurrent", func(t *testing.T) {
		l := app.NewLimiter(app.Limits{PerKey: 1})
		r := mustAcquire(t, l, "k", "o", "p")
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r()
			}()
		}
		wg.Wait()
		mustInFlight(t, l, map[string]int{})
	})
}

func TestLimiterZeroIsUnlimited(t *testing.T) {
	l := app.NewLimiter(app.Limits{})
	var releases []func()
	for range 1000 {
		releases = append(releases, mustAcquire(t, l, "k1", "o1", "openai"))
	}
	mustInFlight(t, l, map[string]int{"key:k1": 1000, "org:o1": 1000, "provider:openai": 1000})
	for _, r := range releases {
		r()
	}
	mustInFlight(t, l, map[string]int{})
}

func TestLimiterCopiesLimits(t *testing.T) {
	pp := map[string]int{"openai": 1}
	l := app.NewLimiter(app.Limits{PerProvider: pp})
	pp["openai"] = 0
	mustAcquire(t, l, "k", "o", "openai")
	release, err := l.Acquire("k", "o", "openai")
	mustConcurrencyError(t, release, err, "openai")
}

// maxCounter tracks a count and the highest value it reached.
type maxCounter struct{ cur, max atomic.Int64 }

func (c *maxCounter) inc() {
	n := c.cur.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *maxCounter) dec() { c.cur.Add(-1) }

func TestLimiterUnderLoad(t *testing.T) {
	const goroutines = 500
	limits := app.Limits{PerKey: 3, PerOrg: 5, PerProvider: map[string]int{"openai": 4, "anthropic": 2}}
	keys := []string{"k1", "k2", "k3", "k4"}
	orgOf := map[string]string{"k1": "o1", "k2": "o1", "k3": "o2", "k4": "o2"}
	providers := []string{"openai", "anthropic", "gemini"} // gemini is unlimited

	t.Run("HeldUntilAllTried", func(t *testing.T) {
		// Every goroutine tries once while nobody releases: exactly the limits' worth succeed.
		l := app.NewLimiter(app.Limits{PerKey: 7})
		var ok, refused atomic.Int64
		start := make(chan struct{})
		var tried, wg sync.WaitGroup
		tried.Add(goroutines)
		hold := make(chan struct{})
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				release, err := l.Acquire("k1", "o1", "openai")
				// Count before saying "tried": the main goroutine reads the counts right after
				// the last Done.
				if err != nil {
					refused.Add(1)
					tried.Done()
					return
				}
				ok.Add(1)
				tried.Done()
				<-hold
				release()
			}()
		}
		close(start)
		tried.Wait()
		if ok.Load() != 7 || refused.Load() != goroutines-7 {
			t.Fatalf("%d acquired and %d refused, want 7 and %d", ok.Load(), refused.Load(), goroutines-7)
		}
		mustInFlight(t, l, map[string]int{"key:k1": 7, "org:o1": 7, "provider:openai": 7})
		close(hold)
		wg.Wait()
		mustInFlight(t, l, map[string]int{})
	})

	t.Run("Churn", func(t *testing.T) {
		l := app.NewLimiter(limits)
		counters := map[string]*maxCounter{}
		for _, k := range keys {
			counters["key:"+k] = new(maxCounter)
			counters["org:"+orgOf[k]] = new(maxCounter)
		}
		for _, p := range providers {
			counters["provider:"+p] = new(maxCounter)
		}
		var acquired, refused atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range 40 {
					key := keys[(g+i)%len(keys)]
					org := orgOf[key]
					provider := providers[(g*3+i)%len(providers)]
					release, err := l.Acquire(key, org, provider)
					if err != nil {
						if app.ErrorCode(err) != app.ECONCURRENCY {
							t.Errorf("error %v", err)
						}
						refused.Add(1)
						runtime.Gosched()
						continue
					}
					acquired.Add(1)
					// Counted only between a successful Acquire and its release, so the
					// observed counts can never exceed what the limiter let in.
					cs := []*maxCounter{counters["key:"+key], counters["org:"+org], counters["provider:"+provider]}
					for _, c := range cs {
						c.inc()
					}
					runtime.Gosched()
					for _, c := range cs {
						c.dec()
					}
					release()
					if i%2 == 0 {
						release() // idempotent under load too
					}
				}
			}()
		}
		close(start)
		wg.Wait()

		limitOf := func(name string) int {
			kind, id, _ := strings.Cut(name, ":")
			switch kind {
			case "key":
				return limits.PerKey
			case "org":
				return limits.PerOrg
			}
			return limits.PerProvider[id]
		}
		for name, c := range counters {
			peak := int(c.max.Load())
			if lim := limitOf(name); lim > 0 && peak > lim {
				t.Errorf("%s: %d in flight at once, limit %d", name, peak, lim)
			}
			if peak == 0 {
				t.Errorf("%s: never acquired", name)
			}
			t.Logf("%s: max in flight %d (limit %d)", name, peak, limitOf(name))
		}
		if acquired.Load()+refused.Load() != goroutines*40 {
			t.Fatalf("%d acquired + %d refused", acquired.Load(), refused.Load())
		}
		t.Logf("%d acquired, %d refused", acquired.Load(), refused.Load())
		mustInFlight(t, l, map[string]int{})
	})
}

func ExampleLimiter() {
	l := app.NewLimiter(app.Limits{PerKey: 1})
	release, _ := l.Acquire("key_1", "org_1", "openai")
	defer release()
	_, err := l.Acquire("key_1", "org_1", "openai")
	fmt.Println(app.ErrorCode(err))
	// Output: concurrency_limit
}
