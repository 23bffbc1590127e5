package db_test

import (
	"context"

	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

// tenant is one org with a team, a member and a key bound to that member.
type tenant struct {
	org    app.Org
	team   app.Team
	member app.Member
	key    app.APIKey
}

func (tn tenant) nodes() []app.Node {
	return []app.Node{{Kind: app.NodeOrg, ID: tn.org.ID}, {Kind: app.NodeTeam, ID: tn.team.ID},
		{Kind: app.NodeMember, ID: tn.member.ID}, {Kind: app.NodeKey, ID: tn.key.ID}}
}

func mustTenant(tb testing.TB, d *db.DB, name string) tenant {
	tb.Helper()
	ctx := context.Background()
	if err := d.UpsertPlans(ctx, []app.Plan{{Name: "free", Tiers: []string{"free"}}}); err != nil {
		tb.Fatal(err)
	}
	o, err := d.CreateOrg(ctx, app.Org{Name: name, Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := d.CreateTeam(ctx, o.ID, "team-"+name)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := d.CreateMember(ctx, o.ID, t.ID, name+"@example.com")
	if err != nil {
		tb.Fatal(err)
	}
	k, err := d.CreateKey(ctx, app.APIKey{OrgID: o.ID, TeamID: t.ID, MemberID: m.ID, Name: "k", Plan: "free"}, db.NewKeySecret())
	if err != nil {
		tb.Fatal(err)
	}
	return tenant{o, t, m, k}
}

func reserveReq(tn tenant, amount int64, now time.Time) app.ReserveRequest {
	return app.ReserveRequest{
		RequestID: uuid.NewString(), OrgID: tn.org.ID, KeyID: tn.key.ID, Period: "2026-11", Currency: app.JPY,
		Nodes: tn.nodes(), Amount: amount, GlobalPeriod: "2026-11", GlobalCurrency: app.JPY, GlobalAmount: amount,
		Model: "demo-mini", Provider: "demo", UpstreamModel: "demo-mini", USDJPY: 150 * app.Micro,
		EstInputTokens: 10, MaxOutputTokens: 100, Deadline: now.Add(time.Minute),
	}
}

func mustCap(tb testing.TB, l *db.Ledger, n app.Node, yen int64) {
	tb.Helper()
	c := yen * app.Micro
	if _, err := l.SetCap(context.Background(), n, &c); err != nil {
		tb.Fatal(err)
	}
}

func fixedNow(d *db.DB) time.Time {
	now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	d.Now = func() time.Time { return now }
	return now
}

// mustLedgerConsistent checks the SQL invariants over every budget row: reserved + spent <= cap
// (no overrun was made in the test) and the counters equal the sums of the ledger rows.
func mustLedgerConsistent(tb testing.TB, d *db.DB, allowOverrun bool) {
	tb.Helper()
	ctx := context.Background()
	var bad int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM budgets WHERE cap IS NOT NULL AND reserved + spent > cap`).Scan(&bad); err != nil {
		tb.Fatal(err)
	}
	if bad > 0 && !allowOverrun {
		tb.Errorf("%d budget rows have reserved + spent > cap", bad)
	}
	rows, err := d.Pool.Query(ctx, `
		WITH per AS (
			SELECT bid,
				sum(CASE WHEN status = 'pending' THEN amt ELSE 0 END) AS res,
				sum(CASE WHEN status IN ('committed', 'expired') THEN act ELSE 0 END) AS sp
			FROM (
				SELECT unnest(budget_ids) AS bid, status, amount AS amt, coalesce(actual, 0) AS act FROM reservations
				UNION ALL
				SELECT global_budget_id, status, global_amount, coalesce(global_actual, 0) FROM reservations
				WHERE global_budget_id IS NOT NULL) x
			GROUP BY bid)
		SELECT b.id, b.reserved, b.spent, coalesce(per.res, 0), coalesce(per.sp, 0) FROM budgets b
		LEFT JOIN per ON per.bid = b.id
		WHERE b.reserved <> coalesce(per.res, 0) OR b.spent <> coalesce(per.sp, 0)`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, r, s, lr, ls int64
		if err := rows.Scan(&id, &r, &s, &lr, &ls); err != nil {
			tb.Fatal(err)
		}
		tb.Errorf("budget %d: counters reserved=%d spent=%d, ledger rows reserved=%d spent=%d", id, r, s, lr, ls)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
}

func budgetOf(tb testing.TB, l *db.Ledger, n app.Node) app.Budget {
	tb.Helper()
	b, err := l.Budget(context.Background(), n)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// mustProcesses opens n pools on one fresh database, each with its own ledger and a fixed
// clock, as n gateway processes would.
func mustProcesses(tb testing.TB, n int) ([]*db.DB, []*db.Ledger) {
	tb.Helper()
	url := dbtest.NewURL(tb)
	var dbs []*db.DB
	var ledgers []*db.Ledger
	for i := 0; i < n; i++ {
		d, err := db.Open(context.Background(), url)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(d.Close)
		fixedNow(d)
		l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
		tb.Cleanup(l.Close)
		dbs = append(dbs, d)
		ledgers = append(ledgers, l)
	}
	return dbs, ledgers
}

func TestReserveConcurrentSeveralPools(t *testing.T) {
	ctx := context.Background()
	const processes = 3
	dbs, ledgers := mustProcesses(t, processes)
	tn := mustTenant(t, dbs[0], "acme")
	const worst = 7 * app.Micro // 7 yen per request
	const fit = 37
	mustCap(t, ledgers[0], app.Node{Kind: app.NodeOrg, ID: tn.org.ID}, 7*fit+6)
	now := dbs[0].Now()

	const n = 600
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	results := make([]app.ReserveResult, n)
	reqs := make([]app.ReserveRequest, n)
	for i := 0; i < n; i++ {
		reqs[i] = reserveReq(tn, worst, now)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := ledgers[i%processes].Reserve(ctx, reqs[i])
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
			if res.Admitted {
				admitted.Add(1)
			} else {
				if res.FullNode.Kind != app.NodeOrg {
					t.Errorf("full node = %v, want the org", res.FullNode)
				}
				refused.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if admitted.Load() != fit || refused.Load() != n-fit {
		t.Fatalf("admitted %d refused %d, want %d and %d", admitted.Load(), refused.Load(), fit, n-fit)
	}
	mustLedgerConsistent(t, dbs[0], false)

	// Settle all admitted ones concurrently: half commit at less than reserved, half release.
	for i := 0; i < n; i++ {
		if !results[i].Admitted {
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st := app.Settlement{RequestID: reqs[i].RequestID, Status: app.StatusCommitted, Actual: 3 * app.Micro,
				GlobalActual: 3 * app.Micro, LockIDs: results[i].Reservation.LockIDs()}
			if i%2 == 0 {
				st.Status = app.StatusReleased
			}
			out, err := ledgers[(i+1)%processes].Settle(ctx, st)
			if err != nil || !out.Applied {
				t.Errorf("settle %d: %v %+v", i, err, out)
			}
		}(i)
	}
	wg.Wait()
	mustLedgerConsistent(t, dbs[0], false)
	b := budgetOf(t, ledgers[0], app.Node{Kind: app.NodeOrg, ID: tn.org.ID})
	var committed int64
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'committed'`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if b.Reserved != 0 || b.Spent != committed*3*app.Micro {
		t.Errorf("org budget reserved=%d spent=%d, want 0 and %d", b.Reserved, b.Spent, committed*3*app.Micro)
	}
}

func TestHierarchy(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{})
	t.Cleanup(l.Close)
	ctx := context.Background()
	a := mustTenant(t, d, "a")
	// a second team in the same org
	t2, err := d.CreateTeam(ctx, a.org.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := d.CreateKey(ctx, app.APIKey{OrgID: a.org.ID, TeamID: t2.ID, Name: "k2", Plan: "free"}, db.NewKeySecret())
	if err != nil {
		t.Fatal(err)
	}
	mustCap(t, l, app.Node{Kind: app.NodeTeam, ID: a.team.ID}, 10)

	t.Run("ErrBudgetExceeded", func(t *testing.T) {
		res, err := l.Reserve(ctx, reserveReq(a, 11*app.Micro, now))
		if err != nil {
			t.Fatal(err)
		}
		if res.Admitted || res.FullNode != (app.Node{Kind: app.NodeTeam, ID: a.team.ID}) {
			t.Fatalf("got %+v, want refusal naming the team", res)
		}
		for _, n := range append(a.nodes(), app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}) {
			if b := budgetOf(t, l, n); b.Reserved != 0 || b.Spent != 0 {
				t.Errorf("%v changed after a refused reserve: %+v", n, b)
			}
		}
	})
	t.Run("OtherTeamUnaffected", func(t *testing.T) {
		req := reserveReq(a, 11*app.Micro, now)
		req.Nodes = []app.Node{{Kind: app.NodeOrg, ID: a.org.ID}, {Kind: app.NodeTeam, ID: t2.ID}, {Kind: app.NodeKey, ID: k2.ID}}
		res, err := l.Reserve(ctx, req)
		if err != nil || !res.Admitted {
			t.Fatalf("reserve on the other team: %v %+v", err, res)
		}
	})
	t.Run("FailureAtLevelLeavesOthers", func(t *testing.T) {
		mustCap(t, l, app.Node{Kind: app.NodeTeam, ID: a.team.ID}, 100)
		mustCap(t, l, app.Node{Kind: app.NodeKey, ID: a.key.ID}, 1)
		before := map[app.Node]app.Budget{}
		for _, n := range a.nodes() {
			before[n] = budgetOf(t, l, n)
		}
		res, err := l.Reserve(ctx, reserveReq(a, 2*app.Micro, now))
		if err != nil || res.Admitted || res.FullNode.Kind != app.NodeKey {
			t.Fatalf("got %v %+v, want refusal at the key", err, res)
		}
		for _, n := range a.nodes() {
			if b := budgetOf(t, l, n); b.Reserved != before[n].Reserved || b.Spent != before[n].Spent {
				t.Errorf("%v changed: %+v -> %+v", n, before[n], b)
			}
		}
	})
	mustLedgerConsistent(t, d, false)
}

func TestIdempotency(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{})
	t.Cleanup(l.Close)
	ctx := context.Background()
	tn := mustTenant(t, d, "idem")
	org := app.Node{Kind: app.NodeOrg, ID: tn.org.ID}

	t.Run("ReserveTwice", func(t *testing.T) {
		req := reserveReq(tn, 5*app.Micro, now)
		r1, err := l.Reserve(ctx, req)
		if err != nil || !r1.Admitted || r1.Duplicate {
			t.Fatalf("first reserve: %v %+v", err, r1)
		}
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r2, err := l.Reserve(ctx, req)
				if err != nil || !r2.Duplicate {
					t.Errorf("retried reserve: %v %+v", err, r2)
				}
			}()
		}
		wg.Wait()
		if b := budgetOf(t, l, org); b.Reserved != 5*app.Micro {
			t.Errorf("reserved = %d, want one reservation", b.Reserved)
		}
		commitTwice(t, l, r1.Reservation)
	})
	t.Run("CommitReleaseRace", func(t *testing.T) {
		for round := 0; round < 20; round++ {
			res, err := l.Reserve(ctx, reserveReq(tn, 5*app.Micro, now))
			if err != nil || !res.Admitted {
				t.Fatal(err, res)
			}
			var applied atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 6; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					st := app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusCommitted,
						Actual: 4 * app.Micro, GlobalActual: 4 * app.Micro}
					if i%2 == 1 {
						st.Status = app.StatusReleased
					}
					if i < 3 {
						st.LockIDs = res.Reservation.LockIDs()
					}
					out, err := l.Settle(ctx, st)
					if err != nil {
						t.Error(err)
					}
					if out.Applied {
						applied.Add(1)
					}
				}(i)
			}
			wg.Wait()
			if applied.Load() != 1 {
				t.Fatalf("round %d: %d settlements applied, want exactly 1", round, applied.Load())
			}
		}
		mustLedgerConsistent(t, d, false)
	})
	t.Run("ReleaseTwice", func(t *testing.T) {
		res, err := l.Reserve(ctx, reserveReq(tn, 5*app.Micro, now))
		if err != nil || !res.Admitted {
			t.Fatal(err, res)
		}
		for i, want := range []bool{true, false} {
			out, err := l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusReleased})
			if err != nil || out.Applied != want {
				t.Fatalf("release %d: %v %+v, want applied=%v", i, err, out, want)
			}
		}
		mustLedgerConsistent(t, d, false)
	})
}

func commitTwice(t *testing.T, l *db.Ledger, r app.Reservation) {
	t.Helper()
	for i, want := range []bool{true, false} {
		out, err := l.Settle(context.Background(), app.Settlement{RequestID: r.RequestID, Status: app.StatusCommitted,
			Actual: 2 * app.Micro, GlobalActual: 2 * app.Micro, LockIDs: r.LockIDs()})
		if err != nil || out.Applied != want {
			t.Fatalf("commit %d: %v %+v, want applied=%v", i, err, out, want)
		}
	}
}

func TestSweeper(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{})
	t.Cleanup(l.Close)
	ctx := context.Background()
	tn := mustTenant(t, d, "sweep")
	stale := reserveReq(tn, 9*app.Micro, now)
	stale.Deadline = now.Add(-time.Second)
	fresh := reserveReq(tn, 9*app.Micro, now)
	for _, r := range []app.ReserveRequest{stale, fresh} {
		if res, err := l.Reserve(ctx, r); err != nil || !res.Admitted {
			t.Fatal(err, res)
		}
	}
	// Two sweepers (two processes) at once settle the stale one exactly once.
	d2, err := db.Open(ctx, d.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d2.Close)
	d2.Now = d.Now
	l2 := db.NewLedger(d2, db.LedgerConfig{})
	t.Cleanup(l2.Close)
	var total atomic.Int64
	var wg sync.WaitGroup
	for _, sw := range []*db.Ledger{l, l2, l, l2} {
		wg.Add(1)
		go func(sw *db.Ledger) {
			defer wg.Done()
			n, err := sw.Sweep(ctx, db.SweepCharge, 100)
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(n))
		}(sw)
	}
	wg.Wait()
	if total.Load() != 1 {
		t.Fatalf("sweepers settled %d, want 1", total.Load())
	}
	rs, err := l.Reservations(ctx, tn.org.ID, app.StatusExpired, 10)
	if err != nil || len(rs) != 1 || rs[0].RequestID != stale.RequestID || *rs[0].Actual != 9*app.Micro {
		t.Fatalf("expired rows: %v %+v", err, rs)
	}
	b := budgetOf(t, l, app.Node{Kind: app.NodeOrg, ID: tn.org.ID})
	if b.Spent != 9*app.Micro || b.Reserved != 9*app.Micro {
		t.Errorf("org budget %+v, want spent 9 (charged) and 9 reserved (fresh)", b)
	}
	t.Run("ReleaseMode", func(t *testing.T) {
		d.Now = func() time.Time { return now.Add(time.Hour) }
		n, err := l.Sweep(ctx, db.SweepRelease, 100)
		if err != nil || n != 1 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		if b := budgetOf(t, l, app.Node{Kind: app.NodeOrg, ID: tn.org.ID}); b.Spent != 9*app.Micro || b.Reserved != 0 {
			t.Errorf("org budget %+v", b)
		}
	})
	mustLedgerConsistent(t, d, false)
}

func TestOverrun(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{})
	t.Cleanup(l.Close)
	ctx := context.Background()
	tn := mustTenant(t, d, "over")
	org := app.Node{Kind: app.NodeOrg, ID: tn.org.ID}
	mustCap(t, l, org, 10)
	res, err := l.Reserve(ctx, reserveReq(tn, 8*app.Micro, now))
	if err != nil || !res.Admitted {
		t.Fatal(err, res)
	}
	out, err := l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusCommitted,
		Actual: 12 * app.Micro, GlobalActual: 12 * app.Micro, LockIDs: res.Reservation.LockIDs()})
	if err != nil || !out.Applied || !out.Overrun {
		t.Fatalf("commit overrun: %v %+v", err, out)
	}
	if b := budgetOf(t, l, org); b.Spent != 12*app.Micro || b.Reserved != 0 {
		t.Fatalf("budget %+v, want the true 12 spent", b)
	}
	rs, err := l.Reservations(ctx, tn.org.ID, app.StatusCommitted, 10)
	if err != nil || len(rs) != 1 || !rs[0].Overrun {
		t.Fatalf("ledger row not flagged: %v %+v", err, rs)
	}
	// Even a zero-cost request is refused now.
	res, err = l.Reserve(ctx, reserveReq(tn, 0, now))
	if err != nil || res.Admitted || res.FullNode != org {
		t.Fatalf("reserve after overrun: %v %+v", err, res)
	}
	// Raising the cap unblocks.
	mustCap(t, l, org, 20)
	if res, err = l.Reserve(ctx, reserveReq(tn, 8*app.Micro, now)); err != nil || !res.Admitted {
		t.Fatalf("reserve after raising the cap: %v %+v", err, res)
	}
	mustLedgerConsistent(t, d, true)
}
