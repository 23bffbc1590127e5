package db

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
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

// Ledger is the reservation engine (DESIGN.md section 5). Reserve and Settle calls are
// batched per process: a single loop per kind takes every call that arrived while the previous
// batch transaction was in flight, so under load many requests share one lock acquisition and
// one WAL flush, while a lone request pays no added wait. Per-request semantics do not change:
// every request has its own ledger row, request_id and apply nonce.
type Ledger struct {
	db  *DB
	cfg LedgerConfig
	ids sync.Map // budgetKey -> int64

	reserveCh chan *reserveCall
	settleCh  chan *settleCall
	stop      chan struct{}
	wg        sync.WaitGroup
}

type reserveCall struct {
	req   app.ReserveRequest
	ids   []int64 // org-currency budget rows, same order as req.Nodes
	gid   int64   // global budget row, 0 when none
	ctx   context.Context
	res   app.ReserveResult
	err   error
	ready chan struct{}
}

type settleCall struct {
	s     app.Settlement
	ids   []int64
	ctx   context.Context
	out   app.SettleOutcome
	err   error
	ready chan struct{}
}

// NewLedger starts the ledger's batch loops; Close stops them.
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
	}
	l.wg.Add(2)
	go l.loop(func(batch []*reserveCall) { l.reserveBatch(batch) }, l.reserveCh)
	go l.settleLoop()
	return l
}

// Close stops the batch loops after the batches in flight.
func (l *Ledger) Close() {
	close(l.stop)
	l.wg.Wait()
}

func (l *Ledger) loop(run func([]*reserveCall), ch chan *reserveCall) {
	defer l.wg.Done()
	batch := make([]*reserveCall, 0, l.cfg.MaxBatch)
	for {
		select {
		case <-l.stop:
			return
		case c := <-ch:
			batch = append(batch[:0], c)
		}
	drain:
		for len(batch) < l.cfg.MaxBatch {
			select {
			case c := <-ch:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		run(batch)
	}
}

func (l *Ledger) settleLoop() {
	defer l.wg.Done()
	batch := make([]*settleCall, 0, l.cfg.MaxBatch)
	for {
		select {
		case <-l.stop:
			return
		case c := <-l.settleCh:
			batch = append(batch[:0], c)
		}
	drain:
		for len(batch) < l.cfg.MaxBatch {
			select {
			case c := <-l.settleCh:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		l.settleBatch(batch)
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
	c := &reserveCall{req: req, ids: ids, ctx: ctx, ready: make(chan struct{})}
	if req.GlobalPeriod != "" {
		gids, err := l.budgetIDs(ctx, "", req.GlobalPeriod, req.GlobalCurrency, []app.Node{{Kind: app.NodeGlobal, ID: app.GlobalNodeID}})
		if err != nil {
			return app.ReserveResult{}, fmt.Errorf("reserve: %w", err)
		}
		c.gid = gids[0]
	}
	select {
	case l.reserveCh <- c:
	case <-ctx.Done():
		return app.ReserveResult{}, app.WrapError(app.EUNAVAILABLE, ctx.Err(), "the budget ledger is busy")
	}
	// Once queued, the call is answered even if ctx ends: the batch owns it now, and a
	// reservation made for a caller that left is released by that caller's settle path or the
	// sweeper.
	<-c.ready
	return c.res, c.err
}

type lockedBudget struct {
	cap      *int64
	reserved int64
	spent    int64
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

func (l *Ledger) reserveBatch(batch []*reserveCall) {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		if err = l.reserveTx(batch); err == nil || !retryable(err) {
			break
		}
	}
	for _, c := range batch {
		if err != nil {
			c.res, c.err = app.ReserveResult{}, fmt.Errorf("reserve: %w", FormatError(err))
		}
		close(c.ready)
	}
}

// reserveTx runs one batch in one transaction, in two round trips: lock the union of the
// batch's budget rows in id order (the one global lock order, so no deadlocks across processes)
// and read which request ids already exist; then admit in arrival order, insert the admitted
// rows and add each row's amount to its budgets, guarded by the insert (rows that already
// existed move no money), and commit.
func (l *Ledger) reserveTx(batch []*reserveCall) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	idSet := make(map[int64]struct{}, 8)
	reqIDs := make([]string, 0, len(batch))
	for _, c := range batch {
		for _, id := range c.ids {
			idSet[id] = struct{}{}
		}
		if c.gid != 0 {
			idSet[c.gid] = struct{}{}
		}
		reqIDs = append(reqIDs, c.req.RequestID)
	}
	all := make([]int64, 0, len(idSet))
	for id := range idSet {
		all = append(all, id)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })

	conn, err := l.db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// BEGIN travels in the first round trip and COMMIT in the second: two round trips per
	// batch, the row locks held for one of them plus the commit's WAL flush.
	tx := conn.Conn()
	committed := false
	defer func() {
		if !committed && !tx.PgConn().IsClosed() {
			if _, err := tx.Exec(context.Background(), "ROLLBACK"); err != nil {
				tx.Close(context.Background()) //nolint:errcheck // the pool discards a closed conn
			}
		}
	}()

	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT id, cap, reserved, spent FROM budgets WHERE id = ANY($1) ORDER BY id FOR UPDATE`, all)
	b.Queue(`SELECT `+reservationCols+` FROM reservations WHERE request_id = ANY($1)`, reqIDs)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("begin: %w", err)
	}
	locked := make(map[int64]*lockedBudget, len(all))
	rows, _ := br.Query()
	for rows.Next() {
		var id int64
		lb := &lockedBudget{}
		if err := rows.Scan(&id, &lb.cap, &lb.reserved, &lb.spent); err != nil {
			rows.Close()
			br.Close()
			return fmt.Errorf("lock budgets: %w", err)
		}
		locked[id] = lb
	}
	if err := rows.Err(); err != nil {
		br.Close()
		return fmt.Errorf("lock budgets: %w", err)
	}
	rows, _ = br.Query()
	existing, err := pgx.CollectRows(rows, scanReservation)
	if err != nil {
		br.Close()
		return fmt.Errorf("read existing reservations: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("lock budgets: %w", err)
	}
	if len(locked) != len(all) {
		return fmt.Errorf("lock budgets: %d of %d rows found", len(locked), len(all))
	}
	byID := make(map[string]*app.Reservation, len(existing))
	for i := range existing {
		byID[existing[i].RequestID] = &existing[i]
	}

	now := l.db.Now().UTC()
	var ins insertColumns
	admitted := make(map[string]*reserveCall, len(batch))
	for _, c := range batch {
		if r, ok := byID[c.req.RequestID]; ok {
			c.res = app.ReserveResult{Duplicate: true, Admitted: r.Status == app.StatusPending || r.Status == app.StatusCommitted, Reservation: *r}
			continue
		}
		if _, dup := admitted[c.req.RequestID]; dup {
			// The same request id twice in one batch: the first one wins, like a retry would.
			c.res = app.ReserveResult{Duplicate: true, Admitted: true}
			continue
		}
		full := -1
		for i, id := range c.ids {
			if !fits(locked[id], c.req.Amount) {
				full = i
				break
			}
		}
		if full < 0 && c.gid != 0 && !fits(locked[c.gid], c.req.GlobalAmount) {
			full = len(c.ids)
		}
		if full >= 0 {
			node := app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}
			if full < len(c.ids) {
				node = c.req.Nodes[full]
			}
			c.res = app.ReserveResult{FullNode: node}
			continue
		}
		for _, id := range c.ids {
			locked[id].reserved += c.req.Amount
		}
		if c.gid != 0 {
			locked[c.gid].reserved += c.req.GlobalAmount
		}
		admitted[c.req.RequestID] = c
		r := app.Reservation{
			RequestID: c.req.RequestID, OrgID: c.req.OrgID, KeyID: c.req.KeyID, Period: c.req.Period,
			Status: app.StatusPending, Currency: c.req.Currency, Amount: c.req.Amount, BudgetIDs: c.ids,
			GlobalAmount: c.req.GlobalAmount, Model: c.req.Model, Provider: c.req.Provider,
			UpstreamModel: c.req.UpstreamModel, USDJPY: c.req.USDJPY, EstInputTokens: c.req.EstInputTokens,
			MaxOutputTokens: c.req.MaxOutputTokens, Deadline: c.req.Deadline.UTC(), CreatedAt: now,
		}
		if c.gid != 0 {
			gid := c.gid
			r.GlobalBudgetID = &gid
		}
		c.res = app.ReserveResult{Admitted: true, Reservation: r}
		ins.add(r)
	}
	for _, c := range admitted {
		c.res.Remaining, c.res.HasRemaining = tightest(locked, c.ids)
	}

	b = &pgx.Batch{}
	if len(ins.requestIDs) > 0 {
		// The nonce guard of DESIGN.md section 5: money moves only for the rows this
		// statement inserted (ON CONFLICT skips a concurrent duplicate), each carrying the
		// apply_nonce just written.
		b.Queue(`WITH ins AS (
				INSERT INTO reservations (request_id, org_id, key_id, period, status, currency, amount,
					budget_ids, global_budget_id, global_amount, apply_nonce, model, provider, upstream_model,
					usd_jpy, est_input_tokens, max_output_tokens, deadline, created_at)
				SELECT r, o::uuid, k::uuid, p, 'pending', cur, amt, bids::bigint[], nullif(gid, 0), gamt, n::uuid,
					m, prov, um, fx, eit, mot, dl, $18
				FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
					$7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[],
					$14::bigint[], $15::bigint[], $16::bigint[], $17::timestamptz[])
					AS u(r, o, k, p, cur, amt, bids, gid, gamt, n, m, prov, um, fx, eit, mot, dl)
				ON CONFLICT (request_id) DO NOTHING
				RETURNING request_id, budget_ids, amount, global_budget_id, global_amount),
			mv AS (
				SELECT bid, sum(amt) AS amt FROM (
					SELECT unnest(budget_ids) AS bid, amount AS amt FROM ins
					UNION ALL
					SELECT global_budget_id, global_amount FROM ins WHERE global_budget_id IS NOT NULL) x
				GROUP BY bid),
			upd AS (
				UPDATE budgets b SET reserved = b.reserved + mv.amt FROM mv WHERE b.id = mv.bid RETURNING b.id)
			SELECT request_id FROM ins`,
			ins.requestIDs, ins.orgIDs, ins.keyIDs, ins.periods, ins.currencies, ins.amounts,
			ins.budgetIDs, ins.globalIDs, ins.globalAmounts, ins.nonces, ins.models, ins.providers,
			ins.upstreamModels, ins.fx, ins.estInput, ins.maxOutput, ins.deadlines, now)
	}
	b.Queue(`COMMIT`)
	br = tx.SendBatch(ctx, b)
	if len(ins.requestIDs) > 0 {
		rows, _ := br.Query()
		inserted := make(map[string]bool, len(ins.requestIDs))
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				br.Close()
				return fmt.Errorf("insert reservations: %w", err)
			}
			inserted[id] = true
		}
		if err := rows.Err(); err != nil {
			br.Close()
			return fmt.Errorf("insert reservations: %w", err)
		}
		for id, c := range admitted {
			if !inserted[id] {
				// A concurrent reserve with the same id (another process) won the insert.
				c.res = app.ReserveResult{Duplicate: true, Admitted: true}
			}
		}
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("commit reservations: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("commit reservations: %w", err)
	}
	committed = true
	return nil
}

// fits reports whether amount still fits on b, written so that no sum can overflow: an
// absurd amount must be refused, not wrap around into a small one.
func fits(b *lockedBudget, amount int64) bool {
	if b.cap == nil {
		return amount <= math.MaxInt64/2-b.reserved-b.spent
	}
	return amount <= *b.cap-b.reserved-b.spent
}

// tightest returns the least room left among the capped rows of ids.
func tightest(locked map[int64]*lockedBudget, ids []int64) (int64, bool) {
	var best int64
	found := false
	for _, id := range ids {
		b := locked[id]
		if b.cap == nil {
			continue
		}
		room := *b.cap - b.reserved - b.spent
		if !found || room < best {
			best, found = room, true
		}
	}
	return best, found
}

type insertColumns struct {
	requestIDs, orgIDs, keyIDs, periods, currencies []string
	amounts                                         []int64
	budgetIDs                                       []string
	globalIDs, globalAmounts                        []int64
	nonces, models, providers, upstreamModels       []string
	fx, estInput, maxOutput                         []int64
	deadlines                                       []time.Time
}

func (c *insertColumns) add(r app.Reservation) {
	c.requestIDs = append(c.requestIDs, r.RequestID)
	c.orgIDs = append(c.orgIDs, r.OrgID)
	c.keyIDs = append(c.keyIDs, r.KeyID)
	c.periods = append(c.periods, r.Period)
	c.currencies = append(c.currencies, r.Currency)
	c.amounts = append(c.amounts, r.Amount)
	c.budgetIDs = append(c.budgetIDs, int64sLiteral(r.BudgetIDs))
	var gid int64
	if r.GlobalBudgetID != nil {
		gid = *r.GlobalBudgetID
	}
	c.globalIDs = append(c.globalIDs, gid)
	c.globalAmounts = append(c.globalAmounts, r.GlobalAmount)
	c.nonces = append(c.nonces, uuid.NewString())
	c.models = append(c.models, r.Model)
	c.providers = append(c.providers, r.Provider)
	c.upstreamModels = append(c.upstreamModels, r.UpstreamModel)
	c.fx = append(c.fx, r.USDJPY)
	c.estInput = append(c.estInput, r.EstInputTokens)
	c.maxOutput = append(c.maxOutput, r.MaxOutputTokens)
	c.deadlines = append(c.deadlines, r.Deadline)
}

const reservationCols = `request_id, org_id::text, key_id::text, period, status, currency, amount, actual,
	budget_ids, global_budget_id, global_amount, global_actual, overrun, model, provider, upstream_model,
	usd_jpy, est_input_tokens, max_output_tokens, input_tokens, cached_tokens, output_tokens, usage_source,
	deadline, created_at, settled_at`

func scanReservation(row pgx.CollectableRow) (app.Reservation, error) {
	var r app.Reservation
	var status string
	err := row.Scan(&r.RequestID, &r.OrgID, &r.KeyID, &r.Period, &status, &r.Currency, &r.Amount, &r.Actual,
		&r.BudgetIDs, &r.GlobalBudgetID, &r.GlobalAmount, &r.GlobalActual, &r.Overrun, &r.Model, &r.Provider,
		&r.UpstreamModel, &r.USDJPY, &r.EstInputTokens, &r.MaxOutputTokens, &r.InputTokens, &r.CachedTokens,
		&r.OutputTokens, &r.UsageSource, &r.Deadline, &r.CreatedAt, &r.SettledAt)
	r.Status = app.ReservationStatus(status)
	return r, err
}
