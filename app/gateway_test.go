package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
	"yosan/providers/demo"
	"yosan/providers/tokens"
)

// fixture is a migrated database with one org (JPY, Asia/Tokyo), a team, a member and keys.
type fixture struct {
	db     *db.DB
	ledger *db.Ledger
	org    app.Org
	team   app.Team
	member app.Member
}

func mustFixture(tb testing.TB) *fixture {
	tb.Helper()
	ctx := context.Background()
	d := dbtest.New(tb)
	if err := d.UpsertPlans(ctx, []app.Plan{
		{Name: "free", Tiers: []string{"free"}},
		{Name: "enterprise", Tiers: []string{"free", "pro", "enterprise"}},
	}); err != nil {
		tb.Fatal(err)
	}
	o, err := d.CreateOrg(ctx, app.Org{Name: "Acme", Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		tb.Fatal(err)
	}
	tm, err := d.CreateTeam(ctx, o.ID, "research")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := d.CreateMember(ctx, o.ID, tm.ID, "a@example.com")
	if err != nil {
		tb.Fatal(err)
	}
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	tb.Cleanup(l.Close)
	return &fixture{db: d, ledger: l, org: o, team: tm, member: m}
}

// mustKey creates a key on the fixture's team and member and returns it with its secret.
func (f *fixture) mustKey(tb testing.TB, plan string, expires *time.Time) (app.APIKey, string) {
	tb.Helper()
	secret := db.NewKeySecret()
	k, err := f.db.CreateKey(context.Background(), app.APIKey{OrgID: f.org.ID, TeamID: f.team.ID, MemberID: f.member.ID,
		Name: "k", Plan: plan, ExpiresAt: expires}, secret)
	if err != nil {
		tb.Fatal(err)
	}
	return k, secret
}

func (f *fixture) mustRevoke(tb testing.TB, id string) {
	tb.Helper()
	if _, err := f.db.RevokeKey(context.Background(), id); err != nil {
		tb.Fatal(err)
	}
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func mustGateway(tb testing.TB, f *fixture, c *clock, ttl time.Duration) *app.Gateway {
	tb.Helper()
	up := demo.New(demo.Options{})
	var models []*app.CatalogModel
	for _, m := range demo.DefaultModels() {
		models = append(models, &app.CatalogModel{Model: m, Upstream: up, Prices: []app.DatedPrice{{Price: m.Price}}})
	}
	cat, err := app.NewCatalog(models)
	if err != nil {
		tb.Fatal(err)
	}
	return &app.Gateway{Keys: f.db, Ledger: f.ledger, Catalog: cat, Counter: tokens.New(), Now: c.Now,
		RequestTimeout: time.Minute, SettleMargin: time.Minute, GlobalCurrency: app.JPY, GlobalLocation: time.UTC,
		KeyCacheTTL: ttl}
}

func mustUnauthorized(tb testing.TB, p *app.Principal, err error, msg string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("authenticated %+v, want %q", p.Key, msg)
	}
	if code := app.ErrorCode(err); code != app.EUNAUTHORIZED {
		tb.Errorf("code = %q (%v), want %q", code, err, app.EUNAUTHORIZED)
	}
	if got := app.ErrorMessage(err); got != msg {
		tb.Errorf("message = %q, want %q", got, msg)
	}
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	f := mustFixture(t)
	now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	key, secret := f.mustKey(t, "free", nil)
	expiresAt := now.Add(time.Hour)
	expiring, expiringSecret := f.mustKey(t, "free", &expiresAt)
	revoked, revokedSecret := f.mustKey(t, "free", nil)
	f.mustRevoke(t, revoked.ID)

	t.Run("OK", func(t *testing.T) {
		g := mustGateway(t, f, &clock{now}, 0)
		p, err := g.Authenticate(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		if p.Key.ID != key.ID || p.Org.ID != f.org.ID || p.Key.TeamID != f.team.ID || p.Key.MemberID != f.member.ID {
			t.Errorf("principal key %+v org %+v", p.Key, p.Org)
		}
		if strings.Join(p.Tiers, ",") != "free" || !p.Allows("free") || p.Allows("enterprise") {
			t.Errorf("tiers = %v", p.Tiers)
		}
	})
	tests := []struct {
		name   string
		secret string
		at     time.Time
		msg    string
	}{
		{"ErrMissing", "", now, "missing API key: send it as 'Authorization: Bearer <key>'"},
		{"ErrUnknown", db.NewKeySecret(), now, "invalid API key"},
		{"ErrUnknownNotAKey", "sk-proj-abc", now, "invalid API key"},
		{"ErrRevoked", revokedSecret, now, "this API key has been revoked"},
		{"ErrExpired", expiringSecret, expiresAt.Add(time.Second), "this API key has expired"},
		{"ErrExpiredAtTheInstant", expiringSecret, expiresAt, "this API key has expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGateway(t, f, &clock{tt.at}, time.Minute)
			p, err := g.Authenticate(ctx, tt.secret)
			mustUnauthorized(t, p, err, tt.msg)
		})
	}
	t.Run("NotYetExpired", func(t *testing.T) {
		g := mustGateway(t, f, &clock{expiresAt.Add(-time.Nanosecond)}, 0)
		p, err := g.Authenticate(ctx, expiringSecret)
		if err != nil {
			t.Fatal(err)
		}
		if p.Key.ID != expiring.ID {
			t.Errorf("key %s, want %s", p.Key.ID, expiring.ID)
		}
	})
}

func TestAuthenticateCache(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

	t.Run("ForgetKey", func(t *testing.T) {
		f := mustFixture(t)
		key, secret := f.mustKey(t, "free", nil)
		other, otherSecret := f.mustKey(t, "free", nil)
		g := mustGateway(t, f, &clock{now}, time.Hour)
		for _, s := range []string{secret, otherSecret} {
			if _, err := g.Authenticate(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		f.mustRevoke(t, key.ID)
		f.mustRevoke(t, other.ID)
		// Within the TTL the cached principal is trusted: revocation through another process
		// takes up to KeyCacheTTL.
		if _, err := g.Authenticate(ctx, secret); err != nil {
			t.Fatalf("cached key: %v", err)
		}
		g.ForgetKey(key.ID)
		p, err := g.Authenticate(ctx, secret)
		mustUnauthorized(t, p, err, "this API key has been revoked")
		// Forgetting one key leaves the others cached.
		if _, err := g.Authenticate(ctx, otherSecret); err != nil {
			t.Errorf("other key after ForgetKey of the first: %v", err)
		}
	})
	t.Run("TTLExpires", func(t *testing.T) {
		f := mustFixture(t)
		key, secret := f.mustKey(t, "free", nil)
		c := &clock{now}
		g := mustGateway(t, f, c, time.Minute)
		if _, err := g.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		f.mustRevoke(t, key.ID)
		c.t = now.Add(time.Minute - time.Nanosecond)
		if _, err := g.Authenticate(ctx, secret); err != nil {
			t.Fatalf("within the TTL: %v", err)
		}
		c.t = now.Add(time.Minute)
		p, err := g.Authenticate(ctx, secret)
		mustUnauthorized(t, p, err, "this API key has been revoked")
	})
	t.Run("NoCache", func(t *testing.T) {
		f := mustFixture(t)
		key, secret := f.mustKey(t, "free", nil)
		g := mustGateway(t, f, &clock{now}, 0)
		if _, err := g.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		f.mustRevoke(t, key.ID)
		p, err := g.Authenticate(ctx, secret)
		mustUnauthorized(t, p, err, "this API key has been revoked")
	})
	t.Run("CachedKeyExpires", func(t *testing.T) {
		f := mustFixture(t)
		exp := now.Add(10 * time.Second)
		_, secret := f.mustKey(t, "free", &exp)
		c := &clock{now}
		g := mustGateway(t, f, c, time.Hour)
		if _, err := g.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		c.t = exp
		p, err := g.Authenticate(ctx, secret)
		mustUnauthorized(t, p, err, "this API key has expired")
	})
}

func mustCall(tb testing.TB, body string, upstreamName string) *app.Call {
	tb.Helper()
	req := mustParseChat(tb, body)
	return &app.Call{Request: req, Model: &app.CatalogModel{Model: app.Model{Name: req.Model, UpstreamName: upstreamName}}}
}

func decodeObject(tb testing.TB, raw json.RawMessage) map[string]json.RawMessage {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

func TestUpstreamRequest(t *testing.T) {
	t.Run("NonStream", func(t *testing.T) {
		body := `{"model":"fast","messages":[{"role":"user", "content":"hi"}],"temperature":0.70,"x_vendor":{"k" : "<v>"},"stream_options":{"include_usage":false}}`
		c := mustCall(t, body, "gpt-4o-2024-08-06")
		orig := decodeObject(t, json.RawMessage(body))
		pr := c.UpstreamRequest()
		if pr.Model != "gpt-4o-2024-08-06" || pr.Stream {
			t.Errorf("model %q stream %v", pr.Model, pr.Stream)
		}
		if got := string(pr.Body["model"]); got != `"gpt-4o-2024-08-06"` {
			t.Errorf("body model = %s", got)
		}
		for k, v := range orig {
			if k == "model" {
				continue
			}
			if got := string(pr.Body[k]); got != string(v) {
				t.Errorf("%s = %s, want %s byte for byte", k, got, v)
			}
		}
		if len(pr.Body) != len(orig) {
			t.Errorf("body has %d fields, want %d", len(pr.Body), len(orig))
		}
		if got := string(c.Request.Body["model"]); got != `"fast"` {
			t.Errorf("the caller's body was changed: model = %s", got)
		}
	})
	t.Run("StreamForcesIncludeUsage", func(t *testing.T) {
		tests := []struct {
			name    string
			options string // "" for absent
			want    map[string]string
		}{
			{"Absent", "", map[string]string{"include_usage": "true"}},
			{"Null", `,"stream_options":null`, map[string]string{"include_usage": "true"}},
			{"False", `,"stream_options":{"include_usage":false}`, map[string]string{"include_usage": "true"}},
			{"True", `,"stream_options":{"include_usage":true}`, map[string]string{"include_usage": "true"}},
			{"OthersKept", `,"stream_options":{"include_obfuscation":false,"include_usage":false,"x_future":"v2"}`,
				map[string]string{"include_usage": "true", "include_obfuscation": "false", "x_future": `"v2"`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				body := `{"model":"fast",` + hello + `,"stream":true,"seed":42` + tt.options + `}`
				c := mustCall(t, body, "up-1")
				pr := c.UpstreamRequest()
				if !pr.Stream || pr.Model != "up-1" {
					t.Errorf("stream %v model %q", pr.Stream, pr.Model)
				}
				so := decodeObject(t, pr.Body["stream_options"])
				if len(so) != len(tt.want) {
					t.Errorf("stream_options = %s, want %v", pr.Body["stream_options"], tt.want)
				}
				for k, v := range tt.want {
					if string(so[k]) != v {
						t.Errorf("stream_options.%s = %s, want %s", k, so[k], v)
					}
				}
				if string(pr.Body["seed"]) != "42" || string(pr.Body["stream"]) != "true" || string(pr.Body["messages"]) != `[{"role":"user","content":"hi"}]` {
					t.Errorf("other fields changed: %v", pr.Body)
				}
				if c.Request.IncludeUsage != (tt.name == "True") {
					t.Errorf("Request.IncludeUsage = %v", c.Request.IncludeUsage)
				}
				if orig, ok := c.Request.Body["stream_options"]; ok && !strings.Contains(tt.options, string(orig)) {
					t.Errorf("the caller's stream_options was changed: %s", orig)
				}
			})
		}
	})
	// Every stream_options member but include_usage reaches the upstream exactly as the
	// caller wrote it (the provider relays raw bytes; only this re-encoding could alter them).
	t.Run("StreamOptionsByteForByte", func(t *testing.T) {
		extra := `{"note" : "a<b & c>d",  "list":[1, 2]}`
		body := `{"model":"fast",` + hello + `,"stream":true,"stream_options":{"include_usage":false,"x_extra":` + extra + `}}`
		pr := mustCall(t, body, "up-1").UpstreamRequest()
		so := decodeObject(t, pr.Body["stream_options"])
		if got := string(so["x_extra"]); got != extra {
			t.Errorf("stream_options.x_extra = %s, want %s byte for byte", got, extra)
		}
	})
}

func TestPrepare(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC) // 2026-12 in Tokyo, 2026-11 in UTC
	f := mustFixture(t)
	f.db.Now = func() time.Time { return now }
	g := mustGateway(t, f, &clock{now}, 0)
	free, freeSecret := f.mustKey(t, "free", nil)
	_, entSecret := f.mustKey(t, "enterprise", nil)
	principal := func(secret string) *app.Principal {
		p, err := g.Authenticate(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("OK", func(t *testing.T) {
		req := mustParseChat(t, `{"model":"demo-mini",`+hello+`,"max_tokens":100,"n":3}`)
		c, err := g.Prepare(ctx, app.NewRequestID(), principal(freeSecret), req)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.MaxOutput != 300 {
			t.Errorf("MaxOutput = %d, want 300 (max_tokens x n)", c.MaxOutput)
		}
		if c.Rate != 150*app.Micro {
			t.Errorf("Rate = %d", c.Rate)
		}
		r := c.Reservation
		if r.Period != "2026-12" || r.Status != app.StatusPending || r.KeyID != free.ID || r.Currency != app.JPY {
			t.Errorf("reservation %+v", r)
		}
		if want := c.Price.Cost(c.EstInput, 0, 300, 150*app.Micro); r.Amount != want || want == 0 {
			t.Errorf("Amount = %d, want %d", r.Amount, want)
		}
		if !c.Deadline.Equal(now.Add(2 * time.Minute)) {
			t.Errorf("Deadline = %s", c.Deadline)
		}
		if c.HasRemaining {
			t.Errorf("HasRemaining with no caps (remaining %d)", c.Remaining)
		}
	})
	t.Run("DefaultMaxOutput", func(t *testing.T) {
		c, err := g.Prepare(ctx, app.NewRequestID(), principal(freeSecret), mustParseChat(t, `{"model":"demo-mini",`+hello+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.MaxOutput != 4096 {
			t.Errorf("MaxOutput = %d, want the model's 4096", c.MaxOutput)
		}
	})
	errTests := []struct {
		name   string
		secret string
		body   string
		code   string
		param  string
		msg    string
	}{
		{"ErrUnknownModel", freeSecret, `{"model":"gpt-9",` + hello + `}`, app.ENOTFOUND, "model", "the model 'gpt-9' does not exist"},
		{"ErrEmbeddingModel", entSecret, `{"model":"demo-embed",` + hello + `}`, app.EINVALID, "model", "is a embedding model and cannot serve this endpoint"},
		{"ErrTierNotInPlan", freeSecret, `{"model":"demo-max",` + hello + `}`, app.EFORBIDDEN, "model",
			"the model 'demo-max' is in tier 'enterprise', which your key's plan 'free' does not include (allowed tiers: free)"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := g.Prepare(ctx, app.NewRequestID(), principal(tt.secret), mustParseChat(t, tt.body))
			if err == nil {
				c.Close()
				t.Fatal("prepared, want an error")
			}
			e := app.AsError(err)
			if e == nil || e.Code != tt.code || e.Param != tt.param || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("err = %+v, want %s param %q %q", e, tt.code, tt.param, tt.msg)
			}
		})
	}
	t.Run("ErrBudgetExceeded", func(t *testing.T) {
		zero := int64(0)
		team := app.Node{Kind: app.NodeTeam, ID: f.team.ID}
		if _, err := f.ledger.SetCap(ctx, team, &zero); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := f.ledger.SetCap(ctx, team, nil); err != nil {
				t.Fatal(err)
			}
		}()
		c, err := g.Prepare(ctx, app.NewRequestID(), principal(freeSecret), mustParseChat(t, `{"model":"demo-mini",`+hello+`,"max_tokens":10}`))
		if err == nil {
			c.Close()
			t.Fatal("prepared, want EBUDGET")
		}
		e := app.AsError(err)
		if e == nil || e.Code != app.EBUDGET || e.Node != "team:"+f.team.ID || !strings.Contains(e.Message, "the team budget (team:"+f.team.ID+") has no room") {
			t.Errorf("err = %+v", e)
		}
	})
	// max_tokens x n must not wrap around int64 into a tiny (or negative) worst case.
	t.Run("MaxTokensTimesNOverflow", func(t *testing.T) {
		req, err := app.ParseChatRequest([]byte(`{"model":"demo-mini",` + hello + `,"max_tokens":4611686018427387904,"n":4}`))
		if err != nil {
			if app.ErrorCode(err) != app.EINVALID {
				t.Errorf("err = %v, want EINVALID", err)
			}
			return // refused before any arithmetic
		}
		c, err := g.Prepare(ctx, app.NewRequestID(), principal(freeSecret), req)
		if err != nil {
			if code := app.ErrorCode(err); code != app.EINVALID && code != app.EBUDGET {
				t.Errorf("err = %v, want EINVALID or EBUDGET", err)
			}
			return
		}
		defer c.Close()
		if c.MaxOutput < req.MaxTokens {
			t.Errorf("MaxOutput = %d for max_tokens %d x n 4: the worst case overflowed (reserved %s JPY)",
				c.MaxOutput, req.MaxTokens, app.FormatMoney(c.Reservation.Amount))
		}
	})
}
