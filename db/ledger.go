package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"yosan/app"
)

// LedgerConfig tunes the ledger.
type LedgerConfig struct {
	// GlobalCurrency and GlobalLocation define the gateway-wide node's money and periods.
	GlobalCurrency string
	GlobalLocation *time.Location
	// MaxBatch bounds how many calls one batch transaction admits.
	MaxBatch int
}

// Ledger is the reservation engine (DESIGN.md section 5). Calls are batched per process: one
// loop takes every reserve and settle call that arrived while the previous batch transaction
// was in flight (no timer: a lone request waits for nothing) and runs them as one transaction
// in one round trip: lock the union of their budget rows in id order (the one global lock
// order), settle, then admit the reserves in arrival order. Under load many requests share one
// lock acquisition and one WAL flush. Per-request semantics do not change: every request has
// its own ledger row, request_id and apply nonce.
type Ledger struct {
	db   *DB
	cfg  LedgerConfig
	ids  sync.Map // budgetKey -> int64
	qids quotaIDCache

	reserveCh chan *reserveCall
	settleCh  chan *settleCall
	stop      chan struct{}
	// drained is closed once Close has answered every queued call: a call queued after that
	// is answered by its caller (await).
	drained chan struct{}
	wg      sync.WaitGroup
}

type reserveCall struct {
	req   app.ReserveRequest
	ids   []int64 // org-currency budget rows, same order as req.Nodes
	gid   int64   // global budget row, 0 when none
	qids  []int64 // quota window rows, same order as req.Quotas
	res   app.ReserveResult
	err   error
	ready chan struct{}
}

type settleCall struct {
	s     app.Settlement
	out   app.SettleOutcome
	err   error
	ready chan struct{}
}

// NewLedger starts the ledger's batch loop; Close stops it.
func NewLedger(db *DB, cfg LedgerConfig) *Ledger {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.GlobalCurrency == "" {
		cfg.GlobalCurrency = app.JPY
	}
	if cfg.GlobalLocation == nil {
		cfg.GlobalLocation = time.UTC
	}
	l := &Ledger{
		db:        db,
		cfg:       cfg,
		reserveCh: make(chan *reserveCall, 4096),
		settleCh:  make(chan *settleCall, 4096),
		stop:      make(chan struct{}),
		drained:   make(chan struct{}),
	}
	l.wg.Add(1)
	go l.loop()
	return l
}

// Close stops the batch loop after the batch in flight. Calls still queued then are answered
// with EUNAVAILABLE.
func (l *Ledger) Close() {
	close(l.stop)
	l.wg.Wait()
	defer close(l.drained)
	for {
		select {
		case c := <-l.reserveCh:
			c.err = app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
			close(c.ready)
		case c := <-l.settleCh:
			c.err = app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
			close(c.ready)
		default:
			return
		}
	}
}

// await waits for a queued call's answer. A call that slipped into the queue after Close
// drained it is never run: it is answered EUNAVAILABLE (true) instead of waiting forever.
func (l *Ledger) await(ready chan struct{}) bool {
	select {
	case <-ready:
		return false
	case <-l.drained:
		select {
		case <-ready:
			return false
		default:
			return true
		}
	}
}

func (l *Ledger) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *Ledger) loop() {
	defer l.wg.Done()
	rs := make([]*reserveCall, 0, l.cfg.MaxBatch)
	ss := make([]*settleCall, 0, l.cfg.MaxBatch)
	for {
		rs, ss = rs[:0], ss[:0]
		select {
		case <-l.stop:
			return
		case c := <-l.reserveCh:
			rs = append(rs, c)
		case c := <-l.settleCh:
			ss = append(ss, c)
		}
	drain:
		for len(rs) < l.cfg.MaxBatch && len(ss) < l.cfg.MaxBatch {
			select {
			case c := <-l.reserveCh:
				rs = append(rs, c)
			case c := <-l.settleCh:
				ss = append(ss, c)
			default:
				break drain
			}
		}
		l.runBatch(rs, ss)
	}
}

// Reserve holds req.Amount on every node of req.Nodes (and GlobalAmount on the global node)
// for req.Period, all or nothing. A request whose id was already reserved returns the existing
// row with Duplicate set and moves no money. Errors: EUNAVAILABLE when PostgreSQL is
// unreachable (the caller must not call upstream), EINVALID for a malformed request.
func (l *Ledger) Reserve(ctx context.Context, req app.ReserveRequest) (app.ReserveResult, error) {
	if req.RequestID == "" || req.Amount < 0 || req.GlobalAmount < 0 || len(req.Nodes) == 0 {
		return app.ReserveResult{}, app.Errorf(app.EINVALID, "reserve: request id, nodes and a non-negative amount are required")
	}
	ids, err := l.budgetIDs(ctx, req.OrgID, req.Period, req.Currency, req.Nodes)
	if err != nil {
		return app.ReserveResult{}, fmt.Errorf("reserve: %w", err)
	}
	c := &reserveCall{req: req, ids: ids, ready: make(chan struct{})}
	if req.GlobalPeriod != "" {
		gids, err := l.budgetIDs(ctx, "", req.GlobalPeriod, req.GlobalCurrency, []app.Node{{Kind: app.NodeGlobal, ID: app.GlobalNodeID}})
		if err != nil {
			return app.ReserveResult{}, fmt.Errorf("reserve: %w", err)
		}
		c.gid = gids[0]
	}
	if c.qids, err = l.quotaIDs(ctx, req.Quotas); err != nil {
		return app.ReserveResult{}, fmt.Errorf("reserve: %w", err)
	}
	if l.stopped() {
		return app.ReserveResult{}, app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
	}
	select {
	case l.reserveCh <- c:
	case <-ctx.Done():
		return app.ReserveResult{}, app.WrapError(app.EUNAVAILABLE, ctx.Err(), "the budget ledger is busy")
	}
	// Once queued, the call is answered even if ctx ends: the batch owns it now, and a
	// reservation made for a caller that left is released by that caller's settle path or the
	// sweeper.
	if l.await(c.ready) {
		return app.ReserveResult{}, app.Errorf(app.EUNAVAILABLE, "the budget ledger is shutting down")
	}
	return c.res, c.err
}

const maxTxAttempts = 4

// retryable reports whether a batch transaction failed for a reason a retry can fix.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01" || pgErr.Code == "40001"
	}
	return false
}

// runBatch runs one batch transaction, retrying it on a deadlock or serialization failure,
// and answers every call in it. When PostgreSQL refuses the shared statement for another
// reason, one call may be at fault: each call is then run on its own, so it fails alone and
// the others (settlements above all, which would otherwise wait for the sweeper) still land.
func (l *Ledger) runBatch(rs []*reserveCall, ss []*settleCall) {
	err := l.tryBatch(rs, ss)
	var pgErr *pgconn.PgError
	if err != nil && len(rs)+len(ss) > 1 && errors.As(err, &pgErr) {
		for _, c := range ss {
			l.answer(nil, []*settleCall{c}, l.tryBatch(nil, []*settleCall{c}))
		}
		for _, c := range rs {
			l.answer([]*reserveCall{c}, nil, l.tryBatch([]*reserveCall{c}, nil))
		}
		return
	}
	l.answer(rs, ss, err)
}

// tryBatch runs batchTx, again on a deadlock or serialization failure.
func (l *Ledger) tryBatch(rs []*reserveCall, ss []*settleCall) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		if err = l.batchTx(rs, ss); err == nil || !retryable(err) {
			break
		}
	}
	return err
}

// answer hands each call its result (or err, for all of them).
func (l *Ledger) answer(rs []*reserveCall, ss []*settleCall, err error) {
	for _, c := range rs {
		if err != nil {
			c.res, c.err = app.ReserveResult{}, fmt.Errorf("reserve: %w", FormatError(err))
		}
		close(c.ready)
	}
	for _, c := range ss {
		if err != nil {
			c.out, c.err = app.SettleOutcome{}, fmt.Errorf("settle: %w", FormatError(err))
		}
		close(c.ready)
	}
}

// batchTx sends the batch as one pipeline ending in a single Sync, which PostgreSQL runs as
// one implicit transaction: one round trip and one commit for all of it. The first statement
// locks every budget row the batch touches in id order; the settlements go next, so the room
// they free is there for the reserves; reserve_batch (migrations/0002) then admits in arrival
// order, inserts the ledger rows and adds to the budgets.
func (l *Ledger) batchTx(rs []*reserveCall, ss []*settleCall) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	idSet := make(map[int64]struct{}, 8)
	for _, c := range rs {
		for _, id := range c.ids {
			idSet[id] = struct{}{}
		}
		if c.gid != 0 {
			idSet[c.gid] = struct{}{}
		}
	}
	for _, c := range ss {
		for _, id := range c.s.LockIDs {
			idSet[id] = struct{}{}
		}
	}
	all := sortedIDs(idSet)
	// Quota windows come after every budget row in the lock order, also by id.
	rq, sq := make(map[int64]struct{}), make(map[int64]struct{})
	for _, c := range rs {
		for _, id := range c.qids {
			rq[id] = struct{}{}
			sq[id] = struct{}{}
		}
	}
	for _, c := range ss {
		for _, id := range c.s.QuotaIDs {
			sq[id] = struct{}{}
		}
	}
	reserveQuota := sortedIDs(rq)
	lockQuota := len(ss) > 0 && len(sq) > 0

	b := &pgx.Batch{}
	if len(ss) > 0 {
		// reserve_batch locks the same rows in the same order by itself; settlements
		// need them locked before they touch the first ledger row.
		b.Queue(`SELECT id FROM budgets WHERE id = ANY($1) ORDER BY id FOR UPDATE`, all)
		if lockQuota {
			b.Queue(`SELECT id FROM quota_windows WHERE id = ANY($1) ORDER BY id FOR UPDATE`, sortedIDs(sq))
		}
	}
	readSettle := l.queueSettle(b, ss)
	readReserve := l.queueReserve(b, rs, all, reserveQuota)
	br := l.db.Pool.SendBatch(ctx, b)
	defer br.Close()
	if len(ss) > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock budgets: %w", err)
		}
		if lockQuota {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("lock quota windows: %w", err)
			}
		}
	}
	if err := readSettle(br); err != nil {
		return err
	}
	if err := readReserve(br); err != nil {
		return err
	}
	return br.Close()
}

// queueReserve queues the reserve_batch call for rs and returns the reader of its answer.
func (l *Ledger) queueReserve(b *pgx.Batch, batch []*reserveCall, ids, qids []int64) func(pgx.BatchResults) error {
	if len(batch) == 0 {
		return func(pgx.BatchResults) error { return nil }
	}
	now := l.db.now()
	var in insertColumns
	sent := make([]*reserveCall, 0, len(batch))
	first := make(map[string]*reserveCall, len(batch))
	var dups []*reserveCall
	for _, c := range batch {
		if _, seen := first[c.req.RequestID]; seen {
			dups = append(dups, c) // answered from the first one's outcome below
			continue
		}
		first[c.req.RequestID] = c
		sent = append(sent, c)
		in.add(c)
	}
	batch = sent
	b.Queue(`SELECT idx, outcome, full_bid, remaining, capped, status FROM reserve_batch($18::bigint[],
			$1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::bigint[],
			$9::bigint[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::bigint[],
			$16::timestamptz[], $17::timestamptz, $19::bigint[], $20::text[], $21::text[], $22::text[])`,
		in.requestIDs, in.orgIDs, in.keyIDs, in.periods, in.currencies, in.amounts, in.budgetIDs, in.globalIDs,
		in.globalAmounts, in.models, in.providers, in.upstreamModels, in.fx, in.estInput, in.maxOutput,
		in.deadlines, now, ids, qids, in.quotaIDs, in.quotaAmounts, in.quotaCaps)
	return func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("reserve batch: %w", err)
		}
		defer rows.Close()
		answered := 0
		for rows.Next() {
			var idx int
			var outcome string
			var fullBID, remaining *int64
			var capped bool
			var status *string
			if err := rows.Scan(&idx, &outcome, &fullBID, &remaining, &capped, &status); err != nil {
				return fmt.Errorf("reserve batch: %w", err)
			}
			if idx < 1 || idx > len(batch) {
				return fmt.Errorf("reserve batch: answer for request %d of %d", idx, len(batch))
			}
			c := batch[idx-1]
			switch outcome {
			case "admitted":
				c.res = app.ReserveResult{Admitted: true, Reservation: c.reservation(now), HasRemaining: capped}
				if remaining != nil {
					c.res.Remaining = *remaining
				}
			case "full":
				c.res = app.ReserveResult{FullNode: c.nodeOf(fullBID)}
			case "quota":
				q, ok := c.quotaOf(fullBID)
				if !ok {
					return fmt.Errorf("reserve batch: full quota row %v is not among the request's", fullBID)
				}
				c.res = app.ReserveResult{FullQuota: &q}
			case "duplicate":
				st := app.StatusPending
				if status != nil {
					st = app.ReservationStatus(*status)
				}
				c.res = app.ReserveResult{Duplicate: true, Admitted: st == app.StatusPending || st == app.StatusCommitted,
					Reservation: app.Reservation{RequestID: c.req.RequestID, Status: st}}
			default:
				return fmt.Errorf("reserve batch: unknown outcome %q", outcome)
			}
			answered++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reserve batch: %w", err)
		}
		if answered != len(batch) {
			return fmt.Errorf("reserve batch: %d answers for %d requests", answered, len(batch))
		}
		// The same id twice in one batch: the second is what a retry arriving later would
		// be, a duplicate of the row the first one wrote, or refused as the first one was.
		for _, d := range dups {
			d.res = first[d.req.RequestID].res
			if d.res.Admitted {
				d.res = app.ReserveResult{Duplicate: true, Admitted: true,
					Reservation: app.Reservation{RequestID: d.req.RequestID, Status: app.StatusPending}}
			}
		}
		return nil
	}
}

// reservation is the ledger row an admitted call wrote.
func (c *reserveCall) reservation(now time.Time) app.Reservation {
	r := app.Reservation{
		RequestID: c.req.RequestID, OrgID: c.req.OrgID, KeyID: c.req.KeyID, Period: c.req.Period,
		Status: app.StatusPending, Currency: c.req.Currency, Amount: c.req.Amount, BudgetIDs: c.ids,
		GlobalAmount: c.req.GlobalAmount, Model: c.req.Model, Provider: c.req.Provider,
		UpstreamModel: c.req.UpstreamModel, USDJPY: c.req.USDJPY, EstInputTokens: c.req.EstInputTokens,
		MaxOutputTokens: c.req.MaxOutputTokens, Deadline: c.req.Deadline.UTC(), CreatedAt: now, QuotaIDs: c.qids,
	}
	if c.gid != 0 {
		gid := c.gid
		r.GlobalBudgetID = &gid
	}
	return r
}

// quotaOf returns the claim of quota window row qid among the call's windows.
func (c *reserveCall) quotaOf(qid *int64) (app.QuotaClaim, bool) {
	if qid != nil {
		for i, id := range c.qids {
			if id == *qid {
				return c.req.Quotas[i], true
			}
		}
	}
	return app.QuotaClaim{}, false
}

// sortedIDs returns the set's ids in ascending order (the lock order).
func sortedIDs(set map[int64]struct{}) []int64 {
	out := make([]int64, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// nodeOf names the node of budget row bid among the call's rows.
func (c *reserveCall) nodeOf(bid *int64) app.Node {
	if bid != nil {
		for i, id := range c.ids {
			if id == *bid {
				return c.req.Nodes[i]
			}
		}
	}
	return app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}
}

type insertColumns struct {
	requestIDs, orgIDs, keyIDs, periods, currencies []string
	amounts                                         []int64
	budgetIDs                                       []string
	globalIDs, globalAmounts                        []int64
	models, providers, upstreamModels               []string
	fx, estInput, maxOutput                         []int64
	deadlines                                       []time.Time
	quotaIDs, quotaAmounts, quotaCaps               []string
}

func (c *insertColumns) add(rc *reserveCall) {
	r := &rc.req
	c.requestIDs = append(c.requestIDs, r.RequestID)
	c.orgIDs = append(c.orgIDs, r.OrgID)
	c.keyIDs = append(c.keyIDs, r.KeyID)
	c.periods = append(c.periods, r.Period)
	c.currencies = append(c.currencies, r.Currency)
	c.amounts = append(c.amounts, r.Amount)
	c.budgetIDs = append(c.budgetIDs, int64sLiteral(rc.ids))
	c.globalIDs = append(c.globalIDs, rc.gid)
	c.globalAmounts = append(c.globalAmounts, r.GlobalAmount)
	c.models = append(c.models, r.Model)
	c.providers = append(c.providers, r.Provider)
	c.upstreamModels = append(c.upstreamModels, r.UpstreamModel)
	c.fx = append(c.fx, r.USDJPY)
	c.estInput = append(c.estInput, r.EstInputTokens)
	c.maxOutput = append(c.maxOutput, r.MaxOutputTokens)
	c.deadlines = append(c.deadlines, r.Deadline.UTC())
	amounts, caps := make([]int64, len(r.Quotas)), make([]int64, len(r.Quotas))
	for i, q := range r.Quotas {
		amounts[i], caps[i] = q.Amount, q.Limit
	}
	c.quotaIDs = append(c.quotaIDs, int64sLiteral(rc.qids))
	c.quotaAmounts = append(c.quotaAmounts, int64sLiteral(amounts))
	c.quotaCaps = append(c.quotaCaps, int64sLiteral(caps))
}

const reservationCols = `request_id, org_id::text, key_id::text, period, status, currency, amount, actual,
	budget_ids, global_budget_id, global_amount, global_actual, overrun, model, provider, upstream_model,
	usd_jpy, est_input_tokens, max_output_tokens, input_tokens, cached_tokens, output_tokens, usage_source,
	deadline, created_at, settled_at, quota_ids, error_class, error_code`

func scanReservation(row pgx.CollectableRow) (app.Reservation, error) {
	var r app.Reservation
	var status string
	err := row.Scan(&r.RequestID, &r.OrgID, &r.KeyID, &r.Period, &status, &r.Currency, &r.Amount, &r.Actual,
		&r.BudgetIDs, &r.GlobalBudgetID, &r.GlobalAmount, &r.GlobalActual, &r.Overrun, &r.Model, &r.Provider,
		&r.UpstreamModel, &r.USDJPY, &r.EstInputTokens, &r.MaxOutputTokens, &r.InputTokens, &r.CachedTokens,
		&r.OutputTokens, &r.UsageSource, &r.Deadline, &r.CreatedAt, &r.SettledAt, &r.QuotaIDs, &r.ErrorClass, &r.ErrorCode)
	r.Status = app.ReservationStatus(status)
	return r, err
}
