package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

func mustAudit(tb testing.TB, d *db.DB, e db.AuditEntry) {
	tb.Helper()
	if err := d.Audit(context.Background(), e); err != nil {
		tb.Fatalf("audit %s: %v", e.Action, err)
	}
}

func TestAuditAppendOnly(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	mustAudit(t, d, db.AuditEntry{Actor: "admin token", Action: "org.create"})
	for _, tt := range []struct{ name, stmt string }{
		{"UpdateActor", `UPDATE audit_log SET actor = 'someone else'`},
		{"UpdateDetails", `UPDATE audit_log SET details = '{"x": 1}'`},
		{"Delete", `DELETE FROM audit_log`},
		{"Truncate", `TRUNCATE audit_log`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Pool.Exec(ctx, tt.stmt)
			mustPgCode(t, err, "23514")
			if !strings.Contains(err.Error(), "append-only") {
				t.Errorf("error %v does not say the log is append-only", err)
			}
			mustCode(t, db.FormatError(err), app.EINVALID)
		})
	}
	es, err := d.AuditLog(ctx, "", 0, 0)
	if err != nil || len(es) != 1 || es[0].Actor != "admin token" || len(es[0].Details) != 0 {
		t.Errorf("after the refused changes: %+v, %v", es, err)
	}
}

func TestAuditLog(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	clk := newAuthClock(d)
	a := mustTenant(t, d, "acme")
	b := mustTenant(t, d, "globex")
	ann := mustAuthUser(t, d, "ann@example.com", false)

	mustAudit(t, d, db.AuditEntry{ActorID: ann.ID, Actor: ann.Email, OrgID: a.org.ID, Action: "budget.cap_set",
		TargetKind: "team", TargetID: a.team.ID, Details: map[string]any{"from": nil, "to": float64(1000), "currency": "JPY"}})
	clk.Add(time.Second)
	mustAudit(t, d, db.AuditEntry{Actor: "admin token", OrgID: b.org.ID, Action: "key.revoke", TargetKind: "key", TargetID: b.key.ID})
	clk.Add(time.Second)
	mustAudit(t, d, db.AuditEntry{Actor: "admin token", Action: "budget.cap_set", TargetKind: "global"})
	clk.Add(time.Second)
	mustAudit(t, d, db.AuditEntry{ActorID: ann.ID, Actor: ann.Email, OrgID: a.org.ID, Action: "key.create", TargetKind: "key", TargetID: a.key.ID})

	actions := func(es []db.AuditEntry) string {
		var s []string
		for _, e := range es {
			s = append(s, e.Action)
		}
		return strings.Join(s, ",")
	}
	t.Run("ScopedByOrg", func(t *testing.T) {
		es, err := d.AuditLog(ctx, a.org.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if actions(es) != "key.create,budget.cap_set" {
			t.Fatalf("org A log: %s", actions(es))
		}
		for _, e := range es {
			if e.OrgID != a.org.ID {
				t.Errorf("entry of another org: %+v", e)
			}
		}
		cap := es[1]
		if cap.ActorID != ann.ID || cap.Actor != ann.Email || cap.TargetKind != "team" || cap.TargetID != a.team.ID ||
			!cap.At.Equal(clk.Now().Add(-3*time.Second)) || cap.Details["to"] != float64(1000) || cap.Details["currency"] != "JPY" {
			t.Errorf("cap entry %+v", cap)
		}
		if v, ok := cap.Details["from"]; !ok || v != nil {
			t.Errorf("details lost a null: %v", cap.Details)
		}
		es, err = d.AuditLog(ctx, b.org.ID, 0, 0)
		if err != nil || actions(es) != "key.revoke" {
			t.Errorf("org B log: %s, %v", actions(es), err)
		}
	})
	t.Run("AllOrgsForOperators", func(t *testing.T) {
		es, err := d.AuditLog(ctx, "", 0, 0)
		if err != nil || actions(es) != "key.create,budget.cap_set,key.revoke,budget.cap_set" {
			t.Fatalf("all: %s, %v", actions(es), err)
		}
		if es[1].OrgID != "" || es[1].ActorID != "" {
			t.Errorf("gateway-wide entry %+v", es[1])
		}
	})
	t.Run("Paging", func(t *testing.T) {
		page1, err := d.AuditLog(ctx, "", 2, 0)
		if err != nil || len(page1) != 2 {
			t.Fatalf("page 1: %+v, %v", page1, err)
		}
		page2, err := d.AuditLog(ctx, "", 2, page1[1].ID)
		if err != nil || actions(page2) != "key.revoke,budget.cap_set" {
			t.Fatalf("page 2: %s, %v", actions(page2), err)
		}
		page3, err := d.AuditLog(ctx, "", 2, page2[1].ID)
		if err != nil || len(page3) != 0 {
			t.Errorf("page 3: %+v, %v", page3, err)
		}
		orgPage, err := d.AuditLog(ctx, a.org.ID, 5, page1[0].ID)
		if err != nil || actions(orgPage) != "budget.cap_set" {
			t.Errorf("org A before the newest: %s, %v", actions(orgPage), err)
		}
	})
	t.Run("UnknownOrg", func(t *testing.T) {
		for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000009"} {
			_, err := d.AuditLog(ctx, id, 0, 0)
			mustCode(t, err, app.ENOTFOUND)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, e := range []db.AuditEntry{
			{Action: "x"},
			{Actor: "x"},
			{Actor: "x", Action: "x", ActorID: "not-a-uuid"},
			{Actor: "x", Action: "x", OrgID: "not-a-uuid"},
		} {
			mustCode(t, d.Audit(ctx, e), app.EINVALID)
		}
	})
}
