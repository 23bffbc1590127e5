package db_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

// spend reserves amount micro-yen on every node of tn and commits actual.
func spend(tb testing.TB, l *db.Ledger, tn tenant, amount, actual int64, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	res, err := l.Reserve(ctx, reserveReq(tn, amount, now))
	if err != nil || !res.Admitted {
		tb.Fatalf("reserve %d: %v %+v", amount, err, res)
	}
	out, err := l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusCommitted,
		Actual: actual, GlobalActual: actual, LockIDs: res.Reservation.LockIDs()})
	if err != nil || !out.Applied {
		tb.Fatalf("commit %d: %v %+v", actual, err, out)
	}
}

type eventKey struct {
	kind      string
	nodeKind  string
	threshold int
}

// events returns every alert event as (kind, node kind, threshold) -> count, and the crossed
// lists of the threshold events by node kind.
func events(tb testing.TB, d *db.DB) (map[eventKey]int, map[string][][]int) {
	tb.Helper()
	rows, err := d.Pool.Query(context.Background(), `SELECT kind, node_kind, coalesce(threshold, 0), coalesce(crossed, '{}')
		FROM alert_events ORDER BY created_at, threshold`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	counts := map[eventKey]int{}
	crossed := map[string][][]int{}
	for rows.Next() {
		var k eventKey
		var cr []int
		if err := rows.Scan(&k.kind, &k.nodeKind, &k.threshold, &cr); err != nil {
			tb.Fatal(err)
		}
		counts[k]++
		if k.kind == string(app.AlertThreshold) {
			crossed[k.nodeKind] = append(crossed[k.nodeKind], cr)
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return counts, crossed
}

func TestThresholdAlerts(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	tn := mustTenant(t, d, "acme")
	org := app.Node{Kind: app.NodeOrg, ID: tn.org.ID}
	mustCap(t, l, org, 1000)
	y := int64(app.Micro)

	t.Run("BelowFirstThreshold", func(t *testing.T) {
		spend(t, l, tn, 500*y, 490*y, now)
		if got, _ := events(t, d); len(got) != 0 {
			t.Fatalf("events at 49 %%: %v", got)
		}
	})
	t.Run("ReleaseNeverAlerts", func(t *testing.T) {
		ctx := context.Background()
		res, err := l.Reserve(ctx, reserveReq(tn, 500*y, now))
		if err != nil || !res.Admitted {
			t.Fatal(err, res)
		}
		if _, err := l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusReleased,
			LockIDs: res.Reservation.LockIDs()}); err != nil {
			t.Fatal(err)
		}
		if got, _ := events(t, d); len(got) != 0 {
			t.Fatalf("events after a release: %v", got)
		}
	})
	t.Run("CrossFifty", func(t *testing.T) {
		spend(t, l, tn, 20*y, 10*y, now) // 500 / 1000
		got, _ := events(t, d)
		want := map[eventKey]int{{"budget.threshold_crossed", "org", 50}: 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		if b := budgetOf(t, l, org); b.LastAlert != 50 {
			t.Errorf("last alert = %d, want 50", b.LastAlert)
		}
	})
	t.Run("SeveralAtOnceIsOneEvent", func(t *testing.T) {
		spend(t, l, tn, 450*y, 420*y, now) // 920 / 1000: past 80 and 90
		got, crossed := events(t, d)
		if got[eventKey{"budget.threshold_crossed", "org", 90}] != 1 || got[eventKey{"budget.threshold_crossed", "org", 80}] != 0 {
			t.Fatalf("events = %v, want one event at 90", got)
		}
		if fmt.Sprint(crossed["org"]) != "[[50] [80 90]]" {
			t.Errorf("crossed = %v, want [[50] [80 90]]", crossed["org"])
		}
	})
	t.Run("NoRepeatBelowNext", func(t *testing.T) {
		spend(t, l, tn, 50*y, 40*y, now) // 960
		if got, _ := events(t, d); len(got) != 2 {
			t.Fatalf("events = %v, want still 2", got)
		}
	})
	t.Run("OverrunAndHundred", func(t *testing.T) {
		spend(t, l, tn, 10*y, 60*y, now) // 1020: overrun of 50 yen, past 100 %
		got, _ := events(t, d)
		if got[eventKey{"budget.threshold_crossed", "org", 100}] != 1 {
			t.Errorf("no 100 %% event: %v", got)
		}
		if got[eventKey{"budget.overrun", "key", 0}] != 1 {
			t.Errorf("want one org overrun event (on the key): %v", got)
		}
		if got[eventKey{"budget.overrun", "global", 0}] != 1 {
			t.Errorf("want one global overrun event: %v", got)
		}
		var amount, actual int64
		var rid string
		if err := d.Pool.QueryRow(context.Background(), `SELECT request_id, amount, actual FROM alert_events
			WHERE kind = 'budget.overrun' AND org_id IS NOT NULL`).Scan(&rid, &amount, &actual); err != nil {
			t.Fatal(err)
		}
		if amount != 10*y || actual != 60*y || rid == "" {
			t.Errorf("overrun event: request %q amount %d actual %d", rid, amount, actual)
		}
	})
	mustLedgerConsistent(t, d, true)
}

func TestThresholdAlertsFromCapAndThresholdChanges(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	tn := mustTenant(t, d, "acme")
	team := app.Node{Kind: app.NodeTeam, ID: tn.team.ID}
	ctx := context.Background()
	y := int64(app.Micro)

	spend(t, l, tn, 300*y, 300*y, now) // no cap yet: metered, never alerts
	if got, _ := events(t, d); len(got) != 0 {
		t.Fatalf("events without a cap: %v", got)
	}
	mustCap(t, l, team, 1000) // 30 %
	if got, _ := events(t, d); len(got) != 0 {
		t.Fatalf("events at 30 %%: %v", got)
	}

	t.Run("CustomThresholds", func(t *testing.T) {
		b, err := l.SetThresholds(ctx, team, []int{75, 25, 25})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(b.Thresholds) != "[25 75]" || b.LastAlert != 25 {
			t.Errorf("thresholds %v last %d, want [25 75] and 25 (crossed at once)", b.Thresholds, b.LastAlert)
		}
		got, _ := events(t, d)
		if got[eventKey{"budget.threshold_crossed", "team", 25}] != 1 {
			t.Errorf("events = %v, want the team's 25 %% at once", got)
		}
	})
	t.Run("LowerCapCrosses", func(t *testing.T) {
		mustCap(t, l, team, 350) // 300/350 = 85.7 %
		got, _ := events(t, d)
		if got[eventKey{"budget.threshold_crossed", "team", 75}] != 1 {
			t.Errorf("events = %v, want the team's 75 %% when the cap was lowered", got)
		}
	})
	t.Run("NextPeriodStartsAgain", func(t *testing.T) {
		// The standing thresholds are copied onto a new period's row, with nothing alerted yet.
		later := now.AddDate(0, 1, 0)
		d.Now = func() time.Time { return later }
		b := budgetOf(t, l, team)
		if b.Period != "2026-12" || fmt.Sprint(b.Thresholds) != "[25 75]" || b.LastAlert != 0 {
			t.Errorf("next period %s thresholds %v last %d", b.Period, b.Thresholds, b.LastAlert)
		}
		d.Now = func() time.Time { return now }
	})
	t.Run("DefaultsRestored", func(t *testing.T) {
		b, err := l.SetThresholds(ctx, team, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.Thresholds, app.DefaultThresholds) {
			t.Errorf("thresholds %v, want the defaults", b.Thresholds)
		}
		// 85.7 % with 75 alerted: the default 80 is past already and alerts now.
		got, _ := events(t, d)
		if got[eventKey{"budget.threshold_crossed", "team", 80}] != 1 {
			t.Errorf("events = %v, want the team's 80 %%", got)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, ts := range [][]int{{0}, {-5}, {1001}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}} {
			_, err := l.SetThresholds(ctx, team, ts)
			if app.ErrorCode(err) != app.EINVALID {
				t.Errorf("thresholds %v: err = %v, want EINVALID", ts, err)
			}
		}
		_, err := l.SetThresholds(ctx, app.Node{Kind: app.NodeTeam, ID: "00000000-0000-0000-0000-000000000009"}, []int{50})
		if app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("unknown node: err = %v, want ENOTFOUND", err)
		}
	})
}

// TestThresholdAlertsConcurrent fires hundreds of concurrent requests from three ledgers (three
// pools, as three gateway processes) across every threshold of four nodes and the global node,
// and checks each threshold alerted exactly once per node-period.
func TestThresholdAlertsConcurrent(t *testing.T) {
	ctx := context.Background()
	const processes = 3
	dbs, ledgers := mustProcesses(t, processes)
	tn := mustTenant(t, dbs[0], "acme")
	for _, n := range tn.nodes() {
		mustCap(t, ledgers[0], n, 300)
	}
	mustCap(t, ledgers[0], app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, 300)
	now := dbs[0].Now()

	// 400 requests of 1 yen against caps of 300 yen: 300 are admitted and pass 50/80/90/100.
	const n = 400
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := ledgers[i%processes]
			res, err := l.Reserve(ctx, reserveReq(tn, app.Micro, now))
			if err != nil {
				errs <- err
				return
			}
			if !res.Admitted {
				return
			}
			_, err = ledgers[(i+1)%processes].Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID,
				Status: app.StatusCommitted, Actual: app.Micro, GlobalActual: app.Micro, LockIDs: res.Reservation.LockIDs()})
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mustLedgerConsistent(t, dbs[0], false)
	var spent int64
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT spent FROM budgets WHERE node_kind = 'org'`).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if spent != 300*app.Micro {
		t.Fatalf("org spent %d, want the whole cap", spent)
	}
	// Every threshold of every node exactly once, whether it came alone or with others.
	rows, err := dbs[0].Pool.Query(ctx, `SELECT node_kind, t, count(*) FROM alert_events, unnest(crossed) AS t
		WHERE kind = 'budget.threshold_crossed' GROUP BY node_kind, t ORDER BY node_kind, t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string][]int{}
	for rows.Next() {
		var kind string
		var th, count int
		if err := rows.Scan(&kind, &th, &count); err != nil {
			t.Fatal(err)
		}
		if count != 1 {
			t.Errorf("%s threshold %d alerted %d times", kind, th, count)
		}
		seen[kind] = append(seen[kind], th)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"global", "org", "team", "member", "key"} {
		if !slices.Equal(seen[kind], app.DefaultThresholds) {
			t.Errorf("%s: thresholds alerted %v, want %v", kind, seen[kind], app.DefaultThresholds)
		}
	}
	var globalOrg *string
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT org_id::text FROM alert_events WHERE node_kind = 'global' LIMIT 1`).Scan(&globalOrg); err != nil {
		t.Fatal(err)
	}
	if globalOrg != nil {
		t.Errorf("a global event belongs to org %s, want none (the operator's)", *globalOrg)
	}
}

func TestAlertDeliveryPipeline(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	ctx := context.Background()
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	tn := mustTenant(t, d, "acme")
	other := mustTenant(t, d, "other")
	mustCap(t, l, app.Node{Kind: app.NodeOrg, ID: tn.org.ID}, 100)

	mail, err := d.CreateAlertChannel(ctx, app.AlertChannel{OrgID: tn.org.ID, Name: "finance", Kind: app.ChannelEmail,
		Emails: []string{"cfo@example.com"}, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := d.CreateAlertChannel(ctx, app.AlertChannel{OrgID: tn.org.ID, Name: "hook", Kind: app.ChannelWebhook,
		URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_AAAA"}, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateAlertChannel(ctx, app.AlertChannel{OrgID: other.org.ID, Name: "other", Kind: app.ChannelEmail,
		Emails: []string{"x@example.com"}, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateAlertChannel(ctx, app.AlertChannel{OrgID: tn.org.ID, Name: "off", Kind: app.ChannelEmail,
		Emails: []string{"off@example.com"}, Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncOperatorEmails(ctx, []string{"ops@example.com"}); err != nil {
		t.Fatal(err)
	}
	mustCap(t, l, app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, 100)

	spend(t, l, tn, 60*app.Micro, 60*app.Micro, now) // org 60 % and global 60 %: two events
	var rendered []string
	render := func(ev app.AlertEvent, ch app.AlertChannel) (db.Rendered, error) {
		rendered = append(rendered, fmt.Sprintf("%s/%s/%d->%s", ev.Node.Kind, ev.NodeName, ev.Threshold, ch.Name))
		return db.Rendered{Subject: "s", Body: string(ev.Kind)}, nil
	}
	n, err := d.FanOutAlerts(ctx, render, 24*time.Hour, 100)
	if err != nil || n != 2 {
		t.Fatalf("fan out: %d %v", n, err)
	}
	slices.Sort(rendered)
	want := "[global//50->operator (config) org/acme/50->finance org/acme/50->hook]"
	if fmt.Sprint(rendered) != want {
		t.Fatalf("rendered %v, want %v", rendered, want)
	}
	if n, err := d.FanOutAlerts(ctx, render, 24*time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("second fan out: %d %v, want nothing", n, err)
	}

	t.Run("ClaimsAreDisjoint", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]int{}
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, c := range cs {
					got[c.Delivery.ID]++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(got) != 3 {
			t.Fatalf("claimed %d deliveries, want 3", len(got))
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("delivery %s claimed %d times", id, n)
			}
		}
		if cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, ""); err != nil || len(cs) != 0 {
			t.Fatalf("claim while leased: %d %v", len(cs), err)
		}
	})

	// The lease ends: the deliveries are claimed again (a worker that died mid-send).
	later := now.Add(2 * time.Minute)
	d.Now = func() time.Time { return later }
	cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, "")
	if err != nil || len(cs) != 3 {
		t.Fatalf("reclaim after the lease: %d %v", len(cs), err)
	}
	var hookClaim db.Claimed
	for _, c := range cs {
		if c.Delivery.Attempts != 2 {
			t.Errorf("attempts = %d, want 2", c.Delivery.Attempts)
		}
		if c.Channel.ID == hook.ID {
			hookClaim = c
		}
	}
	if hookClaim.Channel.URL != hook.URL || len(hookClaim.Channel.Secrets) != 1 {
		t.Fatalf("claimed hook channel %+v", hookClaim.Channel)
	}

	t.Run("StaleFailureIgnored", func(t *testing.T) {
		// The worker whose lease ran out reports its failure late: logged, but the delivery
		// belongs to the attempt that took over.
		stale := hookClaim
		stale.Delivery.Attempts = 1
		st, err := d.FinishAlertAttempt(ctx, stale, db.Attempt{Started: now, Finished: later, Error: "late",
			Retry: later.Add(time.Minute)})
		if err != nil || st != app.DeliveryPending {
			t.Fatalf("stale finish: %v %v, want pending untouched", st, err)
		}
		dl, _, err := d.AlertDelivery(ctx, tn.org.ID, hookClaim.Delivery.ID)
		if err != nil || dl.LastError != "" || !dl.NextAttemptAt.Equal(now) {
			t.Fatalf("delivery changed by a stale attempt: %+v %v", dl, err)
		}
	})
	t.Run("RetryThenGiveUp", func(t *testing.T) {
		st, err := d.FinishAlertAttempt(ctx, hookClaim, db.Attempt{Started: later, Finished: later, StatusCode: 500,
			Error: "HTTP 500", Retry: later.Add(time.Hour)})
		if err != nil || st != app.DeliveryPending {
			t.Fatalf("finish: %v %v", st, err)
		}
		// Claimed by id (a test send does that) whatever its due time.
		cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, hookClaim.Delivery.ID)
		if err != nil || len(cs) != 1 || cs[0].Delivery.Attempts != 3 {
			t.Fatalf("claim by id: %+v %v", cs, err)
		}
		// Past the give-up time (24 h after the fan-out) the delivery fails for good.
		cl := cs[0]
		st, err = d.FinishAlertAttempt(ctx, cl, db.Attempt{Started: later, Finished: later, Error: "refused",
			Retry: now.Add(25 * time.Hour)})
		if err != nil || st != app.DeliveryFailed {
			t.Fatalf("finish past give-up: %v %v, want failed", st, err)
		}
		dl, log, err := d.AlertDelivery(ctx, tn.org.ID, hookClaim.Delivery.ID)
		if err != nil {
			t.Fatal(err)
		}
		if dl.Status != app.DeliveryFailed || dl.Attempts != 3 || dl.LastError != "refused" || len(log) != 3 {
			t.Fatalf("delivery %+v log %+v", dl, log)
		}
		if log[0].Error != "late" || log[1].Attempt != 2 || log[1].StatusCode != 500 || log[2].Attempt != 3 || log[2].Error != "refused" {
			t.Errorf("log = %+v", log)
		}
	})
	t.Run("Resend", func(t *testing.T) {
		dl, err := d.ResendAlertDelivery(ctx, tn.org.ID, hookClaim.Delivery.ID, 24*time.Hour)
		if err != nil || dl.Status != app.DeliveryPending {
			t.Fatalf("resend: %+v %v", dl, err)
		}
		cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, "")
		if err != nil || len(cs) != 1 || cs[0].Delivery.ID != dl.ID || cs[0].Delivery.Body != string(app.AlertThreshold) {
			t.Fatalf("claim after resend: %+v %v", cs, err)
		}
		st, err := d.FinishAlertAttempt(ctx, cs[0], db.Attempt{Started: later, Finished: later, OK: true, StatusCode: 204})
		if err != nil || st != app.DeliverySent {
			t.Fatalf("finish: %v %v", st, err)
		}
	})
	t.Run("TenantScoped", func(t *testing.T) {
		if _, _, err := d.AlertDelivery(ctx, other.org.ID, hookClaim.Delivery.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("another org's delivery: %v, want ENOTFOUND", err)
		}
		if _, err := d.ResendAlertDelivery(ctx, other.org.ID, hookClaim.Delivery.ID, time.Hour); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("resend another org's delivery: %v, want ENOTFOUND", err)
		}
		if _, err := d.AlertChannel(ctx, other.org.ID, mail.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("another org's channel: %v, want ENOTFOUND", err)
		}
		if _, err := d.AlertChannel(ctx, "", mail.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("an org's channel in the operator scope: %v, want ENOTFOUND", err)
		}
		ds, err := d.AlertDeliveries(ctx, other.org.ID, db.DeliveryFilter{Limit: 100})
		if err != nil || len(ds) != 0 {
			t.Errorf("other org's deliveries: %d %v", len(ds), err)
		}
		evs, err := d.AlertEvents(ctx, "", 100)
		if err != nil || len(evs) != 1 || evs[0].Node.Kind != app.NodeGlobal {
			t.Errorf("operator events: %+v %v", evs, err)
		}
	})
	t.Run("ManagedChannelReadOnly", func(t *testing.T) {
		chs, err := d.AlertChannels(ctx, "")
		if err != nil || len(chs) != 1 || !chs[0].Managed {
			t.Fatalf("operator channels: %+v %v", chs, err)
		}
		name := "x"
		if _, err := d.UpdateAlertChannel(ctx, "", chs[0].ID, db.ChannelPatch{Name: &name}); app.ErrorCode(err) != app.EFORBIDDEN {
			t.Errorf("update managed: %v, want EFORBIDDEN", err)
		}
		if err := d.DeleteAlertChannel(ctx, "", chs[0].ID); app.ErrorCode(err) != app.EFORBIDDEN {
			t.Errorf("delete managed: %v, want EFORBIDDEN", err)
		}
	})
	t.Run("Rotate", func(t *testing.T) {
		ch, err := d.RotateWebhookSecret(ctx, tn.org.ID, hook.ID, "whsec_BBBB", 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ch.Secrets) != "[whsec_BBBB]" || ch.PrevSecret != "whsec_AAAA" {
			t.Errorf("after rotation: %+v", ch)
		}
		if _, err := d.RotateWebhookSecret(ctx, tn.org.ID, mail.ID, "whsec_CCCC", time.Hour); app.ErrorCode(err) != app.EINVALID {
			t.Errorf("rotate an email channel: %v, want EINVALID", err)
		}
	})
	t.Run("TestAlert", func(t *testing.T) {
		id, err := d.CreateTestAlert(ctx, tn.org.ID, hook.ID, render)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := d.ClaimAlertDeliveries(ctx, time.Minute, 10, id)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim test: %v %v", cs, err)
		}
		if got := cs[0].Channel.Secrets; fmt.Sprint(got) != "[whsec_BBBB whsec_AAAA]" {
			t.Errorf("secrets during the rotation overlap = %v, want both", got)
		}
		st, err := d.FinishAlertAttempt(ctx, cs[0], db.Attempt{Started: later, Finished: later, Error: "refused", Retry: later.Add(time.Minute)})
		if err != nil || st != app.DeliveryFailed {
			t.Errorf("a failed test send: %v %v, want failed at once", st, err)
		}
		if _, err := d.CreateTestAlert(ctx, other.org.ID, hook.ID, render); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("test another org's channel: %v, want ENOTFOUND", err)
		}
	})
}
