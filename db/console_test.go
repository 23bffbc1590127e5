package db_test

import (
	"context"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

func nodeOf(tb testing.TB, nodes []db.NodeUsage, kind app.NodeKind, id string) db.NodeUsage {
	tb.Helper()
	for _, n := range nodes {
		if n.Kind == kind && n.ID == id {
			return n
		}
	}
	tb.Fatalf("no %s node %s in %+v", kind, id, nodes)
	return db.NodeUsage{}
}

func TestOrgUsage(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	ctx := context.Background()
	a, b := mustTenant(t, d, "acme"), mustTenant(t, d, "other")
	y := int64(app.Micro)
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, tokyo)
	to := from.AddDate(0, 1, 0)

	t.Run("Empty", func(t *testing.T) {
		mustCap(t, l, app.Node{Kind: app.NodeOrg, ID: b.org.ID}, 500)
		// A period without rows still shows the org's standing cap.
		u, err := d.OrgUsage(ctx, b.org.ID, "2026-12", "Asia/Tokyo", to, to.AddDate(0, 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Nodes) != 1 || u.Nodes[0].Kind != app.NodeOrg || u.Nodes[0].HasRow || u.Nodes[0].Cap == nil || *u.Nodes[0].Cap != 500*y {
			t.Fatalf("nodes %+v, want the org alone with its standing cap", u.Nodes)
		}
		if u.Nodes[0].Name != "other" || len(u.Models)+len(u.Days)+len(u.Overruns) != 0 {
			t.Fatalf("usage %+v, want nothing but the org", u)
		}
	})

	spend(t, l, a, 100*y, 40*y, now)
	spend(t, l, a, 100*y, 60*y, now)
	spend(t, l, a, 10*y, 25*y, now) // an overrun
	if res, err := l.Reserve(ctx, reserveReq(a, 7*y, now)); err != nil || !res.Admitted {
		t.Fatalf("pending reserve: %v %+v", err, res)
	}
	spend(t, l, b, 100*y, 99*y, now)

	u, err := d.OrgUsage(ctx, a.org.ID, "2026-11", "Asia/Tokyo", from, to)
	if err != nil {
		t.Fatal(err)
	}
	org := nodeOf(t, u.Nodes, app.NodeOrg, a.org.ID)
	if !org.HasRow || org.Spent != 125*y || org.Reserved != 7*y || org.Name != "acme" {
		t.Errorf("org node %+v, want spent 125 reserved 7", org)
	}
	if len(u.Nodes) != 4 {
		t.Errorf("%d nodes, want the 4 of acme's path (no other org's)", len(u.Nodes))
	}
	if m := nodeOf(t, u.Nodes, app.NodeMember, a.member.ID); m.Name != "acme@example.com" || m.TeamName != "team-acme" || m.TeamID != a.team.ID {
		t.Errorf("member node %+v", m)
	}
	if k := nodeOf(t, u.Nodes, app.NodeKey, a.key.ID); k.Name != "k" || k.MemberEmail != "acme@example.com" || k.KeyPrefix == "" {
		t.Errorf("key node %+v", k)
	}
	if len(u.Models) != 1 || u.Models[0] != (db.ModelUsage{Model: "demo-mini", Requests: 3, Spent: 125 * y, Reserved: 7 * y}) {
		t.Errorf("models %+v", u.Models)
	}
	// 12:00 UTC is 21:00 in Tokyo: the same calendar day.
	if len(u.Days) != 1 || u.Days[0].Day.Format("2006-01-02") != "2026-11-15" || u.Days[0].Spent != 125*y || u.Days[0].Requests != 3 {
		t.Errorf("days %+v", u.Days)
	}
	if len(u.Overruns) != 1 || u.OverrunCount != 1 || u.Overruns[0].Reserved != 10*y || u.Overruns[0].Actual != 25*y ||
		u.Overruns[0].KeyName != "k" || u.Overruns[0].Model != "demo-mini" {
		t.Errorf("overruns %+v (count %d)", u.Overruns, u.OverrunCount)
	}

	t.Run("DayInOrgTimeZone", func(t *testing.T) {
		// 2026-11-15 16:00 UTC is already the 16th in Tokyo.
		late := time.Date(2026, 11, 15, 16, 0, 0, 0, time.UTC)
		d.Now = func() time.Time { return late }
		spend(t, l, a, 5*y, 5*y, late)
		u, err := d.OrgUsage(ctx, a.org.ID, "2026-11", "Asia/Tokyo", from, to)
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Days) != 2 || u.Days[1].Day.Format("2006-01-02") != "2026-11-16" || u.Days[1].Spent != 5*y {
			t.Errorf("days %+v, want the late spend on the 16th", u.Days)
		}
	})
}

func TestBudgetTree(t *testing.T) {
	d := dbtest.New(t)
	now := fixedNow(d)
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	ctx := context.Background()
	a, b := mustTenant(t, d, "acme"), mustTenant(t, d, "other")
	y := int64(app.Micro)
	spend(t, l, a, 10*y, 3*y, now)
	unbound, err := d.CreateKey(ctx, app.APIKey{OrgID: a.org.ID, TeamID: a.team.ID, Name: "shared", Plan: "free"}, db.NewKeySecret())
	if err != nil {
		t.Fatal(err)
	}
	// A cap set directly on the standing caps applies to the current period without a row.
	if _, err := d.Pool.Exec(ctx, `INSERT INTO budget_caps (node_kind, node_id, cap, updated_at) VALUES ('key', $1, $2, now())`,
		unbound.ID, 42*y); err != nil {
		t.Fatal(err)
	}

	nodes, err := d.BudgetTree(ctx, a.org.ID, "2026-11", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 5 || nodes[0].Kind != app.NodeOrg {
		t.Fatalf("nodes %+v, want acme's org, team, member and two keys, the org first", nodes)
	}
	if k := nodeOf(t, nodes, app.NodeKey, a.key.ID); !k.HasRow || k.Spent != 3*y || k.MemberID != a.member.ID || k.TeamID != a.team.ID {
		t.Errorf("bound key %+v", k)
	}
	if k := nodeOf(t, nodes, app.NodeKey, unbound.ID); k.HasRow || k.Cap == nil || *k.Cap != 42*y || k.MemberID != "" ||
		len(k.Thresholds) == 0 {
		t.Errorf("unbound key %+v, want its standing cap and default thresholds", k)
	}
	past, err := d.BudgetTree(ctx, a.org.ID, "2026-10", false)
	if err != nil {
		t.Fatal(err)
	}
	if k := nodeOf(t, past, app.NodeKey, unbound.ID); k.Cap != nil || k.Spent != 0 {
		t.Errorf("unbound key in a past period %+v, want no cap", k)
	}
	ps, err := d.BudgetPeriods(ctx, a.org.ID)
	if err != nil || len(ps) != 1 || ps[0] != "2026-11" {
		t.Errorf("periods %v %v", ps, err)
	}

	t.Run("BudgetNode", func(t *testing.T) {
		n, err := d.BudgetNode(ctx, a.org.ID, app.NodeKey, a.key.ID)
		if err != nil || n.TeamID != a.team.ID || n.Name != "k" {
			t.Fatalf("key node %+v %v", n, err)
		}
		if n, err := d.BudgetNode(ctx, a.org.ID, app.NodeOrg, a.org.ID); err != nil || n.TeamID != "" || n.Name != "acme" {
			t.Fatalf("org node %+v %v", n, err)
		}
		for _, tc := range []struct {
			name string
			kind app.NodeKind
			id   string
			code string
		}{
			{"OtherOrgsTeam", app.NodeTeam, b.team.ID, app.ENOTFOUND},
			{"OtherOrg", app.NodeOrg, b.org.ID, app.ENOTFOUND},
			{"OtherOrgsKey", app.NodeKey, b.key.ID, app.ENOTFOUND},
			{"NotAUUID", app.NodeMember, "x", app.ENOTFOUND},
			{"Global", app.NodeGlobal, app.GlobalNodeID, app.EINVALID},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := d.BudgetNode(ctx, a.org.ID, tc.kind, tc.id); app.ErrorCode(err) != tc.code {
					t.Errorf("error %v, want %s", err, tc.code)
				}
			})
		}
	})

	t.Run("ActionLog", func(t *testing.T) {
		for _, e := range []db.AuditEntry{
			{Actor: "a@example.com", OrgID: a.org.ID, Action: "budget.cap_set", TargetKind: "team", TargetID: a.team.ID,
				Details: map[string]any{"old": nil, "new": "1000000"}},
			{Actor: "a@example.com", OrgID: a.org.ID, Action: "key.revoke", TargetKind: "key", TargetID: a.key.ID},
			{Actor: "b@example.com", OrgID: b.org.ID, Action: "budget.cap_set", TargetKind: "team", TargetID: b.team.ID},
		} {
			if err := d.Audit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		es, err := d.ActionLog(ctx, a.org.ID, "budget.cap_set", 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].TargetID != a.team.ID || es[0].Details["new"] != "1000000" || es[0].Details["old"] != nil {
			t.Errorf("entries %+v, want acme's one cap change", es)
		}
	})
}

// TestCreateMemberOneSpelling: an address is one member whatever its case or surrounding
// spaces, and a malformed one is refused, whichever surface adds it.
func TestCreateMemberOneSpelling(t *testing.T) {
	d := dbtest.New(t)
	tn := mustTenant(t, d, "acme")
	ctx := context.Background()
	m, err := d.CreateMember(ctx, tn.org.ID, tn.team.ID, "  Ann@Example.COM ")
	if err != nil || m.Email != "ann@example.com" {
		t.Fatalf("create: %+v %v", m, err)
	}
	if _, err := d.CreateMember(ctx, tn.org.ID, tn.team.ID, "ann@example.com"); app.ErrorCode(err) != app.ECONFLICT {
		t.Errorf("the same address in lower case: %v, want a conflict", err)
	}
	if _, err := d.CreateMember(ctx, tn.org.ID, tn.team.ID, "not an address"); app.ErrorCode(err) != app.EINVALID {
		t.Errorf("a malformed address: %v, want invalid", err)
	}
}
