package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
)

// mustQuotaConsistent checks every quota window's counters against the ledger rows that hold
// it: reserved is the sum of the pending claims, used counts one request per settled row (rpm,
// rpd) or its input plus output tokens (tpm).
func mustQuotaConsistent(tb testing.TB, d *db.DB) {
	tb.Helper()
	rows, err := d.Pool.Query(context.Background(), `
		WITH per AS (
			SELECT q.qid,
				sum(CASE WHEN r.status = 'pending' THEN q.amt ELSE 0 END) AS res,
				sum(CASE WHEN r.status = 'pending' THEN 0
					WHEN w.kind = 'tpm' THEN coalesce(r.input_tokens, 0) + coalesce(r.output_tokens, 0)
					ELSE 1 END) AS used
			FROM reservations r CROSS JOIN LATERAL unnest(r.quota_ids, r.quota_amounts) AS q(qid, amt)
			JOIN quota_windows w ON w.id = q.qid
			GROUP BY q.qid)
		SELECT w.id, w.kind, w.reserved, w.used, coalesce(per.res, 0), coalesce(per.used, 0)
		FROM quota_windows w LEFT JOIN per ON per.qid = w.id
		WHERE w.reserved <> coalesce(per.res, 0) OR w.used <> coalesce(per.used, 0)`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, r, u, lr, lu int64
		var kind string
		if err := rows.Scan(&id, &kind, &r, &u, &lr, &lu); err != nil {
			tb.Fatal(err)
		}
		tb.Errorf("quota window %d (%s): counters reserved=%d used=%d, ledger rows reserved=%d used=%d", id, kind, r, u, lr, lu)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
}

// windowOf returns the counters of one window row.
func windowOf(tb testing.TB, d *db.DB, model string, kind app.QuotaKind) (reserved, used int64) {
	tb.Helper()
	if err := d.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(reserved), 0), coalesce(sum(used), 0)
		FROM quota_windows WHERE model = $1 AND kind = $2`, model, string(kind)).Scan(&reserved, &used); err != nil {
		tb.Fatal(err)
	}
	return reserved, used
}

// TestQuotaWindowsHoldUnderConcurrency fires 300 concurrent reserves through three ledgers
// (three gateway processes) at windows that fit 40 requests a minute and 9,000 tokens a
// minute: exactly as many are admitted as fit, the rest are refused naming the full window,
// and the counters equal the ledger rows, before and after every settlement.
func TestQuotaWindowsHoldUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	const processes = 3
	dbs, ledgers := mustProcesses(t, processes)
	tn := mustTenant(t, dbs[0], "acme")
	now := dbs[0].Now()
	q := &app.Quota{RPM: 50, RPD: 1000, TPM: 10_000, ReserveRatio: 0.2, Location: time.UTC} // effective 40, 800, 8000

	cases := []struct {
		model    string
		tokens   int64
		fit      int
		fullKind app.QuotaKind
	}{
		{"rpm-bound", 100, 40, app.QuotaRPM}, // 40 x 100 tokens fit the 8,000 tpm
		{"tpm-bound", 300, 26, app.QuotaTPM}, // 8,000 / 300 = 26
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			const n = 300
			reqs := make([]app.ReserveRequest, n)
			results := make([]app.ReserveResult, n)
			var wg sync.WaitGroup
			for i := range reqs {
				reqs[i] = reserveReq(tn, app.Micro, now)
				reqs[i].Model, reqs[i].UpstreamModel = tc.model, tc.model
				reqs[i].Quotas = q.Claims("demo", tc.model, now, tc.tokens)
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					res, err := ledgers[i%processes].Reserve(ctx, reqs[i])
					if err != nil {
						t.Error(err)
					}
					results[i] = res
				}(i)
			}
			wg.Wait()
			admitted := 0
			for _, r := range results {
				switch {
				case r.Admitted:
					admitted++
					if len(r.Reservation.QuotaIDs) != 3 {
						t.Errorf("admitted reservation holds %d quota rows, want 3", len(r.Reservation.QuotaIDs))
					}
				case r.FullQuota == nil || r.FullQuota.Kind != tc.fullKind:
					t.Errorf("refused with %+v, want the %s window", r, tc.fullKind)
				}
			}
			if admitted != tc.fit {
				t.Fatalf("admitted %d, want exactly %d", admitted, tc.fit)
			}
			if r, u := windowOf(t, dbs[0], tc.model, app.QuotaRPM); r != int64(tc.fit) || u != 0 {
				t.Errorf("rpm window reserved=%d used=%d, want %d and 0", r, u, tc.fit)
			}
			if r, _ := windowOf(t, dbs[0], tc.model, app.QuotaTPM); r != int64(tc.fit)*tc.tokens {
				t.Errorf("tpm window reserved=%d, want %d", r, int64(tc.fit)*tc.tokens)
			}
			mustQuotaConsistent(t, dbs[0])
			mustLedgerConsistent(t, dbs[0], false)

			// Settle every admitted one concurrently: odd ones commit 60 tokens, even ones
			// release.
			committed := 0
			for i, r := range results {
				if !r.Admitted {
					continue
				}
				st := app.Settlement{RequestID: reqs[i].RequestID, Status: app.StatusReleased,
					LockIDs: r.Reservation.LockIDs(), QuotaIDs: r.Reservation.QuotaIDs}
				if i%2 == 1 {
					committed++
					st.Status, st.Actual, st.GlobalActual = app.StatusCommitted, app.Micro/2, app.Micro/2
					st.Usage = app.Usage{PromptTokens: 40, CompletionTokens: 20}
				}
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if out, err := ledgers[(i+1)%processes].Settle(ctx, st); err != nil || !out.Applied {
						t.Errorf("settle: %v %+v", err, out)
					}
				}(i)
			}
			wg.Wait()
			if r, u := windowOf(t, dbs[0], tc.model, app.QuotaRPM); r != 0 || u != int64(tc.fit) {
				t.Errorf("rpm window after settling reserved=%d used=%d, want 0 and %d (every call counts)", r, u, tc.fit)
			}
			if r, u := windowOf(t, dbs[0], tc.model, app.QuotaTPM); r != 0 || u != int64(committed)*60 {
				t.Errorf("tpm window after settling reserved=%d used=%d, want 0 and %d", r, u, committed*60)
			}
			mustQuotaConsistent(t, dbs[0])
			mustLedgerConsistent(t, dbs[0], false)
		})
	}
}

// TestQuotaAllOrNothing: a request refused by a window holds no money, one refused by the
// budget holds no window, and a window that frees up admits again.
func TestQuotaAllOrNothing(t *testing.T) {
	ctx := context.Background()
	dbs, ledgers := mustProcesses(t, 1)
	d, l := dbs[0], ledgers[0]
	tn := mustTenant(t, d, "acme")
	now := d.Now()
	q := &app.Quota{RPM: 1, Location: time.UTC}
	org := app.Node{Kind: app.NodeOrg, ID: tn.org.ID}

	first := reserveReq(tn, 5*app.Micro, now)
	first.Quotas = q.Claims("demo", "m", now, 10)
	r1, err := l.Reserve(ctx, first)
	if err != nil || !r1.Admitted {
		t.Fatalf("first: %v %+v", err, r1)
	}
	second := reserveReq(tn, 5*app.Micro, now)
	second.Quotas = q.Claims("demo", "m", now, 10)
	r2, err := l.Reserve(ctx, second)
	if err != nil || r2.Admitted || r2.FullQuota == nil || r2.FullQuota.Kind != app.QuotaRPM {
		t.Fatalf("second: %v %+v, want refused by the rpm window", err, r2)
	}
	if b := budgetOf(t, l, org); b.Reserved != 5*app.Micro {
		t.Errorf("org reserved %d after a quota refusal, want only the first request's %d", b.Reserved, 5*app.Micro)
	}
	// Releasing the first frees the money, not the request it made: the minute still counts it.
	if out, err := l.Settle(ctx, app.Settlement{RequestID: first.RequestID, Status: app.StatusReleased}); err != nil || !out.Applied {
		t.Fatalf("release: %v %+v", err, out)
	}
	if r2, err = l.Reserve(ctx, second); err != nil || r2.Admitted {
		t.Fatalf("second again in the same minute: %v %+v, want refused", err, r2)
	}
	// The next minute is a new window.
	next := now.Add(time.Minute)
	third := reserveReq(tn, 5*app.Micro, next)
	third.Quotas = q.Claims("demo", "m", next, 10)
	mustCap(t, l, org, 1)
	if r3, err := l.Reserve(ctx, third); err != nil || r3.Admitted || r3.FullNode != org {
		t.Fatalf("third over the org cap: %v %+v, want refused by the org budget", err, r3)
	}
	if r, _ := windowOf(t, d, "m", app.QuotaRPM); r != 0 {
		t.Errorf("a budget refusal holds %d of the window, want 0", r)
	}
	mustCap(t, l, org, 100)
	if r3, err := l.Reserve(ctx, third); err != nil || !r3.Admitted {
		t.Fatalf("third in the next minute: %v %+v, want admitted", err, r3)
	}
	// The sweeper gives the window back too.
	d.Now = func() time.Time { return next.Add(2 * time.Minute) }
	if n, err := l.Sweep(ctx, db.SweepCharge, 10); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	mustQuotaConsistent(t, d)
	mustLedgerConsistent(t, d, false)
	var windows int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM quota_windows`).Scan(&windows); err != nil || windows != 2 {
		t.Fatalf("%d windows (%v), want 2", windows, err)
	}
	if n, err := d.PruneQuotaWindows(ctx, next.Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	open, err := d.QuotaWindows(ctx, next)
	if err != nil || len(open) != 0 {
		t.Fatalf("open windows after pruning: %v %v", open, err)
	}
}

// TestSettleRecordsCacheWrites: the ledger row keeps the cache-write tokens of its usage.
func TestSettleRecordsCacheWrites(t *testing.T) {
	ctx := context.Background()
	dbs, ledgers := mustProcesses(t, 1)
	tn := mustTenant(t, dbs[0], "acme")
	req := reserveReq(tn, 5*app.Micro, dbs[0].Now())
	if res, err := ledgers[0].Reserve(ctx, req); err != nil || !res.Admitted {
		t.Fatalf("reserve: %v %+v", err, res)
	}
	st := app.Settlement{RequestID: req.RequestID, Status: app.StatusCommitted, Actual: app.Micro, GlobalActual: app.Micro,
		Usage: app.Usage{PromptTokens: 2104, CachedTokens: 2000, CacheWriteTokens: 100, CompletionTokens: 30}, UsageSource: "upstream"}
	if out, err := ledgers[0].Settle(ctx, st); err != nil || !out.Applied {
		t.Fatalf("settle: %v %+v", err, out)
	}
	var in, cached, writes, out int64
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT input_tokens, cached_tokens, cache_write_tokens, output_tokens
		FROM reservations WHERE request_id = $1`, req.RequestID).Scan(&in, &cached, &writes, &out); err != nil {
		t.Fatal(err)
	}
	if in != 2104 || cached != 2000 || writes != 100 || out != 30 {
		t.Errorf("row tokens %d/%d/%d/%d, want 2104/2000/100/30", in, cached, writes, out)
	}
}

// TestOneBadCallFailsAlone: a reserve PostgreSQL refuses (a key id that is not a uuid) sent
// among 60 concurrent reserves and settlements fails by itself; every other call lands, and
// the ledger sums hold.
func TestOneBadCallFailsAlone(t *testing.T) {
	ctx := context.Background()
	dbs, ledgers := mustProcesses(t, 1)
	d, l := dbs[0], ledgers[0]
	tn := mustTenant(t, d, "acme")
	now := d.Now()
	// Reserve 30 now, to settle them concurrently with 30 new reserves and the bad one.
	var held []app.Reservation
	for range 30 {
		res, err := l.Reserve(ctx, reserveReq(tn, app.Micro, now))
		if err != nil || !res.Admitted {
			t.Fatal(err, res)
		}
		held = append(held, res.Reservation)
	}
	bad := reserveReq(tn, app.Micro, now)
	bad.KeyID = "not-a-uuid"
	bad.Nodes = bad.Nodes[:1] // the org row exists: only the ledger row's insert can fail
	var wg sync.WaitGroup
	var badErr error
	start := make(chan struct{})
	for i := range 30 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if res, err := l.Reserve(ctx, reserveReq(tn, app.Micro, now)); err != nil || !res.Admitted {
				t.Errorf("reserve: %v %+v", err, res)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			st := app.Settlement{RequestID: held[i].RequestID, Status: app.StatusCommitted, Actual: app.Micro / 2, GlobalActual: app.Micro / 2,
				LockIDs: held[i].LockIDs(), Usage: app.Usage{PromptTokens: -5, CompletionTokens: 3, CacheWriteTokens: 1 << 62}}
			if out, err := l.Settle(ctx, st); err != nil || !out.Applied {
				t.Errorf("settle: %v %+v", err, out)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		_, badErr = l.Reserve(ctx, bad)
	}()
	close(start)
	wg.Wait()
	if badErr == nil {
		t.Fatal("the bad reserve was accepted")
	}
	var pending, committed int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'committed')
		FROM reservations`).Scan(&pending, &committed); err != nil || pending != 30 || committed != 30 {
		t.Fatalf("%d pending and %d committed (%v), want 30 and 30", pending, committed, err)
	}
	var badRows int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE input_tokens < 0 OR cache_write_tokens > input_tokens`).Scan(&badRows); err != nil || badRows != 0 {
		t.Errorf("%d rows with impossible token counts (%v)", badRows, err)
	}
	mustLedgerConsistent(t, d, false)
}

// TestDuplicateIDInOneBatch: the same request id twice at once reserves once; the second
// is its duplicate, or refused like the first when the first did not fit.
func TestDuplicateIDInOneBatch(t *testing.T) {
	ctx := context.Background()
	dbs, ledgers := mustProcesses(t, 1)
	d, l := dbs[0], ledgers[0]
	tn := mustTenant(t, d, "acme")
	now := d.Now()
	for _, fits := range []bool{true, false} {
		if !fits {
			mustCap(t, l, app.Node{Kind: app.NodeOrg, ID: tn.org.ID}, 1)
		}
		req := reserveReq(tn, 5*app.Micro, now)
		results := make([]app.ReserveResult, 20)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if results[i], err = l.Reserve(ctx, req); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		firsts := 0
		for _, r := range results {
			switch {
			case !fits && (r.Admitted || r.Duplicate || r.FullNode.Kind != app.NodeOrg):
				t.Errorf("over the cap: %+v, want refused by the org", r)
			case fits && !r.Admitted:
				t.Errorf("within the cap: %+v, want admitted", r)
			case fits && !r.Duplicate:
				firsts++
			}
		}
		if fits && firsts != 1 {
			t.Errorf("%d of 20 reserved, want exactly 1 and 19 duplicates", firsts)
		}
	}
	mustLedgerConsistent(t, d, true) // the cap was lowered below what the first round holds
}
