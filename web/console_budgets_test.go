package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"yosan/app"
	"yosan/web/views"
)

// capOf returns a node's cap in its current period (nil: no cap).
func (s *server) capOf(t *testing.T, kind app.NodeKind, id string) *int64 {
	t.Helper()
	b, err := s.ledger.Budget(context.Background(), app.Node{Kind: kind, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return b.Cap
}

func capForm(kind, id string) string { return `id="cap-` + kind + `-` + id + `"` }

func TestConsoleBudgetsPage(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "bt")
	path := "/console/orgs/" + o.tn.org + "/budgets"
	tn := o.tn
	orgForm, teamForm := capForm("org", tn.org), capForm("team", tn.team)
	memberForm, keyForm := capForm("member", tn.member), capForm("key", tn.key)
	team2Form := capForm("team", o.team2)

	// Which cap forms each role sees: what it may edit, nothing more.
	tests := []struct {
		role     string
		forms    []string
		notForms []string
	}{
		{"owner", []string{orgForm, teamForm, memberForm, keyForm, team2Form}, nil},
		{"finance_admin", []string{orgForm, teamForm, memberForm, keyForm, team2Form}, nil},
		{"operator", []string{orgForm, teamForm, memberForm, keyForm}, nil},
		{"team_admin", []string{memberForm, keyForm}, []string{orgForm, teamForm, team2Form}},
		{"team_admin_other", nil, []string{orgForm, teamForm, memberForm, keyForm, team2Form}},
		{"viewer", nil, []string{orgForm, teamForm, memberForm, keyForm, team2Form, `name="cap"`}},
	}
	for _, tc := range tests {
		t.Run(tc.role, func(t *testing.T) {
			body := o.users[tc.role].mustPage(path, 200)
			// Every role that may view sees the whole tree.
			mustContain(t, body, "Budget tree", "<strong>Acme</strong>", "<strong>research</strong>", "<strong>sales</strong>", ">ai@example.com <", ">ci <",
				`id="node-key-`+tn.key+`"`, "Cap changes")
			mustContain(t, body, tc.forms...)
			mustNotContain(t, body, tc.notForms...)
		})
	}
	t.Run("OtherOrgsOwner", func(t *testing.T) {
		o.users["other_owner"].mustPage(path, 404)
	})
	t.Run("BadPeriod", func(t *testing.T) {
		o.users["owner"].mustPage(path+"?period=2026-13", 400)
	})
	t.Run("PastPeriodReadOnly", func(t *testing.T) {
		if _, err := s.db.Pool.Exec(context.Background(), `INSERT INTO budgets (node_kind, node_id, org_id, period, currency, cap, spent)
			VALUES ('org', $1, $1, '2020-01', 'JPY', $2, $3)`, tn.org, 5_000_000*app.Micro, 1_234_567*app.Micro); err != nil {
			t.Fatal(err)
		}
		body := o.users["owner"].mustPage(path, 200)
		mustContain(t, body, `<option value="2020-01">`) // the selector lists it
		body = o.users["owner"].mustPage(path+"?period=2020-01", 200)
		mustContain(t, body, "Not the current month", "read-only", "¥5,000,000", "¥1,234,567", "24.7 %")
		mustNotContain(t, body, `name="cap"`)
	})
}

func TestConsoleBudgetsSetCap(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "cap")
	tn := o.tn
	base := "/console/orgs/" + tn.org + "/budgets"
	owner := o.users["owner"]
	owner.mustPage(base, 200)
	million := int64(1_000_000) * app.Micro

	for _, tc := range []struct {
		name, kind, id, typed string
	}{
		{"Commas", "team", tn.team, "1,000,000"},
		{"Plain", "member", tn.member, "1000000"},
		{"FullWidth", "org", tn.org, "１，０００，０００"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, loc := owner.mustForm(base+"/"+tc.kind+"/"+tc.id, url.Values{"cap": {tc.typed}}, 303)
			if loc != base+"#node-"+tc.kind+"-"+tc.id {
				t.Errorf("redirect to %q", loc)
			}
			if c := s.capOf(t, app.NodeKind(tc.kind), tc.id); c == nil || *c != million {
				t.Fatalf("cap %v, want 1000000 yen", c)
			}
			body := owner.mustPage(base, 200)
			want := "Cap of " + tc.kind + " "
			mustContain(t, body, want, "set to ¥1,000,000", `value="1,000,000"`)
		})
	}
	t.Run("FlashNamesTheNode", func(t *testing.T) {
		owner.mustForm(base+"/team/"+tn.team, url.Values{"cap": {"1,000,000"}}, 303)
		mustContain(t, owner.mustPage(base, 200), "Cap of team research set to ¥1,000,000")
	})
	t.Run("AboveParentFlagged", func(t *testing.T) {
		owner.mustForm(base+"/key/"+tn.key, url.Values{"cap": {"2,000,000"}}, 303)
		body := owner.mustPage(base, 200)
		// The member's cap (1,000,000) is the key's nearest capped ancestor.
		mustContain(t, body, "above member cap")
		owner.mustForm(base+"/key/"+tn.key, url.Values{"cap": {""}}, 303)
	})
	t.Run("BlankRemovesCap", func(t *testing.T) {
		owner.mustForm(base+"/member/"+tn.member, url.Values{"cap": {"  "}}, 303)
		if c := s.capOf(t, app.NodeMember, tn.member); c != nil {
			t.Fatalf("cap %d, want none", *c)
		}
		mustContain(t, owner.mustPage(base, 200), "Cap of member ai@example.com removed")
	})
	for _, typed := range []string{"abc", "-5", "1.0000001"} {
		t.Run("Invalid"+typed, func(t *testing.T) {
			body, _ := owner.mustForm(base+"/team/"+tn.team, url.Values{"cap": {typed}}, 400)
			id := "cap-team-" + tn.team
			mustContain(t, body, "Enter an amount such as 1,000,000", `value="`+typed+`"`, `aria-invalid="true"`,
				`aria-describedby="`+id+`-error"`, `id="`+id+`-error"`, "Budget tree")
			if c := s.capOf(t, app.NodeTeam, tn.team); c == nil || *c != million {
				t.Fatalf("cap %v changed by a refused form", c)
			}
		})
	}

	t.Run("TeamAdmin", func(t *testing.T) {
		ta := o.users["team_admin"]
		ta.mustPage(base, 200)
		ta.mustForm(base+"/key/"+tn.key, url.Values{"cap": {"5,000"}}, 303)
		if c := s.capOf(t, app.NodeKey, tn.key); c == nil || *c != 5000*app.Micro {
			t.Fatalf("key cap %v, want 5000 yen", c)
		}
		ta.mustForm(base+"/member/"+tn.member, url.Values{"cap": {"6000"}}, 303)
		ta.mustForm(base+"/team/"+tn.team, url.Values{"cap": {"1"}}, 403)
		ta.mustForm(base+"/org/"+tn.org, url.Values{"cap": {"1"}}, 403)
		// Another team's team_admin may not touch this team's key.
		other := o.users["team_admin_other"]
		other.mustPage(base, 200)
		other.mustForm(base+"/key/"+tn.key, url.Values{"cap": {"1"}}, 403)
		if c := s.capOf(t, app.NodeTeam, tn.team); c == nil || *c != million {
			t.Fatalf("team cap %v changed by a refused form", c)
		}
	})
	t.Run("FinanceAdmin", func(t *testing.T) {
		fa := o.users["finance_admin"]
		fa.mustPage(base, 200)
		fa.mustForm(base+"/org/"+tn.org, url.Values{"cap": {"2000000"}}, 303)
	})
	t.Run("ViewerForbidden", func(t *testing.T) {
		v := o.users["viewer"]
		v.mustPage(base, 200)
		v.mustForm(base+"/key/"+tn.key, url.Values{"cap": {"1"}}, 403)
		v.mustForm(base+"/org/"+tn.org, url.Values{"cap": {"1"}}, 403)
	})
	t.Run("OtherOrg", func(t *testing.T) {
		other := o.users["other_owner"]
		other.mustPage("/console/orgs/"+o.other.org+"/budgets", 200)
		// Another org's URL, and this org's node through the other org's URL: both unknown.
		other.mustForm(base+"/team/"+tn.team, url.Values{"cap": {"1"}}, 404)
		other.mustForm("/console/orgs/"+o.other.org+"/budgets/team/"+tn.team, url.Values{"cap": {"1"}}, 404)
		other.mustForm("/console/orgs/"+o.other.org+"/budgets/global/"+app.GlobalNodeID, url.Values{"cap": {"1"}}, 404)
	})
	t.Run("NoCSRF", func(t *testing.T) {
		owner.mustForm(base+"/team/"+tn.team, url.Values{"cap": {"1"}, "_csrf": {"forged"}}, 403)
	})

	t.Run("History", func(t *testing.T) {
		body := owner.mustPage(base, 200)
		mustContain(t, body, "Cap changes", "cap-owner@example.com", "cap-team-admin@example.com",
			"cap-finance-admin@example.com", "→ ¥2,000,000", "→ ¥5,000")
		es, err := s.db.ActionLog(context.Background(), tn.org, "budget.cap_set", 100)
		if err != nil {
			t.Fatal(err)
		}
		// Every accepted change, and only those: 3 + 1 + 2 + 1 + 2 (team admin) + 1 (finance).
		if len(es) != 10 {
			t.Errorf("%d cap_set entries, want 10", len(es))
		}
		first := es[len(es)-1]
		if first.TargetKind != "team" || first.TargetID != tn.team || first.Details["old"] != nil || first.Details["new"] != "1000000" ||
			first.Actor != "cap-owner@example.com" {
			t.Errorf("first entry %+v, want team cap null -> 1000000 by the owner", first)
		}
		last := es[0]
		if last.TargetKind != "org" || last.Details["old"] != "1000000" || last.Details["new"] != "2000000" {
			t.Errorf("last entry %+v, want org cap 1000000 -> 2000000", last)
		}
	})
}

// TestConsoleBudgetsManyKeys: the tree is read in one statement whatever the number of keys
// (db.BudgetTree joins every node with its budget row), so an org with 1,000 keys renders them
// all on one page.
func TestConsoleBudgetsManyKeys(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	if _, err := s.db.Pool.Exec(context.Background(), `INSERT INTO api_keys (id, org_id, team_id, member_id, name, plan, key_hash, prefix, created_at)
		SELECT gen_random_uuid(), $1, $2, CASE WHEN g % 2 = 0 THEN $3::uuid END, 'bulk-' || g, 'free',
			sha256(('bulk-' || g)::bytea), 'ysk-' || g, now()
		FROM generate_series(1, 1000) g`, tn.org, tn.team, tn.member); err != nil {
		t.Fatal(err)
	}
	b := s.mustUser(t, "many@example.com", "finance_admin", tn.org, "")
	body := b.mustPage("/console/orgs/"+tn.org+"/budgets", 200)
	if n := strings.Count(body, `id="node-key-`); n != 1001 {
		t.Errorf("%d key rows, want 1001", n)
	}
	if n := strings.Count(body, `name="cap"`); n != 1+1+1+1001 {
		t.Errorf("%d cap forms, want one per node (1004)", n)
	}
	mustContain(t, body, ">bulk-1 <", ">bulk-1000 <", views.MoneyText("JPY", 0))
}
