package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// OrgBilling is who an org is on its invoices and in Stripe.
type OrgBilling struct {
	// Name is printed as the invoice's recipient ("" prints the org's name).
	Name  string
	Email string
	// TaxID is the org's own qualified invoice number (T + 13 digits), "" when none.
	TaxID            string
	StripeCustomerID string
}

// OrgBilling returns the org's billing details. ENOTFOUND for an unknown org.
func (db *DB) OrgBilling(ctx context.Context, orgID string) (OrgBilling, error) {
	if uuid.Validate(orgID) != nil {
		return OrgBilling{}, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	var b OrgBilling
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(billing_name, ''), coalesce(billing_email, ''), coalesce(tax_id, ''),
			coalesce(stripe_customer_id, '')
		FROM orgs WHERE id = $1`, orgID).Scan(&b.Name, &b.Email, &b.TaxID, &b.StripeCustomerID)
	if errors.Is(err, pgx.ErrNoRows) {
		return OrgBilling{}, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	if err != nil {
		return OrgBilling{}, fmt.Errorf("select org billing: %w", FormatError(err))
	}
	return b, nil
}

// SetOrgBilling sets an org's invoice name, email and tax id (validated by the caller).
// ENOTFOUND for an unknown org.
func (db *DB) SetOrgBilling(ctx context.Context, orgID string, b OrgBilling) (OrgBilling, error) {
	if uuid.Validate(orgID) != nil {
		return OrgBilling{}, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE orgs SET billing_name = nullif($2, ''), billing_email = nullif($3, ''),
			tax_id = nullif($4, '')
		WHERE id = $1`, orgID, b.Name, b.Email, b.TaxID)
	if err != nil {
		return OrgBilling{}, fmt.Errorf("update org billing: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return OrgBilling{}, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	return db.OrgBilling(ctx, orgID)
}

// FXRate is a USD->JPY rate (micro-JPY per USD) for a period, with its source.
type FXRate struct {
	Period string
	USDJPY int64
	Source string
}

// SetFXRates records the config file's rates: each applies to every org's period that opens
// after it is set (a period already open keeps its rate).
func (db *DB) SetFXRates(ctx context.Context, rates []FXRate) error {
	b := &pgx.Batch{}
	for _, r := range rates {
		b.Queue(`INSERT INTO fx_rates (period, usd_jpy, source, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (period) DO UPDATE SET usd_jpy = excluded.usd_jpy, source = excluded.source,
				updated_at = excluded.updated_at
			WHERE (fx_rates.usd_jpy, fx_rates.source) IS DISTINCT FROM (excluded.usd_jpy, excluded.source)`,
			r.Period, r.USDJPY, r.Source, db.now())
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set fx rates: %w", FormatError(err))
	}
	return nil
}

// PeriodFX is an org-period's fixed rate.
type PeriodFX struct {
	Period   string
	USDJPY   int64
	Source   string
	Open     bool // false: not opened yet (the rate shown is what it would open with)
	OpenedAt *time.Time
	ClosedAt *time.Time
}

var periodRE = regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])$`)

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ValidPeriod reports whether p is a period such as "2026-11".
func ValidPeriod(p string) bool { return periodRE.MatchString(p) }

// OrgPeriodFX returns the rate of an org's period: the fixed one when the period is open,
// else the one it would open with. ENOTFOUND for an unknown org, EINVALID for a bad period.
func (db *DB) OrgPeriodFX(ctx context.Context, orgID, period string) (PeriodFX, error) {
	if !ValidPeriod(period) {
		return PeriodFX{}, app.Errorf(app.EINVALID, "period %q must be a month such as 2026-11", period)
	}
	if _, err := db.Org(ctx, orgID); err != nil {
		return PeriodFX{}, err
	}
	fx := PeriodFX{Period: period}
	err := db.Pool.QueryRow(ctx, `SELECT p.opened_at IS NOT NULL,
			coalesce(p.usd_jpy, fx.usd_jpy, o.usd_jpy), coalesce(p.fx_source, fx.source, 'org default rate'),
			p.opened_at, p.closed_at
		FROM orgs o
		LEFT JOIN org_periods p ON p.org_id = o.id AND p.period = $2
		LEFT JOIN fx_rates fx ON fx.period = $2
		WHERE o.id = $1`, orgID, period).Scan(&fx.Open, &fx.USDJPY, &fx.Source, &fx.OpenedAt, &fx.ClosedAt)
	if err != nil {
		return PeriodFX{}, fmt.Errorf("select period rate: %w", FormatError(err))
	}
	return fx, nil
}

// SetOrgPeriodRate fixes the rate of an org's period before it opens (its first request).
// ECONFLICT once the period is open: its costs already use the rate it opened with.
func (db *DB) SetOrgPeriodRate(ctx context.Context, orgID, period string, rate int64, source string) (PeriodFX, error) {
	if !ValidPeriod(period) {
		return PeriodFX{}, app.Errorf(app.EINVALID, "period %q must be a month such as 2026-11", period)
	}
	if _, err := db.Org(ctx, orgID); err != nil {
		return PeriodFX{}, err
	}
	tag, err := db.Pool.Exec(ctx, `INSERT INTO org_periods (org_id, period, usd_jpy, fx_source, opened_at)
		VALUES ($1, $2, $3, $4, NULL)
		ON CONFLICT (org_id, period) DO UPDATE SET usd_jpy = excluded.usd_jpy, fx_source = excluded.fx_source
		WHERE org_periods.opened_at IS NULL`, orgID, period, rate, source)
	if err != nil {
		return PeriodFX{}, fmt.Errorf("set period rate: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return PeriodFX{}, app.Errorf(app.ECONFLICT, "period %s of this org is already open with its rate fixed; set a rate before the period's first request", period)
	}
	return db.OrgPeriodFX(ctx, orgID, period)
}

// AssembleFunc builds an org-period's invoice (everything but its id and number) from the
// facts the close read in its transaction (billing.Assemble).
type AssembleFunc func(app.InvoiceFacts) (app.Invoice, error)

// CloseResult is what a month close did for one org.
type CloseResult struct {
	// Invoice is the org-period's standing invoice (nil when the org used nothing).
	Invoice *app.Invoice
	// Created is false when the invoice existed already (a re-run creates nothing).
	Created bool
	// NoUsage is true when the org has no settled ledger row in the period: no invoice.
	NoUsage bool
}

// PeriodBounds returns the first instant of period in loc and of the next period.
func PeriodBounds(period string, loc *time.Location) (time.Time, time.Time, error) {
	t, err := time.ParseInLocation("2006-01", period, loc)
	if err != nil || !ValidPeriod(period) {
		return time.Time{}, time.Time{}, app.Errorf(app.EINVALID, "period %q must be a month such as 2026-11", period)
	}
	return t, t.AddDate(0, 1, 0), nil
}

// ledgerGroups sums an org-period's settled ledger rows per provider, model and the unit
// prices in force when each request was made.
func ledgerGroups(ctx context.Context, tx pgx.Tx, orgID, period string) ([]app.LedgerGroup, error) {
	rows, _ := tx.Query(ctx, `SELECT r.provider, r.model, p.effective_from, coalesce(p.input_per_m, 0),
			coalesce(p.cached_per_m, 0), coalesce(p.cache_write_per_m, 0), coalesce(p.output_per_m, 0), count(*),
			coalesce(sum(r.input_tokens), 0)::bigint, coalesce(sum(r.cached_tokens), 0)::bigint,
			coalesce(sum(r.cache_write_tokens), 0)::bigint, coalesce(sum(r.output_tokens), 0)::bigint,
			coalesce(sum(r.actual), 0)::bigint
		FROM reservations r
		LEFT JOIN LATERAL (
			SELECT mp.effective_from, mp.input_per_m, mp.cached_per_m, mp.cache_write_per_m, mp.output_per_m
			FROM model_prices mp
			WHERE mp.model = r.model AND mp.effective_from <= r.created_at
			ORDER BY mp.effective_from DESC LIMIT 1) p ON true
		WHERE r.org_id = $1 AND r.period = $2 AND r.status IN ('committed', 'expired')
		GROUP BY 1, 2, 3, 4, 5, 6, 7
		ORDER BY 1, 2, 3 NULLS FIRST`, orgID, period)
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.LedgerGroup, error) {
		var g app.LedgerGroup
		var from *time.Time
		err := row.Scan(&g.Provider, &g.Model, &from, &g.InputPerM, &g.CachedPerM, &g.CacheWritePerM, &g.OutputPerM,
			&g.Requests, &g.InputTokens, &g.CachedTokens, &g.CacheWriteTokens, &g.OutputTokens, &g.Micro)
		if from != nil && from.Unix() > 0 {
			g.PriceFrom = from.UTC()
		}
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("sum ledger: %w", err)
	}
	return groups, nil
}

// LedgerGroups sums an org-period's settled ledger as it is now (for reconciliation), with
// the count of its rows still pending.
func (db *DB) LedgerGroups(ctx context.Context, orgID, period string) ([]app.LedgerGroup, int64, error) {
	var groups []app.LedgerGroup
	var pending int64
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var err error
		if groups, err = ledgerGroups(ctx, tx, orgID, period); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE org_id = $1 AND period = $2 AND status = 'pending'`,
			orgID, period).Scan(&pending)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("ledger of %s %s: %w", orgID, period, FormatError(err))
	}
	return groups, pending, nil
}

// CloseOrgPeriod issues an org's invoice for period, once, in one transaction: it locks the
// org-period, returns the standing invoice if there is one (a re-run creates nothing), refuses
// while some of the period's reservations are still pending (ECONFLICT: their cost is not
// known yet), sums the ledger, lets assemble build the invoice, numbers it from the issuer's
// sequence (no gaps: the counter row is locked until commit) and stores it, frozen. An org
// without settled usage gets no invoice (NoUsage). ENOTFOUND for an unknown org, EINVALID for a
// bad period.
func (db *DB) CloseOrgPeriod(ctx context.Context, orgID, period, issuerNumber, prefix string, assemble AssembleFunc) (CloseResult, error) {
	org, err := db.Org(ctx, orgID)
	if err != nil {
		return CloseResult{}, err
	}
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return CloseResult{}, fmt.Errorf("close %s: org time zone: %w", period, err)
	}
	start, end, err := PeriodBounds(period, loc)
	if err != nil {
		return CloseResult{}, err
	}
	if now := db.now(); now.Before(end) {
		return CloseResult{}, app.Errorf(app.EINVALID, "period %s has not ended for this org: it ends at %s (%s)", period, end.Format(time.RFC3339), org.TimeZone)
	}
	billing, err := db.OrgBilling(ctx, orgID)
	if err != nil {
		return CloseResult{}, err
	}
	var res CloseResult
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		res = CloseResult{}
		// The org-period row serializes closes (and credit notes) of one org-period. A period
		// that never opened has no usage; its row is created closed.
		fx := app.InvoiceFacts{Org: org, Recipient: or(billing.Name, org.Name), Period: period, PeriodStart: start, PeriodEnd: end}
		var closed *time.Time
		err := tx.QueryRow(ctx, `INSERT INTO org_periods (org_id, period, usd_jpy, fx_source, opened_at)
				SELECT o.id, $2, coalesce(fx.usd_jpy, o.usd_jpy), coalesce(fx.source, 'org default rate'), NULL
				FROM orgs o LEFT JOIN fx_rates fx ON fx.period = $2 WHERE o.id = $1
				ON CONFLICT (org_id, period) DO UPDATE SET period = excluded.period
				RETURNING usd_jpy, fx_source, closed_at`, orgID, period).Scan(&fx.USDJPY, &fx.FXSource, &closed)
		if err != nil {
			return fmt.Errorf("lock org period: %w", err)
		}
		rows, _ := tx.Query(ctx, `SELECT id FROM invoices WHERE org_id = $1 AND period = $2 AND kind = 'invoice'
			ORDER BY superseded_by IS NULL DESC, created_at DESC LIMIT 1`, orgID, period)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("find invoice: %w", err)
		}
		if len(ids) == 1 {
			inv, err := invoice(ctx, tx, orgID, ids[0].String())
			if err != nil {
				return err
			}
			if !superseded(ctx, tx, inv.ID) {
				res.Invoice = &inv
				return nil
			}
			fx.Corrects = inv.ID
		}
		var pending int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE org_id = $1 AND period = $2 AND status = 'pending'`,
			orgID, period).Scan(&pending); err != nil {
			return fmt.Errorf("count pending: %w", err)
		}
		if pending > 0 {
			return app.Errorf(app.ECONFLICT, "%d reservations of %s are still pending (requests in flight or waiting for the sweeper); the month closes once they are settled", pending, period)
		}
		if fx.Groups, err = ledgerGroups(ctx, tx, orgID, period); err != nil {
			return err
		}
		now := db.now()
		if len(fx.Groups) == 0 {
			res.NoUsage = true
			_, err := tx.Exec(ctx, `UPDATE org_periods SET closed_at = $3 WHERE org_id = $1 AND period = $2`, orgID, period, now)
			return err
		}
		inv, err := assemble(fx)
		if err != nil {
			return fmt.Errorf("assemble invoice: %w", err)
		}
		inv.ID, inv.Kind, inv.OrgID, inv.Period, inv.Corrects = uuid.NewString(), app.KindInvoice, orgID, period, fx.Corrects
		inv.Status, inv.CreatedAt = app.InvoiceOpen, now
		if err := insertInvoice(ctx, tx, &inv, issuerNumber, prefix); err != nil {
			return err
		}
		if fx.Corrects != "" {
			if _, err := tx.Exec(ctx, `UPDATE invoices SET superseded_by = $2 WHERE id = $1 AND kind = 'invoice' AND superseded_by IS NULL`,
				fx.Corrects, inv.ID); err != nil {
				return fmt.Errorf("supersede: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE org_periods SET closed_at = $3 WHERE org_id = $1 AND period = $2`, orgID, period, now); err != nil {
			return fmt.Errorf("mark period closed: %w", err)
		}
		res.Invoice, res.Created = &inv, true
		return nil
	})
	if err != nil {
		return CloseResult{}, fmt.Errorf("close %s for org %s: %w", period, orgID, FormatError(err))
	}
	return res, nil
}

// superseded reports whether invoice id was replaced (credited) by another document.
func superseded(ctx context.Context, tx pgx.Tx, id string) bool {
	var s bool
	if err := tx.QueryRow(ctx, `SELECT superseded_by IS NOT NULL FROM invoices WHERE id = $1`, id).Scan(&s); err != nil {
		return false
	}
	return s
}

// insertInvoice numbers inv from the issuer's sequence and stores it with its lines.
func insertInvoice(ctx context.Context, tx pgx.Tx, inv *app.Invoice, issuerNumber, prefix string) error {
	var seq int64
	if err := tx.QueryRow(ctx, `INSERT INTO invoice_sequences (issuer, last) VALUES ($1, 1)
		ON CONFLICT (issuer) DO UPDATE SET last = invoice_sequences.last + 1 RETURNING last`, issuerNumber).Scan(&seq); err != nil {
		return fmt.Errorf("number invoice: %w", err)
	}
	inv.Number = fmt.Sprintf("%s-%06d", prefix, seq)
	issuer, err := json.Marshal(inv.Issuer)
	if err != nil {
		return fmt.Errorf("encode issuer: %w", err)
	}
	var corrects any
	if inv.Corrects != "" {
		corrects = inv.Corrects
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO invoices (id, number, issuer_number, seq, kind, corrects, org_id, period, period_start, period_end,
			recipient, issuer, currency, usd_jpy, fx_source, subtotal, tax_rate, tax, total, rounding, markup_bp,
			ledger_micro, issued_at, due_at, created_at, status, stripe_next_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			$23, $24, $25, $26, $25)`,
		inv.ID, inv.Number, issuerNumber, seq, inv.Kind, corrects, inv.OrgID, inv.Period, inv.PeriodStart, inv.PeriodEnd,
		inv.Recipient, issuer, inv.Currency, inv.USDJPY, inv.FXSource, inv.Subtotal, inv.TaxRate, inv.Tax, inv.Total,
		inv.Rounding, inv.MarkupBP, inv.LedgerMicro, inv.IssuedAt, inv.DueAt, inv.CreatedAt, inv.Status)
	for _, l := range inv.Lines {
		var from *time.Time
		if !l.PriceFrom.IsZero() {
			f := l.PriceFrom
			from = &f
		}
		b.Queue(`INSERT INTO invoice_lines (invoice_id, n, kind, provider, model, price_from, input_per_m, cached_per_m,
				output_per_m, description, requests, input_tokens, cached_tokens, output_tokens, quantity, ledger_micro,
				amount, tax_rate, cache_write_per_m, cache_write_tokens)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
			inv.ID, l.N, l.Kind, l.Provider, l.Model, from, l.InputPerM, l.CachedPerM, l.OutputPerM, l.Description,
			l.Requests, l.InputTokens, l.CachedTokens, l.OutputTokens, l.Quantity, l.LedgerMicro, l.Amount, l.TaxRate,
			l.CacheWritePerM, l.CacheWriteTokens)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert invoice: %w", err)
	}
	return nil
}

const invoiceCols = `i.id::text, i.number, i.kind, coalesce(c.number, ''), i.org_id::text, i.recipient, i.period,
	i.period_start, i.period_end, i.issued_at, i.due_at, i.issuer, i.currency, i.usd_jpy, i.fx_source, i.subtotal,
	i.tax_rate, i.tax, i.total, i.rounding, i.markup_bp, i.ledger_micro, i.status, coalesce(i.stripe_state->>'CustomerID', ''),
	coalesce(i.stripe_invoice_id, ''), i.stripe_synced, coalesce(i.stripe_error, ''), i.created_at, coalesce(i.superseded_by::text, ''),
	(SELECT o.timezone FROM orgs o WHERE o.id = i.org_id)`

// InvoiceRow is an invoice as listed, with the document that superseded it ("" when none).
type InvoiceRow struct {
	app.Invoice
	SupersededBy string
}

func scanInvoice(row pgx.CollectableRow) (InvoiceRow, error) {
	var r InvoiceRow
	inv := &r.Invoice
	var kind, rounding, status, tz string
	var issuer []byte
	err := row.Scan(&inv.ID, &inv.Number, &kind, &inv.Corrects, &inv.OrgID, &inv.Recipient, &inv.Period, &inv.PeriodStart,
		&inv.PeriodEnd, &inv.IssuedAt, &inv.DueAt, &issuer, &inv.Currency, &inv.USDJPY, &inv.FXSource, &inv.Subtotal,
		&inv.TaxRate, &inv.Tax, &inv.Total, &rounding, &inv.MarkupBP, &inv.LedgerMicro, &status, &inv.StripeCustomerID,
		&inv.StripeInvoiceID, &inv.StripeSynced, &inv.StripeError, &inv.CreatedAt, &r.SupersededBy, &tz)
	if err != nil {
		return r, err
	}
	// Dates print in the org's time zone: the period is its calendar month, and an invoice
	// issued at 00:30 in Tokyo is dated that day, not the day before in UTC.
	if loc, err := time.LoadLocation(tz); err == nil {
		inv.PeriodStart, inv.PeriodEnd = inv.PeriodStart.In(loc), inv.PeriodEnd.In(loc)
		inv.IssuedAt, inv.DueAt = inv.IssuedAt.In(loc), inv.DueAt.In(loc)
	}
	inv.Kind, inv.Rounding, inv.Status = app.InvoiceKind(kind), app.TaxRounding(rounding), app.InvoiceStatus(status)
	if err := json.Unmarshal(issuer, &inv.Issuer); err != nil {
		return r, fmt.Errorf("decode issuer: %w", err)
	}
	return r, nil
}

// invoice reads one invoice of org with its lines; Corrects holds the corrected document's
// number. ENOTFOUND for an unknown invoice.
func invoice(ctx context.Context, q pgx.Tx, orgID, id string) (app.Invoice, error) {
	rows, _ := q.Query(ctx, `SELECT `+invoiceCols+` FROM invoices i LEFT JOIN invoices c ON c.id = i.corrects
		WHERE i.id = $1 AND i.org_id = $2`, id, orgID)
	r, err := pgx.CollectExactlyOneRow(rows, scanInvoice)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Invoice{}, app.Errorf(app.ENOTFOUND, "invoice %q not found", id)
	}
	if err != nil {
		return app.Invoice{}, fmt.Errorf("select invoice: %w", err)
	}
	inv := r.Invoice
	rows, _ = q.Query(ctx, `SELECT n, kind, provider, model, price_from, input_per_m, cached_per_m, output_per_m,
			description, requests, input_tokens, cached_tokens, output_tokens, quantity, ledger_micro, amount, tax_rate,
			cache_write_per_m, cache_write_tokens
		FROM invoice_lines WHERE invoice_id = $1 ORDER BY n`, id)
	inv.Lines, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.InvoiceLine, error) {
		var l app.InvoiceLine
		var kind string
		var from *time.Time
		err := row.Scan(&l.N, &kind, &l.Provider, &l.Model, &from, &l.InputPerM, &l.CachedPerM, &l.OutputPerM,
			&l.Description, &l.Requests, &l.InputTokens, &l.CachedTokens, &l.OutputTokens, &l.Quantity, &l.LedgerMicro,
			&l.Amount, &l.TaxRate, &l.CacheWritePerM, &l.CacheWriteTokens)
		l.Kind = app.LineKind(kind)
		if from != nil {
			l.PriceFrom = from.UTC()
		}
		return l, err
	})
	if err != nil {
		return app.Invoice{}, fmt.Errorf("select invoice lines: %w", err)
	}
	return inv, nil
}

// Invoice returns one invoice of org with its lines (Corrects holds the corrected document's
// number). ENOTFOUND for an unknown invoice or one of another org.
func (db *DB) Invoice(ctx context.Context, orgID, id string) (app.Invoice, error) {
	if uuid.Validate(id) != nil || uuid.Validate(orgID) != nil {
		return app.Invoice{}, app.Errorf(app.ENOTFOUND, "invoice %q not found", id)
	}
	var inv app.Invoice
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var err error
		inv, err = invoice(ctx, tx, orgID, id)
		return err
	})
	if err != nil {
		return app.Invoice{}, FormatError(err)
	}
	return inv, nil
}

// Invoices lists an org's documents (without lines), newest first, optionally of one period.
func (db *DB) Invoices(ctx context.Context, orgID, period string) ([]InvoiceRow, error) {
	if _, err := db.Org(ctx, orgID); err != nil {
		return nil, err
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+invoiceCols+` FROM invoices i LEFT JOIN invoices c ON c.id = i.corrects
		WHERE i.org_id = $1 AND ($2 = '' OR i.period = $2) ORDER BY i.seq DESC`, orgID, period)
	out, err := pgx.CollectRows(rows, scanInvoice)
	if err != nil {
		return nil, fmt.Errorf("list invoices: %w", FormatError(err))
	}
	return out, nil
}

// CreditInvoice issues a credit note that negates invoice id of org in full (its lines, tax
// and total, exactly as charged), numbered from the issuer's sequence, and supersedes the
// invoice; the period reopens for closing, so the next close issues a corrected invoice that
// references the original. ENOTFOUND, or ECONFLICT for a document already credited or itself a
// credit note.
func (db *DB) CreditInvoice(ctx context.Context, orgID, id, issuerNumber, prefix string) (app.Invoice, error) {
	if uuid.Validate(id) != nil || uuid.Validate(orgID) != nil {
		return app.Invoice{}, app.Errorf(app.ENOTFOUND, "invoice %q not found", id)
	}
	var cn app.Invoice
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var period string
		if err := tx.QueryRow(ctx, `SELECT period FROM invoices WHERE id = $1 AND org_id = $2`, id, orgID).Scan(&period); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return app.Errorf(app.ENOTFOUND, "invoice %q not found", id)
			}
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM org_periods WHERE org_id = $1 AND period = $2 FOR UPDATE`, orgID, period); err != nil {
			return err
		}
		orig, err := invoice(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		if orig.Kind != app.KindInvoice {
			return app.Errorf(app.ECONFLICT, "%s is a credit note; only an invoice can be credited", orig.Number)
		}
		if superseded(ctx, tx, id) {
			return app.Errorf(app.ECONFLICT, "invoice %s is already credited", orig.Number)
		}
		now := db.now()
		cn = orig
		cn.ID, cn.Kind, cn.Corrects, cn.Status, cn.CreatedAt, cn.IssuedAt = uuid.NewString(), app.KindCreditNote, orig.ID, app.InvoiceOpen, now, now
		cn.DueAt = now
		cn.Subtotal, cn.Tax, cn.Total, cn.LedgerMicro = -orig.Subtotal, -orig.Tax, -orig.Total, -orig.LedgerMicro
		cn.Lines = make([]app.InvoiceLine, len(orig.Lines))
		for i, l := range orig.Lines {
			l.Amount, l.LedgerMicro, l.Quantity = -l.Amount, -l.LedgerMicro, -l.Quantity
			l.Requests, l.InputTokens, l.CachedTokens, l.OutputTokens = -l.Requests, -l.InputTokens, -l.CachedTokens, -l.OutputTokens
			l.CacheWriteTokens = -l.CacheWriteTokens
			cn.Lines[i] = l
		}
		if err := insertInvoice(ctx, tx, &cn, issuerNumber, prefix); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE invoices SET superseded_by = $2 WHERE id = $1`, id, cn.ID); err != nil {
			return fmt.Errorf("supersede: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE org_periods SET closed_at = NULL WHERE org_id = $1 AND period = $2`, orgID, period)
		cn.Corrects = orig.Number
		return err
	})
	if err != nil {
		return app.Invoice{}, fmt.Errorf("credit invoice: %w", FormatError(err))
	}
	return cn, nil
}

// ReconcileFacts is one org-period as the reconciliation needs it.
type ReconcileFacts struct {
	Org     app.Org
	USDJPY  int64
	Groups  []app.LedgerGroup
	Pending int64
	// Invoice is the standing invoice with its lines, nil when none.
	Invoice *app.Invoice
}

// Reconciliation reads, for every org with ledger rows or an invoice in period (or only orgID
// when set), the ledger as it is now and the standing invoice. EINVALID for a bad period.
func (db *DB) Reconciliation(ctx context.Context, period, orgID string) ([]ReconcileFacts, error) {
	if !ValidPeriod(period) {
		return nil, app.Errorf(app.EINVALID, "period %q must be a month such as 2026-11", period)
	}
	var out []ReconcileFacts
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT o.id::text, o.name, o.currency, o.timezone, o.usd_jpy, o.created_at,
				coalesce(p.usd_jpy, o.usd_jpy),
				(SELECT i.id::text FROM invoices i WHERE i.org_id = o.id AND i.period = $1 AND i.kind = 'invoice'
					AND i.superseded_by IS NULL)
			FROM orgs o LEFT JOIN org_periods p ON p.org_id = o.id AND p.period = $1
			WHERE ($2 = '' OR o.id::text = $2) AND (
				EXISTS (SELECT 1 FROM reservations r WHERE r.org_id = o.id AND r.period = $1)
				OR EXISTS (SELECT 1 FROM invoices i WHERE i.org_id = o.id AND i.period = $1))
			ORDER BY o.name, o.id`, period, orgID)
		type orgRow struct {
			f   ReconcileFacts
			inv *string
		}
		orgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (orgRow, error) {
			var r orgRow
			o := &r.f.Org
			err := row.Scan(&o.ID, &o.Name, &o.Currency, &o.TimeZone, &o.USDJPY, &o.CreatedAt, &r.f.USDJPY, &r.inv)
			return r, err
		})
		if err != nil {
			return fmt.Errorf("list orgs: %w", err)
		}
		for _, o := range orgs {
			f := o.f
			if f.Groups, err = ledgerGroups(ctx, tx, f.Org.ID, period); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE org_id = $1 AND period = $2 AND status = 'pending'`,
				f.Org.ID, period).Scan(&f.Pending); err != nil {
				return fmt.Errorf("count pending: %w", err)
			}
			if o.inv != nil {
				inv, err := invoice(ctx, tx, f.Org.ID, *o.inv)
				if err != nil {
					return err
				}
				f.Invoice = &inv
			}
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", period, FormatError(err))
	}
	return out, nil
}

// StripeJob is a document to mirror in Stripe, held by one worker until its lease ends.
type StripeJob struct {
	Invoice app.Invoice
	OrgName string
	Billing OrgBilling
	// State is the saved progress (JSON of billing.SyncState; "{}" at first).
	State []byte
	// CorrectedStripeInvoiceID is, for a credit note, the Stripe invoice of the document it
	// negates ("" while that one is not in Stripe yet).
	CorrectedStripeInvoiceID string
	Attempts                 int
}

// ClaimStripeJobs takes up to limit documents not yet mirrored in Stripe whose next attempt is
// due (or only document onlyID, whenever due), holding them for lease so that one worker syncs
// each at a time.
func (db *DB) ClaimStripeJobs(ctx context.Context, lease time.Duration, limit int, onlyID string) ([]StripeJob, error) {
	now := db.now()
	var jobs []StripeJob
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `WITH due AS (
				SELECT id FROM invoices
				WHERE NOT stripe_synced AND (stripe_locked_until IS NULL OR stripe_locked_until <= $1)
					AND CASE WHEN $3 = '' THEN stripe_next_at <= $1 ELSE id::text = $3 END
				ORDER BY stripe_next_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
			UPDATE invoices i SET stripe_locked_until = $4, stripe_attempts = i.stripe_attempts + 1
			FROM due WHERE i.id = due.id
			RETURNING i.id::text, i.org_id::text, i.stripe_state, i.stripe_attempts,
				coalesce((SELECT c.stripe_invoice_id FROM invoices c WHERE c.id = i.corrects), '')`,
			now, limit, onlyID, now.Add(lease))
		type claimed struct {
			id, org  string
			state    []byte
			attempts int
			orig     string
		}
		cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
			var c claimed
			err := row.Scan(&c.id, &c.org, &c.state, &c.attempts, &c.orig)
			return c, err
		})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		for _, c := range cs {
			inv, err := invoice(ctx, tx, c.org, c.id)
			if err != nil {
				return err
			}
			j := StripeJob{Invoice: inv, State: c.state, CorrectedStripeInvoiceID: c.orig, Attempts: c.attempts}
			if err := tx.QueryRow(ctx, `SELECT name, coalesce(billing_name, ''), coalesce(billing_email, ''),
					coalesce(tax_id, ''), coalesce(stripe_customer_id, '') FROM orgs WHERE id = $1`, c.org).
				Scan(&j.OrgName, &j.Billing.Name, &j.Billing.Email, &j.Billing.TaxID, &j.Billing.StripeCustomerID); err != nil {
				return fmt.Errorf("read org: %w", err)
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim stripe jobs: %w", FormatError(err))
	}
	return jobs, nil
}

// SaveStripeState records a document's Stripe progress after a step, and the org's Stripe
// customer (kept for its next invoices).
func (db *DB) SaveStripeState(ctx context.Context, orgID, invoiceID string, state []byte, customerID, stripeInvoiceID string) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE invoices SET stripe_state = $2, stripe_invoice_id = coalesce(nullif($3, ''), stripe_invoice_id)
		WHERE id = $1`, invoiceID, state, stripeInvoiceID)
	if customerID != "" {
		b.Queue(`UPDATE orgs SET stripe_customer_id = $2 WHERE id = $1 AND stripe_customer_id IS DISTINCT FROM $2`, orgID, customerID)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("save stripe state: %w", FormatError(err))
	}
	return nil
}

// FinishStripeSync ends a sync attempt: synced when syncErr is "", else the error is kept
// (visible on the invoice) and the next attempt is due at next.
func (db *DB) FinishStripeSync(ctx context.Context, invoiceID, syncErr string, next time.Time) error {
	_, err := db.Pool.Exec(ctx, `UPDATE invoices SET stripe_synced = ($2 = ''), stripe_error = nullif($2, ''),
			stripe_next_at = CASE WHEN $2 = '' THEN NULL ELSE $3::timestamptz END, stripe_locked_until = NULL
		WHERE id = $1`, invoiceID, syncErr, next)
	if err != nil {
		return fmt.Errorf("finish stripe sync: %w", FormatError(err))
	}
	return nil
}

// SetInvoiceStatusFromStripe records a payment status Stripe reported for the document whose
// Stripe invoice is stripeInvoiceID (or, failing that, whose id is yosanID). It returns the
// document's number, or "" when no document matches (an event for an invoice made outside
// Yosan).
func (db *DB) SetInvoiceStatusFromStripe(ctx context.Context, stripeInvoiceID, yosanID string, status app.InvoiceStatus) (string, error) {
	if uuid.Validate(yosanID) != nil {
		yosanID = ""
	}
	var number string
	err := db.Pool.QueryRow(ctx, `UPDATE invoices SET status = $3, status_at = $4
		WHERE (stripe_invoice_id = $1 AND $1 <> '') OR ($2 <> '' AND id::text = $2 AND kind = 'invoice')
		RETURNING number`, stripeInvoiceID, yosanID, status, db.now()).Scan(&number)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("set invoice status: %w", FormatError(err))
	}
	return number, nil
}

// PeriodsToClose lists the org-periods opened and not closed yet, oldest first, with the
// org's time zone, for the scheduled close to check whether each has ended.
func (db *DB) PeriodsToClose(ctx context.Context) ([]OrgPeriod, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT p.org_id::text, p.period, o.timezone FROM org_periods p
		JOIN orgs o ON o.id = p.org_id WHERE p.closed_at IS NULL AND p.opened_at IS NOT NULL ORDER BY p.period, p.org_id`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrgPeriod, error) {
		var p OrgPeriod
		err := row.Scan(&p.OrgID, &p.Period, &p.TimeZone)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list periods to close: %w", FormatError(err))
	}
	return out, nil
}

// OrgPeriod names one org's period.
type OrgPeriod struct {
	OrgID    string
	Period   string
	TimeZone string
}

// OrgsWithPeriod lists the orgs that opened period or have ledger rows in it.
func (db *DB) OrgsWithPeriod(ctx context.Context, period string) ([]string, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT org_id::text FROM org_periods WHERE period = $1 AND opened_at IS NOT NULL
		UNION SELECT DISTINCT org_id::text FROM reservations WHERE period = $1 ORDER BY 1`, period)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list orgs of %s: %w", period, FormatError(err))
	}
	return ids, nil
}

// OrgPeriods lists the periods an org opened or has ledger rows in, newest first.
func (db *DB) OrgPeriods(ctx context.Context, orgID string) ([]string, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT period FROM org_periods WHERE org_id = $1 AND opened_at IS NOT NULL
		UNION SELECT DISTINCT period FROM reservations WHERE org_id = $1 ORDER BY 1 DESC`, orgID)
	ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list periods: %w", FormatError(err))
	}
	return ps, nil
}
