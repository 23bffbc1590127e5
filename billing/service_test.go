package billing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
	"yosan/billing"
	"yosan/billing/stripemocktest"
	"yosan/db"
	"yosan/db/dbtest"
)

// A valid registration number: T + check digit 7 + 123456789012.
const issuerNumber = "T7123456789012"

// testClock is the database's clock, moved by hand.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

type fixture struct {
	d     *db.DB
	clock *testClock
	svc   *billing.Service
	tokyo *time.Location
}

func newFixture(t *testing.T) *fixture {
	d := dbtest.New(t)
	c := &testClock{}
	c.Set(time.Date(2026, 11, 10, 3, 0, 0, 0, time.UTC))
	d.Now = c.Now
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	svc := &billing.Service{DB: d, InvoicePrefix: "INV", CreditNotePrefix: "CN",
		Config: billing.Config{Issuer: app.Issuer{Name: "Yosan 株式会社", RegistrationNumber: issuerNumber,
			Address: "東京都千代田区1-1", PaymentTerms: "銀行振込 / Bank transfer"}, DueDays: 30}}
	if err := d.UpsertPlans(context.Background(), []app.Plan{{Name: "free", Tiers: []string{"free"}}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{d: d, clock: c, svc: svc, tokyo: tokyo}
}

// model is a catalog model with its price history.
type model struct {
	name, provider string
	prices         []app.DatedPrice
}

func (f *fixture) models(t *testing.T, ms []model) {
	t.Helper()
	var plain []app.Model
	var prices []db.ModelPrice
	for _, m := range ms {
		plain = append(plain, app.Model{Name: m.name, Provider: m.provider, UpstreamName: m.name, Tier: "free", Kind: app.KindChat, MaxOutputTokens: 1000})
		for _, p := range m.prices {
			prices = append(prices, db.ModelPrice{Model: m.name, From: p.From, Price: p.Price})
		}
	}
	if err := f.d.UpsertModels(context.Background(), plain, prices); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) org(t *testing.T, name, currency string) (app.Org, app.APIKey) {
	t.Helper()
	ctx := context.Background()
	o, err := f.d.CreateOrg(ctx, app.Org{Name: name, Currency: currency, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := f.d.CreateTeam(ctx, o.ID, "team")
	if err != nil {
		t.Fatal(err)
	}
	k, err := f.d.CreateKey(ctx, app.APIKey{OrgID: o.ID, TeamID: tm.ID, Name: "k", Plan: "free"}, db.NewKeySecret())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.PeriodRate(ctx, o, "2026-11"); err != nil {
		t.Fatal(err)
	}
	return o, k
}

// row is one generated ledger row.
type row struct {
	model, provider    string
	status             string
	in, cached, out    int64
	writes             int64 // prompt-cache writes, part of in
	actual             int64
	created            time.Time
	orgID, keyID, rate string
}

// insertRows writes ledger rows directly (as the gateway would have settled them) with COPY.
func (f *fixture) insertRows(t *testing.T, rows []row) {
	t.Helper()
	src := make([][]any, 0, len(rows))
	for _, r := range rows {
		var actual any = r.actual
		if r.status == "pending" || r.status == "released" {
			actual = nil
			if r.status == "released" {
				actual = int64(0)
			}
		}
		src = append(src, []any{uuid.NewString(), r.orgID, r.keyID, "2026-11", r.status, "JPY", r.actual, actual, []int64{},
			uuid.New(), r.model, r.provider, r.model, int64(150 * app.Micro), r.in, r.out, r.in, r.cached, r.out,
			r.created.Add(time.Minute), r.created, r.writes})
	}
	n, err := f.d.Pool.CopyFrom(context.Background(), pgx.Identifier{"reservations"},
		[]string{"request_id", "org_id", "key_id", "period", "status", "currency", "amount", "actual", "budget_ids",
			"apply_nonce", "model", "provider", "upstream_model", "usd_jpy", "est_input_tokens", "max_output_tokens",
			"input_tokens", "cached_tokens", "output_tokens", "deadline", "created_at", "cache_write_tokens"},
		pgx.CopyFromRows(src))
	if err != nil || n != int64(len(rows)) {
		t.Fatalf("copy %d rows: %d %v", len(rows), n, err)
	}
}

// endOfMonth moves the clock past November 2026 in Tokyo.
func (f *fixture) endOfMonth() {
	f.clock.Set(time.Date(2026, 12, 1, 0, 30, 0, 0, f.tokyo))
}

func TestCloseTaxReferenceExample(t *testing.T) {
	f := newFixture(t)
	f.models(t, []model{{"a", "p1", nil}, {"b", "p1", nil}, {"c", "p2", nil}})
	o, k := f.org(t, "Acme", app.JPY)
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	f.insertRows(t, []row{
		{model: "a", provider: "p1", status: "committed", in: 10, out: 10, actual: 105 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
		{model: "b", provider: "p1", status: "committed", in: 10, out: 10, actual: 105 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
		{model: "c", provider: "p2", status: "expired", in: 10, out: 10, actual: 105 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
	})
	f.endOfMonth()
	res, err := f.svc.ClosePeriod(context.Background(), "2026-11", "")
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("close: %+v %v", res, err)
	}
	inv := res[0].Result.Invoice
	// Three lines of 105 yen at 10 %: the tax is computed once on 315 yen, floor: 31 (not 3 x 10).
	if len(inv.Lines) != 3 || inv.Subtotal != 315 || inv.Tax != 31 || inv.Total != 346 || inv.Number != "INV-000001" {
		t.Fatalf("invoice %s: %d lines, subtotal %d tax %d total %d", inv.Number, len(inv.Lines), inv.Subtotal, inv.Tax, inv.Total)
	}
	for _, l := range inv.Lines {
		if l.Amount != 105 || l.TaxRate != 10 {
			t.Errorf("line %+v", l)
		}
	}
}

// TestCloseCacheWrites: a line shows the prompt-cache writes (tokens and unit price) beside
// the reads, on the stored invoice and its credit note.
func TestCloseCacheWrites(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	price := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CachedPerM: 300_000, CacheWritePerM: 3_750_000}
	f.models(t, []model{{"claude", "anthropic", []app.DatedPrice{{Price: price}}}})
	o, k := f.org(t, "Acme", app.JPY)
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	f.insertRows(t, []row{
		{model: "claude", provider: "anthropic", status: "committed", in: 2104, cached: 2000, writes: 100, out: 30, actual: 215_550, created: at, orgID: o.ID, keyID: k.ID},
		{model: "claude", provider: "anthropic", status: "committed", in: 1000, writes: 1000, out: 100, actual: 787_500, created: at, orgID: o.ID, keyID: k.ID},
	})
	f.endOfMonth()
	res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("close: %+v %v", res, err)
	}
	inv, err := f.d.Invoice(ctx, o.ID, res[0].Result.Invoice.ID)
	if err != nil || len(inv.Lines) != 1 {
		t.Fatalf("stored invoice: %+v %v", inv, err)
	}
	l := inv.Lines[0]
	if l.InputTokens != 3104 || l.CachedTokens != 2000 || l.CacheWriteTokens != 1100 || l.OutputTokens != 130 ||
		l.CacheWritePerM != 3_750_000 || l.CachedPerM != 300_000 || l.LedgerMicro != 1_003_050 || l.Amount != 1 {
		t.Fatalf("line %+v", l)
	}
}

func TestCloseLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.models(t, []model{{"gpt", "openai", nil}})
	o, k := f.org(t, "Acme", app.JPY)
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	f.insertRows(t, []row{
		{model: "gpt", provider: "openai", status: "committed", in: 1000, out: 500, actual: 1234_567890, created: at, orgID: o.ID, keyID: k.ID},
		{model: "gpt", provider: "openai", status: "released", in: 0, out: 0, actual: 99 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
		{model: "gpt", provider: "openai", status: "pending", in: 0, out: 0, actual: 5 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
	})

	t.Run("ErrPeriodNotEnded", func(t *testing.T) {
		_, err := f.d.CloseOrgPeriod(ctx, o.ID, "2026-11", issuerNumber, "INV", func(app.InvoiceFacts) (app.Invoice, error) {
			t.Fatal("assembled before the period ended")
			return app.Invoice{}, nil
		})
		if app.ErrorCode(err) != app.EINVALID || !strings.Contains(app.ErrorMessage(err), "has not ended") {
			t.Fatalf("err = %v", err)
		}
	})
	f.endOfMonth()
	t.Run("ErrPending", func(t *testing.T) {
		res, err := f.svc.ClosePeriod(ctx, "2026-11", o.ID)
		if err != nil || len(res) != 1 || app.ErrorCode(res[0].Err) != app.ECONFLICT {
			t.Fatalf("close with a pending row: %+v %v", res, err)
		}
	})
	if _, err := f.d.Pool.Exec(ctx, `UPDATE reservations SET status = 'expired', actual = amount WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}
	var first *app.Invoice
	t.Run("Issue", func(t *testing.T) {
		res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
		if err != nil || len(res) != 1 || res[0].Err != nil || !res[0].Result.Created {
			t.Fatalf("close: %+v %v", res, err)
		}
		first = res[0].Result.Invoice
		// 1234.56789 + 5 yen = 1239.56789 -> 1239 yen of usage; tax floor(123.9) = 123.
		if first.Subtotal != 1239 || first.Tax != 123 || first.Total != 1362 || first.LedgerMicro != 1239_567890 {
			t.Fatalf("invoice %+v", first)
		}
		if first.Recipient != "Acme" || first.FXSource != "org default rate" || first.USDJPY != 150*app.Micro {
			t.Errorf("recipient %q fx %d %q", first.Recipient, first.USDJPY, first.FXSource)
		}
		if first.DueAt.Sub(first.IssuedAt) != 30*24*time.Hour {
			t.Errorf("due %s issued %s", first.DueAt, first.IssuedAt)
		}
	})
	t.Run("ReRunCreatesNothing", func(t *testing.T) {
		res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
		if err != nil || len(res) != 1 || res[0].Result.Created || res[0].Result.Invoice.ID != first.ID {
			t.Fatalf("re-run: %+v %v", res, err)
		}
		var n, seq int
		if err := f.d.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM invoices), (SELECT last FROM invoice_sequences)`).Scan(&n, &seq); err != nil {
			t.Fatal(err)
		}
		if n != 1 || seq != 1 {
			t.Errorf("%d invoices, sequence at %d after a re-run", n, seq)
		}
	})
	t.Run("Immutable", func(t *testing.T) {
		for _, q := range []string{
			`UPDATE invoices SET total = total + 1, subtotal = subtotal + 1`,
			`UPDATE invoices SET recipient = 'someone else'`,
			`DELETE FROM invoices`,
			`UPDATE invoice_lines SET amount = 0`,
			`DELETE FROM invoice_lines`,
		} {
			if _, err := f.d.Pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "immutable") && !strings.Contains(err.Error(), "cannot be deleted") {
				t.Errorf("%s: err = %v, want refused", q, err)
			}
		}
		if _, err := f.d.Pool.Exec(ctx, `UPDATE invoices SET status = 'paid'`); err != nil {
			t.Errorf("status must stay mutable: %v", err)
		}
	})
	t.Run("CreditAndReissue", func(t *testing.T) {
		cn, err := f.svc.Credit(ctx, o.ID, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cn.Number != "CN-000002" || cn.Kind != app.KindCreditNote || cn.Total != -first.Total || cn.Tax != -first.Tax || cn.Corrects != first.Number {
			t.Fatalf("credit note %+v", cn)
		}
		if _, err := f.svc.Credit(ctx, o.ID, first.ID); app.ErrorCode(err) != app.ECONFLICT {
			t.Errorf("second credit: %v, want ECONFLICT", err)
		}
		if _, err := f.svc.Credit(ctx, o.ID, cn.ID); app.ErrorCode(err) != app.ECONFLICT {
			t.Errorf("credit of a credit note: %v, want ECONFLICT", err)
		}
		res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
		if err != nil || len(res) != 1 || !res[0].Result.Created {
			t.Fatalf("reissue: %+v %v", res, err)
		}
		re := res[0].Result.Invoice
		if re.Number != "INV-000003" || re.Corrects != first.ID || re.Total != first.Total {
			t.Errorf("reissued %s corrects %s total %d", re.Number, re.Corrects, re.Total)
		}
		rows, err := f.d.Invoices(ctx, o.ID, "2026-11")
		if err != nil || len(rows) != 3 {
			t.Fatalf("documents: %d %v", len(rows), err)
		}
		got, err := f.d.Invoice(ctx, o.ID, re.ID)
		if err != nil || got.Corrects != first.Number {
			t.Errorf("reissued invoice reads Corrects %q, want the original's number %s", got.Corrects, first.Number)
		}
	})
	t.Run("TenantScoped", func(t *testing.T) {
		other, _ := f.org(t, "Other", app.JPY)
		if _, err := f.d.Invoice(ctx, other.ID, first.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("another org's invoice: %v", err)
		}
		if _, err := f.svc.Credit(ctx, other.ID, first.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("credit another org's invoice: %v", err)
		}
	})
}

func TestCloseNumbersWithoutGaps(t *testing.T) {
	f := newFixture(t)
	f.models(t, []model{{"m", "p", nil}})
	var rows []row
	const orgs = 20
	for i := 0; i < orgs; i++ {
		o, k := f.org(t, fmt.Sprintf("org%02d", i), app.JPY)
		rows = append(rows, row{model: "m", provider: "p", status: "committed", in: 1, out: 1, actual: int64(i+1) * app.Micro,
			created: time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), orgID: o.ID, keyID: k.ID})
	}
	f.insertRows(t, rows)
	f.endOfMonth()
	// Two closes at once (two gateway processes' schedulers): each org gets one invoice.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.svc.ClosePeriod(context.Background(), "2026-11", ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var n, minSeq, maxSeq int
	if err := f.d.Pool.QueryRow(context.Background(), `SELECT count(*), min(seq), max(seq) FROM invoices`).Scan(&n, &minSeq, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if n != orgs || minSeq != 1 || maxSeq != orgs {
		t.Errorf("%d invoices numbered %d..%d, want %d numbered 1..%d", n, minSeq, maxSeq, orgs, orgs)
	}
}

// TestReconcile100kRows generates a month of 100,000 ledger rows for several orgs across 12
// models with mid-month price changes, closes it, and checks the reconciliation: every org's
// invoice usage equals its ledger total to the yen, and every line equals its group's ledger
// sum, computed here independently from the generated rows.
func TestReconcile100kRows(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, f.tokyo)
	var ms []model
	for i := 0; i < 12; i++ {
		m := model{name: fmt.Sprintf("model-%02d", i), provider: []string{"openai", "anthropic", "gemini"}[i%3]}
		m.prices = []app.DatedPrice{{Price: app.Price{InputPerM: int64(100_000 * (i + 1)), OutputPerM: int64(400_000 * (i + 1)), CachedPerM: int64(50_000 * (i + 1))}}}
		for j := 0; j < i%3; j++ { // 0, 1 or 2 price changes during the month
			from := start.Add(time.Duration(5+10*j) * 24 * time.Hour)
			m.prices = append(m.prices, app.DatedPrice{From: from, Price: app.Price{InputPerM: int64(90_000 * (i + 1 + j)), OutputPerM: int64(350_000 * (i + 1 + j))}})
		}
		ms = append(ms, m)
	}
	f.models(t, ms)
	var orgs []app.Org
	var keys []app.APIKey
	for i := 0; i < 5; i++ {
		cur := app.JPY
		if i == 4 {
			cur = app.USD
		}
		o, k := f.org(t, fmt.Sprintf("org-%d", i), cur)
		orgs, keys = append(orgs, o), append(keys, k)
	}
	priceAt := func(m model, at time.Time) (app.Price, time.Time) {
		p, from := m.prices[0].Price, time.Time{}
		for _, dp := range m.prices[1:] {
			if !at.Before(dp.From) {
				p, from = dp.Price, dp.From
			}
		}
		return p, from
	}
	type gk struct {
		org, model string
		from       int64
	}
	want := map[gk]int64{}
	orgTotal := map[string]int64{}
	var rows []row
	const n = 100_000
	for i := 0; i < n; i++ {
		oi := rnd.IntN(len(orgs))
		m := ms[rnd.IntN(len(ms))]
		at := start.Add(time.Duration(rnd.Int64N(int64(30*24*time.Hour - time.Hour))))
		in, cached, out := rnd.Int64N(20_000), rnd.Int64N(2000), rnd.Int64N(4000)
		p, from := priceAt(m, at)
		rate := int64(150 * app.Micro)
		if orgs[oi].Currency == app.USD {
			rate = app.Micro // costs in USD
		}
		actual := p.Cost(in, min(cached, in), out, rate)
		status := "committed"
		if rnd.IntN(50) == 0 {
			status = "expired"
		}
		if rnd.IntN(40) == 0 {
			status = "released" // never billed
		}
		rows = append(rows, row{model: m.name, provider: m.provider, status: status, in: in, cached: min(cached, in), out: out,
			actual: actual, created: at, orgID: orgs[oi].ID, keyID: keys[oi].ID})
		if status != "released" {
			want[gk{orgs[oi].ID, m.name, from.UnixMicro()}] += actual
			orgTotal[orgs[oi].ID] += actual
		}
	}
	f.insertRows(t, rows)
	f.endOfMonth()
	res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
	if err != nil || len(res) != len(orgs) {
		t.Fatalf("close: %d results %v", len(res), err)
	}
	facts, err := f.d.Reconciliation(ctx, "2026-11", "")
	if err != nil || len(facts) != len(orgs) {
		t.Fatalf("reconciliation facts: %d %v", len(facts), err)
	}
	for _, fc := range facts {
		r := billing.Reconcile(fc.Org, "2026-11", fc.USDJPY, fc.Groups, fc.Pending, fc.Invoice)
		if r.Status != billing.ReconOK || r.Difference != 0 || len(r.Lines) != 0 {
			t.Errorf("%s: %s, difference %d, lines %+v", r.OrgName, r.Status, r.Difference, r.Lines)
		}
		if r.LedgerMicro != orgTotal[fc.Org.ID] {
			t.Errorf("%s: ledger total %d, generated %d", r.OrgName, r.LedgerMicro, orgTotal[fc.Org.ID])
		}
		wantYen := orgTotal[fc.Org.ID] / app.Micro
		if fc.Org.Currency == app.USD {
			wantYen = billing.MicroToYenFromUSD(orgTotal[fc.Org.ID], 150*app.Micro) / app.Micro
		}
		if fc.Org.Currency == app.JPY && r.InvoiceUsage != wantYen {
			t.Errorf("%s: invoice usage ¥%d, generated ledger ¥%d", r.OrgName, r.InvoiceUsage, wantYen)
		}
		for _, l := range fc.Invoice.Lines {
			if got, w := l.LedgerMicro, want[gk{fc.Org.ID, l.Model, l.PriceFrom.UnixMicro()}]; got != w {
				t.Errorf("%s %s from %s: line carries %d, generated %d", r.OrgName, l.Model, l.PriceFrom, got, w)
			}
		}
		if len(fc.Invoice.Lines) < 20 {
			t.Errorf("%s: only %d lines for 12 models with price changes", r.OrgName, len(fc.Invoice.Lines))
		}
	}
	// A change in the ledger after the close shows up as a mismatch naming the line.
	if _, err := f.d.Pool.Exec(ctx, `UPDATE reservations SET actual = actual + 2000000
		WHERE request_id = (SELECT request_id FROM reservations WHERE org_id = $1 AND status = 'committed' LIMIT 1)`, orgs[0].ID); err != nil {
		t.Fatal(err)
	}
	facts, err = f.d.Reconciliation(ctx, "2026-11", orgs[0].ID)
	if err != nil || len(facts) != 1 {
		t.Fatal(err)
	}
	r := billing.Reconcile(facts[0].Org, "2026-11", facts[0].USDJPY, facts[0].Groups, facts[0].Pending, facts[0].Invoice)
	if r.Status != billing.ReconMismatch || r.Difference != -2 || len(r.Lines) != 1 || r.Lines[0].LedgerMicro-r.Lines[0].InvoicedMicro != 2_000_000 {
		t.Errorf("after tampering: %+v", r)
	}
}

func TestStripeMirror(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sm := stripemocktest.Start(t)
	f.svc.Stripe = billing.NewStripe("sk_test_123", sm.URL, &http.Client{Timeout: 10 * time.Second})
	f.models(t, []model{{"a", "p", nil}, {"b", "p", nil}})
	o, k := f.org(t, "Acme", app.JPY)
	if _, err := f.d.SetOrgBilling(ctx, o.ID, db.OrgBilling{Name: "Acme 株式会社", Email: "ap@acme.example", TaxID: issuerNumber}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	f.insertRows(t, []row{
		{model: "a", provider: "p", status: "committed", in: 1, out: 1, actual: 500 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
		{model: "b", provider: "p", status: "committed", in: 1, out: 1, actual: 700 * app.Micro, created: at, orgID: o.ID, keyID: k.ID},
	})
	f.endOfMonth()

	// Stripe is down: the close still issues the invoice; the sync fails and is kept for later.
	sm.SetDown(true)
	res, err := f.svc.ClosePeriod(ctx, "2026-11", "")
	if err != nil || res[0].Err != nil {
		t.Fatalf("close while Stripe is down: %+v %v", res, err)
	}
	inv := res[0].Result.Invoice
	if inv.Recipient != "Acme 株式会社" {
		t.Errorf("recipient %q", inv.Recipient)
	}
	synced, failed, err := f.svc.SyncStripe(ctx, "")
	if err != nil || synced != 0 || failed != 1 {
		t.Fatalf("sync while down: %d %d %v", synced, failed, err)
	}
	got, _ := f.d.Invoice(ctx, o.ID, inv.ID)
	if got.StripeSynced || got.StripeError == "" || strings.Contains(got.StripeError, "sk_test") {
		t.Errorf("state while down: synced %v error %q", got.StripeSynced, got.StripeError)
	}
	// Not due again until the backoff ends.
	sm.SetDown(false)
	sm.Reset()
	if s, fl, err := f.svc.SyncStripe(ctx, ""); err != nil || s+fl != 0 {
		t.Fatalf("sync before the retry is due: %d %d %v", s, fl, err)
	}
	f.clock.Add(2 * time.Minute)
	if s, fl, err := f.svc.SyncStripe(ctx, ""); err != nil || s != 1 || fl != 0 {
		t.Fatalf("sync when up: %d %d %v", s, fl, err)
	}
	var paths []string
	for _, r := range sm.Requests() {
		paths = append(paths, r.Method+" "+r.Path+" "+r.IdempotencyKey)
		if r.Method == "POST" && r.IdempotencyKey == "" {
			t.Errorf("%s without an idempotency key", r)
		}
	}
	// customer, invoice, 2 lines + the tax item, finalize
	if len(paths) != 6 {
		t.Fatalf("requests to Stripe:\n%s", strings.Join(paths, "\n"))
	}
	got, _ = f.d.Invoice(ctx, o.ID, inv.ID)
	if !got.StripeSynced || got.StripeInvoiceID == "" || got.StripeError != "" {
		t.Errorf("after sync: %+v", got)
	}
	ob, _ := f.d.OrgBilling(ctx, o.ID)
	if ob.StripeCustomerID == "" {
		t.Errorf("the org's Stripe customer was not kept")
	}

	// A re-run of the close and of the sync sends nothing to Stripe and creates nothing.
	sm.Reset()
	if res, err := f.svc.ClosePeriod(ctx, "2026-11", ""); err != nil || res[0].Result.Created {
		t.Fatalf("re-run: %+v %v", res, err)
	}
	f.clock.Add(time.Hour)
	if s, fl, err := f.svc.SyncStripe(ctx, ""); err != nil || s+fl != 0 {
		t.Fatalf("re-sync: %d %d %v", s, fl, err)
	}
	if reqs := sm.Requests(); len(reqs) != 0 {
		t.Fatalf("a re-run sent %d requests to Stripe: %v", len(reqs), reqs)
	}

	// A credit note goes to Stripe as a credit note on the mirrored invoice.
	cn, err := f.svc.Credit(ctx, o.ID, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	// stripe-mock always answers its draft fixture; the mirrored invoice was finalized.
	sm.Stub("GET", "/v1/invoices/"+got.StripeInvoiceID, 200, `{"id":"`+got.StripeInvoiceID+`","object":"invoice","status":"open"}`)
	if s, fl, err := f.svc.SyncStripe(ctx, cn.ID); err != nil || s != 1 || fl != 0 {
		t.Fatalf("credit note sync: %d %d %v", s, fl, err)
	}
	reqs := sm.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].Path != "/v1/credit_notes" {
		t.Errorf("credit note requests %v", reqs)
	}
}
