package db_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

// authClock is a settable clock for db.Now.
type authClock struct {
	mu sync.Mutex
	t  time.Time
}

func newAuthClock(d ...*db.DB) *authClock {
	c := &authClock{t: time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)}
	for _, x := range d {
		x.Now = c.Now
	}
	return c
}

func (c *authClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *authClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeHash stands in for a password hash: the db package stores it and never reads it.
const fakeHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5"

func mustAuthUser(tb testing.TB, d *db.DB, email string, operator bool) app.User {
	tb.Helper()
	u, err := d.CreateUser(context.Background(), email, "User "+email, fakeHash, operator)
	if err != nil {
		tb.Fatalf("create user %s: %v", email, err)
	}
	return u
}

func mustCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if app.ErrorCode(err) != code {
		tb.Fatalf("got error %v, want code %q", err, code)
	}
}

func TestCreateFirstOperator(t *testing.T) {
	ctx := context.Background()
	t.Run("RaceOneWins", func(t *testing.T) {
		// Two pools on one database stand for two gateway processes.
		url := dbtest.NewURL(t)
		var pools []*db.DB
		for range 2 {
			d, err := db.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			pools = append(pools, d)
		}
		const n = 20
		var wg sync.WaitGroup
		errs := make([]error, n)
		users := make([]app.User, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				users[i], errs[i] = pools[i%2].CreateFirstOperator(ctx, fmt.Sprintf("Admin%d@Example.com", i), "Admin", fakeHash)
			})
		}
		close(start)
		wg.Wait()
		var won []app.User
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, users[i])
			case app.ErrorCode(err) != app.ECONFLICT || !strings.Contains(app.ErrorMessage(err), "setup is done already"):
				t.Errorf("loser %d: %v", i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d winners, want exactly 1", len(won))
		}
		if !won[0].Operator || won[0].Email != strings.ToLower(won[0].Email) {
			t.Errorf("first user %+v: want an operator with a lowercased email", won[0])
		}
		if n, err := pools[0].CountUsers(ctx); err != nil || n != 1 {
			t.Errorf("CountUsers = %d, %v; want 1", n, err)
		}
	})
	t.Run("AfterOtherUser", func(t *testing.T) {
		d := dbtest.New(t)
		if n, err := d.CountUsers(ctx); err != nil || n != 0 {
			t.Fatalf("CountUsers on a fresh database = %d, %v", n, err)
		}
		mustAuthUser(t, d, "someone@example.com", false)
		_, err := d.CreateFirstOperator(ctx, "late@example.com", "Late", fakeHash)
		mustCode(t, err, app.ECONFLICT)
	})
	t.Run("RaceWithCreateUser", func(t *testing.T) {
		// A user created by the command line while the setup form is submitted: either the setup
		// wins and is the only operator, or it sees the user and refuses.
		d := dbtest.New(t)
		var wg sync.WaitGroup
		var setupErr, createErr error
		wg.Go(func() { _, setupErr = d.CreateFirstOperator(ctx, "setup@example.com", "S", fakeHash) })
		wg.Go(func() { _, createErr = d.CreateUser(ctx, "cli@example.com", "C", fakeHash, false) })
		wg.Wait()
		if createErr != nil {
			t.Fatal(createErr)
		}
		if setupErr != nil && app.ErrorCode(setupErr) != app.ECONFLICT {
			t.Fatal(setupErr)
		}
	})
}

func TestCreateUser(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	clk := newAuthClock(d)
	u := mustAuthUser(t, d, "  Ann@Example.COM ", false)
	if u.Email != "ann@example.com" || u.Operator || !u.CreatedAt.Equal(clk.Now()) || !u.PasswordChangedAt.Equal(clk.Now()) {
		t.Errorf("created %+v", u)
	}
	t.Run("DuplicateEmail", func(t *testing.T) {
		_, err := d.CreateUser(ctx, "ANN@example.com", "Other Ann", fakeHash, true)
		mustCode(t, err, app.ECONFLICT)
		if !strings.Contains(app.ErrorMessage(err), `"ann@example.com" exists already`) {
			t.Errorf("message %q", app.ErrorMessage(err))
		}
	})
	t.Run("BadEmail", func(t *testing.T) {
		for _, e := range []string{"", "ann", "ann@", "@example.com", "a b@example.com", "a@b@example.com"} {
			_, err := d.CreateUser(ctx, e, "x", fakeHash, false)
			mustCode(t, err, app.EINVALID)
		}
	})
	t.Run("NoPassword", func(t *testing.T) {
		_, err := d.CreateUser(ctx, "nopw@example.com", "x", "", false)
		mustCode(t, err, app.EINVALID)
	})
	t.Run("LowercaseEnforced", func(t *testing.T) {
		_, err := d.Pool.Exec(ctx, `INSERT INTO users (id, email, password_hash, created_at, password_changed_at)
			VALUES (gen_random_uuid(), 'Upper@example.com', 'h', now(), now())`)
		mustPgCode(t, err, "23514")
	})
	t.Run("ByEmail", func(t *testing.T) {
		got, hash, err := d.UserByEmail(ctx, "ANN@example.com")
		if err != nil || got != u || hash != fakeHash {
			t.Errorf("UserByEmail = %+v, %q, %v", got, hash, err)
		}
		_, _, err = d.UserByEmail(ctx, "nobody@example.com")
		mustCode(t, err, app.ENOTFOUND)
	})
	t.Run("ByID", func(t *testing.T) {
		got, err := d.User(ctx, u.ID)
		if err != nil || got != u {
			t.Errorf("User = %+v, %v", got, err)
		}
		_, err = d.User(ctx, "not-a-uuid")
		mustCode(t, err, app.ENOTFOUND)
		_, err = d.User(ctx, "00000000-0000-0000-0000-000000000001")
		mustCode(t, err, app.ENOTFOUND)
	})
}

func mustPgCode(tb testing.TB, err error, code string) {
	tb.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		tb.Fatalf("got %v, want PostgreSQL error %s", err, code)
	}
}

func TestMemberships(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	a := mustTenant(t, d, "acme")
	b := mustTenant(t, d, "globex")
	ann := mustAuthUser(t, d, "ann@example.com", false)
	bob := mustAuthUser(t, d, "bob@example.com", false)

	t.Run("Owner", func(t *testing.T) {
		if err := d.SetMembership(ctx, app.Membership{UserID: ann.ID, OrgID: a.org.ID, Role: app.RoleOwner}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("TeamAdmin", func(t *testing.T) {
		if err := d.SetMembership(ctx, app.Membership{UserID: ann.ID, OrgID: b.org.ID, Role: app.RoleTeamAdmin, TeamID: b.team.ID}); err != nil {
			t.Fatal(err)
		}
	})
	refused := []struct {
		name string
		m    app.Membership
		code string
	}{
		{"TeamAdminWithoutTeam", app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleTeamAdmin}, app.EINVALID},
		{"TeamOfOtherOrg", app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleTeamAdmin, TeamID: b.team.ID}, app.ENOTFOUND},
		{"ViewerWithTeam", app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleViewer, TeamID: a.team.ID}, app.EINVALID},
		{"UnknownRole", app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: "admin"}, app.EINVALID},
		{"UnknownOrg", app.Membership{UserID: bob.ID, OrgID: "00000000-0000-0000-0000-000000000009", Role: app.RoleViewer}, app.ENOTFOUND},
		{"UnknownUser", app.Membership{UserID: "00000000-0000-0000-0000-000000000009", OrgID: a.org.ID, Role: app.RoleViewer}, app.ENOTFOUND},
		{"UnknownTeam", app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleTeamAdmin, TeamID: "00000000-0000-0000-0000-000000000009"}, app.ENOTFOUND},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			mustCode(t, d.SetMembership(ctx, tt.m), tt.code)
		})
	}
	// The database holds the same rules against any other writer.
	t.Run("ConstraintTeamAdminWithoutTeam", func(t *testing.T) {
		_, err := d.Pool.Exec(ctx, `INSERT INTO memberships (user_id, org_id, role, created_at) VALUES ($1, $2, 'team_admin', now())`,
			bob.ID, a.org.ID)
		mustPgCode(t, err, "23514")
	})
	t.Run("ConstraintTeamOfOtherOrg", func(t *testing.T) {
		_, err := d.Pool.Exec(ctx, `INSERT INTO memberships (user_id, org_id, role, team_id, created_at) VALUES ($1, $2, 'team_admin', $3, now())`,
			bob.ID, a.org.ID, b.team.ID)
		mustPgCode(t, err, "23503")
	})
	t.Run("Upsert", func(t *testing.T) {
		if err := d.SetMembership(ctx, app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleTeamAdmin, TeamID: a.team.ID}); err != nil {
			t.Fatal(err)
		}
		if err := d.SetMembership(ctx, app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleFinance}); err != nil {
			t.Fatal(err)
		}
		ms, err := d.Memberships(ctx, bob.ID)
		if err != nil || len(ms) != 1 || ms[0] != (app.Membership{UserID: bob.ID, OrgID: a.org.ID, Role: app.RoleFinance}) {
			t.Errorf("Memberships = %+v, %v", ms, err)
		}
	})
	t.Run("OrgUsersScoped", func(t *testing.T) {
		ous, err := d.OrgUsers(ctx, a.org.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ou := range ous {
			if ou.Membership.OrgID != a.org.ID || ou.Membership.UserID != ou.User.ID {
				t.Errorf("row of another org or user: %+v", ou)
			}
			got = append(got, ou.User.Email+":"+string(ou.Membership.Role))
		}
		if strings.Join(got, ",") != "ann@example.com:owner,bob@example.com:finance_admin" {
			t.Errorf("org A users %v", got)
		}
		ous, err = d.OrgUsers(ctx, b.org.ID)
		if err != nil || len(ous) != 1 || ous[0].User.ID != ann.ID || ous[0].Membership.TeamID != b.team.ID {
			t.Errorf("org B users %+v, %v", ous, err)
		}
		_, err = d.OrgUsers(ctx, "00000000-0000-0000-0000-000000000009")
		mustCode(t, err, app.ENOTFOUND)
	})
	t.Run("Actor", func(t *testing.T) {
		p, err := d.Actor(ctx, ann.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.User != ann || len(p.Memberships) != 2 || p.AdminToken {
			t.Fatalf("actor %+v", p)
		}
		if m, ok := p.Role(b.org.ID); !ok || m.Role != app.RoleTeamAdmin || m.TeamID != b.team.ID {
			t.Errorf("role in B: %+v %v", m, ok)
		}
		if !p.Can(app.ActManageKeys, app.Target{OrgID: b.org.ID, TeamID: b.team.ID}) || p.Can(app.ActManageTeams, app.Target{OrgID: b.org.ID}) {
			t.Error("team_admin permissions in B are wrong")
		}
		_, err = d.Actor(ctx, "00000000-0000-0000-0000-000000000009")
		mustCode(t, err, app.ENOTFOUND)
	})
	t.Run("Remove", func(t *testing.T) {
		if err := d.RemoveMembership(ctx, bob.ID, a.org.ID); err != nil {
			t.Fatal(err)
		}
		mustCode(t, d.RemoveMembership(ctx, bob.ID, a.org.ID), app.ENOTFOUND)
		if ms, err := d.Memberships(ctx, bob.ID); err != nil || len(ms) != 0 {
			t.Errorf("after remove: %+v, %v", ms, err)
		}
		// Ann's role in A is untouched.
		if ms, _ := d.Memberships(ctx, ann.ID); len(ms) != 2 {
			t.Errorf("ann's memberships %+v", ms)
		}
	})
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	clk := newAuthClock(d)
	ann := mustAuthUser(t, d, "ann@example.com", false)

	t.Run("Expiry", func(t *testing.T) {
		s, err := d.CreateSession(ctx, ann.ID, time.Hour, "Mozilla/5.0", "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if !s.ExpiresAt.Equal(clk.Now().Add(time.Hour)) || s.RevokedAt != nil {
			t.Fatalf("session %+v", s)
		}
		clk.Add(59 * time.Minute)
		got, err := d.ActiveSession(ctx, s.ID)
		if err != nil || got.ID != s.ID || got.UserID != ann.ID {
			t.Fatalf("before expiry: %+v, %v", got, err)
		}
		clk.Add(time.Minute)
		_, err = d.ActiveSession(ctx, s.ID)
		mustCode(t, err, app.EUNAUTHORIZED)
		if app.ErrorMessage(err) != "your session ended; sign in again" {
			t.Errorf("message %q", app.ErrorMessage(err))
		}
	})
	t.Run("Revoke", func(t *testing.T) {
		s, err := d.CreateSession(ctx, ann.ID, time.Hour, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.RevokeSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		_, err = d.ActiveSession(ctx, s.ID)
		mustCode(t, err, app.EUNAUTHORIZED)
		if err := d.RevokeSession(ctx, s.ID); err != nil {
			t.Errorf("second revoke: %v", err)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		for _, id := range []string{"", "nope", "00000000-0000-0000-0000-000000000009"} {
			_, err := d.ActiveSession(ctx, id)
			mustCode(t, err, app.EUNAUTHORIZED)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		_, err := d.CreateSession(ctx, ann.ID, 0, "", "")
		mustCode(t, err, app.EINVALID)
		_, err = d.CreateSession(ctx, "00000000-0000-0000-0000-000000000009", time.Hour, "", "")
		mustCode(t, err, app.ENOTFOUND)
	})
	t.Run("ClientStrings", func(t *testing.T) {
		// Long or invalid UTF-8 headers are the client's choice: stored clipped, never an error.
		s, err := d.CreateSession(ctx, ann.ID, time.Hour, strings.Repeat("x", 10_000)+"\xff", strings.Repeat("1", 1000)+"\xff")
		if err != nil {
			t.Fatal(err)
		}
		var ua, ip int
		if err := d.Pool.QueryRow(ctx, `SELECT octet_length(user_agent), octet_length(ip) FROM sessions WHERE id = $1`, s.ID).Scan(&ua, &ip); err != nil || ua > 512 || ip > 64 {
			t.Errorf("stored a user agent of %d bytes, an address of %d (%v)", ua, ip, err)
		}
		if err := d.RecordLoginAttempt(ctx, "\xffjunk@example.com", "\xff", false); err != nil {
			t.Errorf("attempt with invalid UTF-8: %v", err)
		}
	})
	t.Run("TouchAtMostOncePerMinute", func(t *testing.T) {
		s, err := d.CreateSession(ctx, ann.ID, time.Hour, "", "")
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(30 * time.Second)
		if err := d.TouchSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.ActiveSession(ctx, s.ID); !got.LastSeenAt.Equal(s.CreatedAt) {
			t.Errorf("touched after 30 s: last seen %v", got.LastSeenAt)
		}
		clk.Add(31 * time.Second)
		if err := d.TouchSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.ActiveSession(ctx, s.ID); !got.LastSeenAt.Equal(clk.Now()) {
			t.Errorf("not touched after 61 s: last seen %v, now %v", got.LastSeenAt, clk.Now())
		}
	})
	t.Run("RevokeUserSessions", func(t *testing.T) {
		bob := mustAuthUser(t, d, "bob-sessions@example.com", false)
		s1, _ := d.CreateSession(ctx, bob.ID, time.Hour, "", "")
		s2, _ := d.CreateSession(ctx, bob.ID, time.Hour, "", "")
		other, _ := d.CreateSession(ctx, ann.ID, time.Hour, "", "")
		if err := d.RevokeUserSessions(ctx, bob.ID); err != nil {
			t.Fatal(err)
		}
		for _, s := range []db.Session{s1, s2} {
			_, err := d.ActiveSession(ctx, s.ID)
			mustCode(t, err, app.EUNAUTHORIZED)
		}
		if _, err := d.ActiveSession(ctx, other.ID); err != nil {
			t.Errorf("another user's session ended: %v", err)
		}
	})
}

func TestSetPasswordRevokesSessions(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	clk := newAuthClock(d)
	ann := mustAuthUser(t, d, "ann@example.com", false)
	bob := mustAuthUser(t, d, "bob@example.com", false)
	s1, _ := d.CreateSession(ctx, ann.ID, time.Hour, "", "")
	s2, _ := d.CreateSession(ctx, ann.ID, time.Hour, "", "")
	sb, _ := d.CreateSession(ctx, bob.ID, time.Hour, "", "")
	clk.Add(time.Minute)
	if err := d.SetPassword(ctx, ann.ID, "new-hash"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []db.Session{s1, s2} {
		_, err := d.ActiveSession(ctx, s.ID)
		mustCode(t, err, app.EUNAUTHORIZED)
	}
	if _, err := d.ActiveSession(ctx, sb.ID); err != nil {
		t.Errorf("bob's session ended: %v", err)
	}
	u, hash, err := d.UserByEmail(ctx, ann.Email)
	if err != nil || hash != "new-hash" || !u.PasswordChangedAt.Equal(clk.Now()) || !u.CreatedAt.Equal(ann.CreatedAt) {
		t.Errorf("after SetPassword: %+v %q %v", u, hash, err)
	}
	mustCode(t, d.SetPassword(ctx, "00000000-0000-0000-0000-000000000009", "h"), app.ENOTFOUND)
	mustCode(t, d.SetPassword(ctx, ann.ID, ""), app.EINVALID)
}

func TestLoginFailures(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	clk := newAuthClock(d)
	start := clk.Now()
	record := func(email, ip string, ok bool) {
		t.Helper()
		if err := d.RecordLoginAttempt(ctx, email, ip, ok); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	count := func(email, ip string, since time.Time) (int, int) {
		t.Helper()
		e, i, err := d.LoginFailures(ctx, email, ip, since)
		if err != nil {
			t.Fatal(err)
		}
		return e, i
	}
	record("old@example.com", "ip-1", false) // before the window below
	since := clk.Now()
	for range 3 {
		record("Ann@Example.com", "ip-1", false)
	}
	record("bob@example.com", "ip-1", false)
	record("ann@example.com", "ip-2", false)
	if e, i := count("ANN@example.com", "ip-1", since); e != 4 || i != 4 {
		t.Errorf("failures (ann, ip-1) = %d, %d; want 4, 4", e, i)
	}
	if e, i := count("ann@example.com", "ip-1", start); e != 4 || i != 5 {
		t.Errorf("failures since start = %d, %d; want 4, 5", e, i)
	}
	t.Run("NthFailure", func(t *testing.T) {
		e, i, err := d.NthLoginFailure(ctx, "ann@example.com", "ip-1", since, 4, 2)
		// ann failed at since+0s, +1s, +2s (ip-1) and +4s (ip-2); ip-1 saw +0..+3s.
		if err != nil || !e.Equal(since) || !i.Equal(since.Add(2*time.Second)) {
			t.Errorf("NthLoginFailure = %v, %v, %v", e, i, err)
		}
		e, i, err = d.NthLoginFailure(ctx, "ann@example.com", "ip-1", since, 5, 5)
		if err != nil || !e.IsZero() || !i.IsZero() {
			t.Errorf("fewer than n: %v, %v, %v", e, i, err)
		}
		_, _, err = d.NthLoginFailure(ctx, "ann@example.com", "ip-1", since, 0, 1)
		mustCode(t, err, app.EINVALID)
	})
	t.Run("SuccessResetsEmailNotIP", func(t *testing.T) {
		record("ann@example.com", "ip-3", true)
		if e, i := count("ann@example.com", "ip-1", since); e != 0 || i != 4 {
			t.Errorf("after success: %d, %d; want 0, 4", e, i)
		}
		record("ann@example.com", "ip-1", false)
		if e, i := count("ann@example.com", "ip-1", since); e != 1 || i != 5 {
			t.Errorf("failure after success: %d, %d; want 1, 5", e, i)
		}
		if e, _ := count("bob@example.com", "ip-1", since); e != 1 {
			t.Errorf("bob's failures %d, want 1 (ann's success is not bob's)", e)
		}
	})
}

func TestSigningKey(t *testing.T) {
	ctx := context.Background()
	url := dbtest.NewURL(t)
	var handles []*db.DB
	for range 2 {
		d, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		handles = append(handles, d)
	}
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := handles[i%2].SigningKey(ctx)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if len(keys[0]) != 32 || bytes.Equal(keys[0], make([]byte, 32)) {
		t.Fatalf("key %x", keys[0])
	}
	for i, k := range keys {
		if !bytes.Equal(k, keys[0]) {
			t.Errorf("key %d differs: %x vs %x", i, k, keys[0])
		}
	}
	again, err := handles[1].SigningKey(ctx)
	if err != nil || !bytes.Equal(again, keys[0]) {
		t.Errorf("later read %x, %v", again, err)
	}
	other, err := dbtest.New(t).SigningKey(ctx)
	if err != nil || bytes.Equal(other, keys[0]) {
		t.Errorf("another database has the same key (%v)", err)
	}
}

// TestLastOwnerRace: two owners demote each other at the same moment; the org keeps one.
func TestLastOwnerRace(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	o, err := d.CreateOrg(ctx, app.Org{Name: "acme", Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range []string{"a@acme.example", "b@acme.example"} {
		u, err := d.CreateUser(ctx, e, e, "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SetMembership(ctx, app.Membership{UserID: u.ID, OrgID: o.ID, Role: app.RoleOwner}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	for round := 0; round < 20; round++ {
		errs := make(chan error, 2)
		for i := range ids {
			go func(i int) {
				errs <- d.SetMembership(ctx, app.Membership{UserID: ids[i], OrgID: o.ID, Role: app.RoleViewer})
			}(i)
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("round %d: errors %v and %v, want exactly one refusal", round, e1, e2)
		}
		if e := errors.Join(e1, e2); app.ErrorCode(e) != app.ECONFLICT {
			t.Fatalf("round %d: %v, want ECONFLICT", round, e)
		}
		var owners int
		if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE org_id = $1 AND role = 'owner'`, o.ID).Scan(&owners); err != nil {
			t.Fatal(err)
		}
		if owners != 1 {
			t.Fatalf("round %d: %d owners", round, owners)
		}
		for _, id := range ids {
			if err := d.SetMembership(ctx, app.Membership{UserID: id, OrgID: o.ID, Role: app.RoleOwner}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.RemoveMembership(ctx, ids[0], o.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveMembership(ctx, ids[1], o.ID); app.ErrorCode(err) != app.ECONFLICT {
		t.Errorf("removing the last owner: %v, want ECONFLICT", err)
	}
}
