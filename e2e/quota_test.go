package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

// TestQuotaWindowsAcrossGateways: three gateway processes share one provider account whose
// model allows 100 requests a minute, kept to 50 by a reserve_ratio of 0.5. 300 concurrent requests
// through all three never put more than 50 into any minute's window: every answered request
// is in a window, every refused one is a 429 rate_limited with Retry-After, and the windows
// and the budgets equal the ledger rows.
func TestQuotaWindowsAcrossGateways(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	url := dbtest.NewURL(t)
	config := fakeConfig(fu.URL) + `  - name: limited
    provider: fake
    upstream_model: gpt-4o-mini-limited
    tier: free
    max_output_tokens: 1000
    price: {input: "0.15", output: "0.60"}
    quota: {rpm: 100, rpd: 100000, tpm: 10000000}
`
	config = replaceOnce(t, config, "    base_url: "+fu.URL+"/v1\n", "    base_url: "+fu.URL+"/v1\n    quota: {reserve_ratio: 0.5}\n")
	var gws []*gateway
	for i := 0; i < 3; i++ {
		gws = append(gws, startGateway(t, url, config))
	}
	tn := gws[0].newTenant(t, "free")
	const n = 300
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			status, h, out := gws[i%len(gws)].chat(t, tn.Key, chatBody("limited", 50))
			if status == 429 && (errCode(out) != "rate_limited" || h.Get("Retry-After") == "") {
				t.Errorf("429 with code %q Retry-After %q, want rate_limited with a Retry-After", errCode(out), h.Get("Retry-After"))
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		}(i)
	}
	close(start)
	wg.Wait()
	if counts[200]+counts[429] != n {
		t.Fatalf("answers by status %v, want only 200 and 429", counts)
	}
	pool := mustPool(t, url)
	mustLedgerSums(t, pool)
	ctx := context.Background()
	var windows, over, reserved, used int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE used > 50), coalesce(sum(reserved), 0), coalesce(sum(used), 0)
		FROM quota_windows WHERE model = 'gpt-4o-mini-limited' AND kind = 'rpm'`).Scan(&windows, &over, &reserved, &used); err != nil {
		t.Fatal(err)
	}
	if over != 0 || reserved != 0 || used != counts[200] {
		t.Fatalf("%d rpm windows, %d over the effective limit of 50, reserved %d, used %d for %d answers", windows, over, reserved, used, counts[200])
	}
	// The 300 requests normally land in one minute; at a minute's boundary two windows share
	// them, each within its limit.
	if windows == 1 && counts[200] != 50 {
		t.Fatalf("one window admitted %d, want exactly 50", counts[200])
	}
	if got := fu.fake().ChatRequests(); got != int64(counts[200]) {
		t.Errorf("the provider got %d calls for %d answers", got, counts[200])
	}
	var committed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'committed' AND cardinality(quota_ids) = 3`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if committed != counts[200] {
		t.Errorf("%d committed rows hold quota windows, want %d", committed, counts[200])
	}
}

// replaceOnce replaces the one occurrence of old in s.
func replaceOnce(tb testing.TB, s, old, repl string) string {
	tb.Helper()
	if strings.Count(s, old) != 1 {
		tb.Fatalf("%q occurs %d times in the config", old, strings.Count(s, old))
	}
	return strings.Replace(s, old, repl, 1)
}
