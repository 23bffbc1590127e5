package e2e

import (
	"context"

	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"yosan/app"
	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

// mustPool opens a pool on the gateway's database for SQL checks.
func mustPool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// mustLedgerSums checks, in SQL, the promise on every budget row: nothing left reserved,
// reserved + spent <= cap, and spent equal to the sum of the settled ledger rows.
func mustLedgerSums(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	var pending, over, mismatched int
	// Settlements run after the answer is sent: give the last ones a moment.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'pending'`).Scan(&pending); err != nil {
			tb.Fatal(err)
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM budgets WHERE reserved <> 0 OR (cap IS NOT NULL AND reserved + spent > cap)`).Scan(&over); err != nil {
		tb.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `
		WITH per AS (
			SELECT bid, sum(act) AS sp FROM (
				SELECT unnest(budget_ids) AS bid, coalesce(actual, 0) AS act FROM reservations
				WHERE status IN ('committed', 'expired')
				UNION ALL
				SELECT global_budget_id, coalesce(global_actual, 0) FROM reservations
				WHERE status IN ('committed', 'expired') AND global_budget_id IS NOT NULL) x
			GROUP BY bid)
		SELECT count(*) FROM budgets b LEFT JOIN per ON per.bid = b.id WHERE b.spent <> coalesce(per.sp, 0)`).Scan(&mismatched); err != nil {
		tb.Fatal(err)
	}
	if pending != 0 || over != 0 || mismatched != 0 {
		tb.Errorf("ledger broken: %d pending rows, %d budget rows reserved or over cap, %d rows whose spent differs from the ledger", pending, over, mismatched)
	}
}

// probeWorstCase sends one request and returns the reservation amount and input estimate the
// gateway computed for it, read back from the ledger.
func probeWorstCase(tb testing.TB, g *gateway, tn tenant, body map[string]any) (amount int64, estInput int64) {
	tb.Helper()
	if status, _, out := g.chat(tb, tn.Key, body); status != 200 {
		tb.Fatalf("probe: %d %v", status, out)
	}
	r := waitSettled(tb, g, tn.Org)
	amount, err := app.ParseMoney(r["amount"].(string))
	if err != nil {
		tb.Fatal(err)
	}
	return amount, int64(r["est_input_tokens"].(float64))
}

// fireConcurrent sends n identical chat requests at once, spread over the gateways, and
// counts the answers by status.
func fireConcurrent(tb testing.TB, gws []*gateway, key string, body map[string]any, n int) map[int]int {
	tb.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			status, _, out := gws[i%len(gws)].chat(tb, key, body)
			if status == 429 && errCode(out) != "budget_exceeded" {
				tb.Errorf("429 with code %q, want budget_exceeded", errCode(out))
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		}(i)
	}
	close(start)
	wg.Wait()
	return counts
}

func testExactAdmission(t *testing.T, processes int, extraConfig string) {
	fu := newFakeUpstream(t, openaifake.Options{})
	url := dbtest.NewURL(t)
	var gws []*gateway
	for i := 0; i < processes; i++ {
		gws = append(gws, startGateway(t, url, fakeConfig(fu.URL)+extraConfig))
	}
	g := gws[0]
	tn := g.newTenant(t, "free")
	const maxTokens = 200
	body := chatBody("gpt-4o-mini", maxTokens)
	worst, est := probeWorstCase(t, g, tn, body)
	// From now on the upstream reports exactly the worst case, so a committed request frees
	// nothing and exactly k requests fit.
	fu.swap(openaifake.Options{PromptTokens: est, CompletionTokens: maxTokens})
	const k = 37
	spent := g.mustAdmin(t, "GET", "/budgets/org/"+tn.Org, nil, 200)["spent"].(string)
	spentMicro, _ := app.ParseMoney(spent)
	capMicro := spentMicro + k*worst + worst - 1
	g.mustAdmin(t, "PUT", "/budgets/org/"+tn.Org, map[string]any{"cap": app.FormatMoney(capMicro)}, 200)

	const n = 500
	counts := fireConcurrent(t, gws, tn.Key, body, n)
	if counts[200] != k || counts[429] != n-k {
		t.Fatalf("answers by status %v, want %d x 200 and %d x 429", counts, k, n-k)
	}
	pool := mustPool(t, url)
	mustLedgerSums(t, pool)
	var spentAfter, committed int64
	if err := pool.QueryRow(context.Background(), `SELECT spent FROM budgets WHERE node_kind = 'org' AND node_id = $1`, tn.Org).Scan(&spentAfter); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(actual), 0) FROM reservations WHERE org_id = $1 AND status = 'committed'`, tn.Org).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if spentAfter > capMicro || spentAfter != committed || spentAfter != spentMicro+k*worst {
		t.Errorf("spent %d, committed rows %d, cap %d, want spent = %d", spentAfter, committed, capMicro, spentMicro+k*worst)
	}
}

// TestBudgetNeverOverspent: 500 concurrent requests through HTTP against a cap that fits
// exactly k worst cases.
func TestBudgetNeverOverspent(t *testing.T) {
	for _, processes := range []int{1, 3} {
		t.Run(strconv.Itoa(processes)+"Gateways", func(t *testing.T) { testExactAdmission(t, processes, "") })
	}
	t.Run("3GatewaysAsyncSettle", func(t *testing.T) { testExactAdmission(t, 3, "settle_async: true\n") })
}

// TestHierarchyHTTP: a full team cap blocks its keys but not another team's.
func TestHierarchyHTTP(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	g := startGateway(t, dbtest.NewURL(t), fakeConfig(fu.URL))
	tn := g.newTenant(t, "free")
	other := g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/teams", map[string]any{"name": "other"}, 201)["id"].(string)
	otherKey := g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/keys", map[string]any{"name": "o", "team_id": other, "plan": "free"}, 201)["key"].(string)
	g.mustAdmin(t, "PUT", "/budgets/team/"+tn.Team, map[string]any{"cap": "0"}, 200)

	status, _, out := g.chat(t, tn.Key, chatBody("gpt-4o-mini", 10))
	if status != 429 || errCode(out) != "budget_exceeded" {
		t.Fatalf("full team: %d %v", status, out)
	}
	msg := out["error"].(map[string]any)["message"].(string)
	if want := "team:" + tn.Team; !strings.Contains(msg, want) || out["error"].(map[string]any)["param"] != want {
		t.Errorf("error does not name %s: %v", want, out)
	}
	if status, _, out := g.chat(t, otherKey, chatBody("gpt-4o-mini", 10)); status != 200 {
		t.Fatalf("other team: %d %v", status, out)
	}
	waitSettled(t, g, tn.Org)
	org := g.mustAdmin(t, "GET", "/budgets/org/"+tn.Org, nil, 200)
	team := g.mustAdmin(t, "GET", "/budgets/team/"+tn.Team, nil, 200)
	if team["spent"] != "0" || team["reserved"] != "0" || org["spent"] == "0" {
		t.Errorf("team %v org %v: the refused request must leave every level untouched", team, org)
	}
	mustLedgerSums(t, mustPool(t, g.DBURL))
}

// TestOverrunHTTP: an upstream reporting more than the reserved worst case is committed
// truthfully, and the node then refuses.
func TestOverrunHTTP(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	g := startGateway(t, dbtest.NewURL(t), fakeConfig(fu.URL))
	tn := g.newTenant(t, "free")
	worst, _ := probeWorstCase(t, g, tn, chatBody("gpt-4o-mini", 10))
	spent, _ := app.ParseMoney(g.mustAdmin(t, "GET", "/budgets/org/"+tn.Org, nil, 200)["spent"].(string))
	g.mustAdmin(t, "PUT", "/budgets/org/"+tn.Org, map[string]any{"cap": app.FormatMoney(spent + worst)}, 200)
	// The upstream bills far more than max_tokens allowed (e.g. a tool run or image input).
	fu.swap(openaifake.Options{PromptTokens: 5000, CompletionTokens: 5000})
	if status, _, out := g.chat(t, tn.Key, chatBody("gpt-4o-mini", 10)); status != 200 {
		t.Fatalf("overrunning request: %d %v", status, out)
	}
	r := waitSettled(t, g, tn.Org)
	// 5000 in x 0.15 + 5000 out x 0.60 USD per 1M at 150 JPY = 0.5625 JPY
	if r["overrun"] != true || r["actual"] != "0.5625" {
		t.Fatalf("ledger row %v, want overrun with actual 0.5625", r)
	}
	status, _, out := g.chat(t, tn.Key, chatBody("gpt-4o-mini", 1))
	if status != 429 || errCode(out) != "budget_exceeded" {
		t.Fatalf("after overrun: %d %v", status, out)
	}
	b := g.mustAdmin(t, "GET", "/budgets/org/"+tn.Org, nil, 200)
	if want := app.FormatMoney(spent + 562500); b["spent"] != want {
		t.Errorf("spent %v, want %s", b["spent"], want)
	}
}
