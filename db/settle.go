package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Settle moves a pending reservation to its final state (committed, released or expired) and
// moves its money, at most once: the ledger row changes only while it is pending, writing a
// fresh apply_nonce, and the budgets change only by the rows carrying that nonce. A repeated or
// racing settlement returns Applied=false and changes nothing. Errors: EUNAVAILABLE when
// PostgreSQL is unreachable, EINVALID for a malformed settlement.
func (l *Ledger) Settle(ctx context.Context, s app.Settlement) (app.SettleOutcome, error) {
	switch s.Status {
	case app.StatusCommitted, app.StatusExpired:
		if s.Actual < 0 || s.GlobalActual < 0 {
			return app.SettleOutcome{}, app.Errorf(app.EINVALID, "settle: negative actual cost")
		}
	case app.StatusReleased:
		s.Actual, s.GlobalActual = 0, 0
	default:
		return app.SettleOutcome{}, app.Errorf(app.EINVALID, "settle: bad final status %q", s.Status)
	}
	s.Usage = boundUsage(s.Usage)
	if len(s.LockIDs) == 0 {
		ids, qids, err := l.lockIDs(ctx, s.RequestID)
		if err != nil {
			return app.SettleOutcome{}, err
		}
		if ids == nil {
			return app.SettleOutcome{}, nil // no such reservation: nothing to apply
		}
		s.LockIDs, s.QuotaIDs = ids, qids
	}
	c := &settleCall{s: s, ready: make(chan struct{})}
	// Settlement must not be lost to a cancelled request: it is queued regardless of ctx.
	if l.stopped() {
		return app.SettleOutcome{}, app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
	}
	l.settleCh <- c
	if l.await(c.ready) {
		return app.SettleOutcome{}, app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
	}
	return c.out, c.err
}

// maxRecordedTokens bounds each token count a settlement records: an upstream's absurd usage
// is recorded as this, so it cannot overflow the quota windows' arithmetic or break the
// batch statement it shares with other calls.
const maxRecordedTokens = 1 << 40

// boundUsage is u with each count in [0, maxRecordedTokens] and the cached and cache-write
// parts within the prompt: what the ledger row records (the caller computed the cost).
func boundUsage(u app.Usage) app.Usage {
	b := func(n, hi int64) int64 { return min(max(n, 0), hi) }
	u.PromptTokens = b(u.PromptTokens, maxRecordedTokens)
	u.CompletionTokens = b(u.CompletionTokens, maxRecordedTokens)
	u.CachedTokens = b(u.CachedTokens, u.PromptTokens)
	u.CacheWriteTokens = b(u.CacheWriteTokens, u.PromptTokens-u.CachedTokens)
	u.CacheWrite1hTokens = b(u.CacheWrite1hTokens, u.CacheWriteTokens)
	return u
}

// lockIDs reads the budget rows (global included) and quota window rows a reservation holds;
// ids is nil when there is no such reservation.
func (l *Ledger) lockIDs(ctx context.Context, requestID string) (ids, qids []int64, err error) {
	var gid *int64
	err = l.db.Pool.QueryRow(ctx, `SELECT budget_ids, global_budget_id, quota_ids FROM reservations WHERE request_id = $1`,
		requestID).Scan(&ids, &gid, &qids)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("settle: read reservation: %w", FormatError(err))
	}
	r := app.Reservation{BudgetIDs: ids, GlobalBudgetID: gid}
	return r.LockIDs(), qids, nil
}

// queueSettle queues the settlement statement for batch and returns the reader of its answer.
// The ledger rows move only while pending, each writing a fresh apply_nonce, and the budgets
// move only by the rows that carry the nonce just written.
func (l *Ledger) queueSettle(b *pgx.Batch, batch []*settleCall) func(pgx.BatchResults) error {
	if len(batch) == 0 {
		return func(pgx.BatchResults) error { return nil }
	}
	seen := make(map[string]bool, len(batch))
	sent := make([]*settleCall, 0, len(batch))
	var rids, statuses, nonces, sources, eclasses, ecodes []string
	var actuals, gactuals, itoks, ctoks, otoks, wtoks []int64
	for _, c := range batch {
		c.out = app.SettleOutcome{}
		if seen[c.s.RequestID] {
			continue // the same reservation twice in one batch: only the first may apply
		}
		seen[c.s.RequestID] = true
		sent = append(sent, c)
		rids = append(rids, c.s.RequestID)
		statuses = append(statuses, string(c.s.Status))
		nonces = append(nonces, uuid.NewString())
		sources = append(sources, c.s.UsageSource)
		actuals = append(actuals, c.s.Actual)
		gactuals = append(gactuals, c.s.GlobalActual)
		itoks = append(itoks, c.s.Usage.PromptTokens)
		ctoks = append(ctoks, c.s.Usage.CachedTokens)
		otoks = append(otoks, c.s.Usage.CompletionTokens)
		wtoks = append(wtoks, c.s.Usage.CacheWriteTokens)
		eclasses = append(eclasses, string(c.s.ErrorClass))
		ecodes = append(ecodes, c.s.ErrorCode)
	}
	b.Queue(`WITH d AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
				$6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $11::bigint[],
				$12::text[], $13::text[])
				AS d(rid, st, nonce, act, gact, itok, ctok, otok, src, wtok, ecls, ecode)),
		upd AS (
			UPDATE reservations r SET status = d.st, actual = d.act,
				global_actual = CASE WHEN r.global_budget_id IS NULL THEN NULL ELSE d.gact END,
				apply_nonce = d.nonce::uuid, overrun = d.act > r.amount,
				input_tokens = d.itok, cached_tokens = d.ctok, output_tokens = d.otok, cache_write_tokens = d.wtok,
				usage_source = nullif(d.src, ''), settled_at = $10,
				error_class = nullif(d.ecls, ''), error_code = nullif(d.ecode, '')
			FROM d
			WHERE r.request_id = d.rid AND r.status = 'pending'
			RETURNING r.request_id, r.budget_ids, r.amount, r.actual, r.global_budget_id, r.global_amount,
				r.global_actual, r.overrun, r.apply_nonce, d.nonce::uuid AS written, r.quota_ids, r.quota_amounts,
				d.itok + d.otok AS tokens),
		mv AS (
			SELECT bid, sum(res) AS res, sum(sp) AS sp FROM (
				SELECT unnest(budget_ids) AS bid, amount AS res, actual AS sp FROM upd WHERE apply_nonce = written
				UNION ALL
				SELECT global_budget_id, global_amount, global_actual FROM upd
				WHERE global_budget_id IS NOT NULL AND apply_nonce = written) x
			GROUP BY bid),
		bu AS (
			UPDATE budgets b SET reserved = b.reserved - mv.res, spent = b.spent + mv.sp
			FROM mv WHERE b.id = mv.bid RETURNING b.id),
		qmv AS (
			SELECT q.qid, sum(q.amt) AS res,
				sum(CASE w.kind WHEN 'tpm' THEN upd.tokens ELSE 1 END) AS used
			FROM upd CROSS JOIN LATERAL unnest(upd.quota_ids, upd.quota_amounts) AS q(qid, amt)
			JOIN quota_windows w ON w.id = q.qid
			WHERE upd.apply_nonce = upd.written
			GROUP BY q.qid),
		qu AS (
			UPDATE quota_windows w SET reserved = w.reserved - qmv.res, used = w.used + qmv.used
			FROM qmv WHERE w.id = qmv.qid RETURNING w.id)
		SELECT request_id, overrun FROM upd`,
		rids, statuses, nonces, actuals, gactuals, itoks, ctoks, otoks, sources, l.db.now(), wtoks, eclasses, ecodes)
	return func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("settle reservations: %w", err)
		}
		defer rows.Close()
		applied := make(map[string]bool, len(rids))
		overrun := make(map[string]bool)
		for rows.Next() {
			var id string
			var ov bool
			if err := rows.Scan(&id, &ov); err != nil {
				return fmt.Errorf("settle reservations: %w", err)
			}
			applied[id] = true
			overrun[id] = ov
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("settle reservations: %w", err)
		}
		for _, c := range sent {
			c.out = app.SettleOutcome{Applied: applied[c.s.RequestID], Overrun: overrun[c.s.RequestID]}
		}
		return nil
	}
}

// SweepMode says how the sweeper settles a reservation past its deadline.
type SweepMode string

// Sweep modes.
const (
	// SweepCharge charges the reserved amount (status expired): the upstream may well have
	// billed us, so the ledger never under-counts. The default.
	SweepCharge SweepMode = "charge"
	// SweepRelease releases the reservation (status released).
	SweepRelease SweepMode = "release"
)

// Sweep settles up to limit pending reservations whose deadline passed before now, and returns
// how many this call settled. Several sweepers (one per gateway process) may run at once: each
// reservation is settled exactly once.
func (l *Ledger) Sweep(ctx context.Context, mode SweepMode, limit int) (int, error) {
	rows, _ := l.db.Pool.Query(ctx, `SELECT `+reservationCols+` FROM reservations
		WHERE status = 'pending' AND deadline < $1 ORDER BY deadline LIMIT $2`, l.db.Now().UTC(), limit)
	stale, err := pgx.CollectRows(rows, scanReservation)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", FormatError(err))
	}
	n := 0
	for i := range stale {
		r := &stale[i]
		s := app.Settlement{RequestID: r.RequestID, Status: app.StatusExpired, Actual: r.Amount,
			GlobalActual: r.GlobalAmount, UsageSource: "sweeper", LockIDs: r.LockIDs(), QuotaIDs: r.QuotaIDs,
			Usage: app.Usage{PromptTokens: r.EstInputTokens, CompletionTokens: r.MaxOutputTokens}}
		if mode == SweepRelease {
			s.Status, s.Actual, s.GlobalActual, s.Usage = app.StatusReleased, 0, 0, app.Usage{}
		}
		out, err := l.Settle(ctx, s)
		if err != nil {
			return n, fmt.Errorf("sweep: %w", err)
		}
		if out.Applied {
			n++
		}
	}
	return n, nil
}

// Reservations lists an org's ledger rows, newest first, optionally filtered by status.
func (l *Ledger) Reservations(ctx context.Context, orgID string, status app.ReservationStatus, limit int) ([]app.Reservation, error) {
	rows, _ := l.db.Pool.Query(ctx, `SELECT `+reservationCols+` FROM reservations
		WHERE org_id = $1 AND ($2 = '' OR status = $2) ORDER BY created_at DESC, request_id LIMIT $3`,
		orgID, string(status), limit)
	rs, err := pgx.CollectRows(rows, scanReservation)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", FormatError(err))
	}
	return rs, nil
}
