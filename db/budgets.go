package db

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// budgetKey identifies a budget row before its id is known.
type budgetKey struct {
	kind   app.NodeKind
	id     string
	period string
}

// budgetIDs returns the row ids of the given nodes' budgets for period (all in currency),
// creating missing rows from the nodes' standing caps. Ids are cached: a row, once created,
// is never deleted.
func (l *Ledger) budgetIDs(ctx context.Context, orgID, period, currency string, nodes []app.Node) ([]int64, error) {
	for attempt := 0; ; attempt++ {
		ids, retry, err := l.ensureBudgets(ctx, orgID, period, currency, nodes)
		if !retry || attempt == 3 {
			if retry {
				err = fmt.Errorf("ensure budget rows: rows not visible after %d attempts", attempt+1)
			}
			return ids, err
		}
	}
}

// ensureBudgets is one attempt of budgetIDs; retry is true when a row created concurrently by
// another transaction was not yet visible to this statement.
func (l *Ledger) ensureBudgets(ctx context.Context, orgID, period, currency string, nodes []app.Node) (ids []int64, retry bool, err error) {
	ids = make([]int64, len(nodes))
	var missKinds, missIDs []string
	var missIdx []int
	for i, n := range nodes {
		if v, ok := l.ids.Load(budgetKey{n.Kind, n.ID, period}); ok {
			ids[i] = v.(int64)
			continue
		}
		missKinds = append(missKinds, string(n.Kind))
		missIDs = append(missIDs, n.ID)
		missIdx = append(missIdx, i)
	}
	if len(missIdx) == 0 {
		return ids, false, nil
	}
	var org any
	if orgID != "" {
		org = orgID
	}
	rows, err := l.db.Pool.Query(ctx, `WITH want AS (
			SELECT k, i::uuid AS i, ord FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(k, i, ord)),
		ins AS (
			INSERT INTO budgets (node_kind, node_id, org_id, period, currency, cap, thresholds)
			SELECT w.k, w.i, $3::uuid, $4, $5, c.cap, coalesce(c.thresholds, $6::int[]) FROM want w
			LEFT JOIN budget_caps c ON c.node_kind = w.k AND c.node_id = w.i
			ORDER BY w.k, w.i
			ON CONFLICT (node_kind, node_id, period) DO NOTHING
			RETURNING id, node_kind, node_id)
		SELECT w.ord, coalesce(ins.id, b.id) FROM want w
		LEFT JOIN ins ON ins.node_kind = w.k AND ins.node_id = w.i
		LEFT JOIN budgets b ON b.node_kind = w.k AND b.node_id = w.i AND b.period = $4`,
		missKinds, missIDs, org, period, currency, app.DefaultThresholds)
	if err != nil {
		return nil, false, fmt.Errorf("ensure budget rows: %w", FormatError(err))
	}
	found := 0
	for rows.Next() {
		var ord int
		var id *int64
		if err := rows.Scan(&ord, &id); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("scan budget id: %w", FormatError(err))
		}
		if id == nil {
			continue // created concurrently by another transaction not yet visible: retried below
		}
		i := missIdx[ord-1]
		ids[i] = *id
		l.ids.Store(budgetKey{nodes[i].Kind, nodes[i].ID, period}, *id)
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("ensure budget rows: %w", FormatError(err))
	}
	// ON CONFLICT DO NOTHING may have waited for a concurrent insert whose row this statement's
	// snapshot cannot see; a second statement does.
	return ids, found < len(missIdx), nil
}

// NodeOwner returns the org of a budget node (the zero Org for the global node), checking the
// node exists. It returns ENOTFOUND for an unknown node and EINVALID for an unknown kind.
func (db *DB) NodeOwner(ctx context.Context, n app.Node) (app.Org, error) {
	if !app.ValidNodeKind(n.Kind) {
		return app.Org{}, app.Errorf(app.EINVALID, "unknown budget kind %q (want global, org, team, member or key)", n.Kind)
	}
	if n.Kind == app.NodeGlobal {
		return app.Org{}, nil
	}
	if uuid.Validate(n.ID) != nil {
		return app.Org{}, app.Errorf(app.ENOTFOUND, "%s %q not found", n.Kind, n.ID)
	}
	var q string
	switch n.Kind {
	case app.NodeOrg:
		q = `SELECT id FROM orgs WHERE id = $1`
	case app.NodeTeam:
		q = `SELECT org_id FROM teams WHERE id = $1`
	case app.NodeMember:
		q = `SELECT org_id FROM members WHERE id = $1`
	case app.NodeKey:
		q = `SELECT org_id FROM api_keys WHERE id = $1`
	}
	var orgID string
	err := db.Pool.QueryRow(ctx, q, n.ID).Scan(&orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Org{}, app.Errorf(app.ENOTFOUND, "%s %q not found", n.Kind, n.ID)
	}
	if err != nil {
		return app.Org{}, fmt.Errorf("find budget node: %w", FormatError(err))
	}
	return db.Org(ctx, orgID)
}

// nodePeriod returns the current period and currency of a node's budget rows.
func (l *Ledger) nodePeriod(org app.Org, n app.Node, now time.Time) (period, currency string, err error) {
	if n.Kind == app.NodeGlobal {
		return app.Period(now, l.cfg.GlobalLocation), l.cfg.GlobalCurrency, nil
	}
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return "", "", fmt.Errorf("load org time zone: %w", err)
	}
	return app.Period(now, loc), org.Currency, nil
}

// openPeriod returns a node's current period (and the time it was read at), creating the
// node's budget row for it if needed. ENOTFOUND for an unknown node.
func (l *Ledger) openPeriod(ctx context.Context, n app.Node) (string, time.Time, error) {
	org, err := l.db.NodeOwner(ctx, n)
	if err != nil {
		return "", time.Time{}, err
	}
	now := l.db.Now()
	period, currency, err := l.nodePeriod(org, n, now)
	if err != nil {
		return "", time.Time{}, err
	}
	if _, err := l.budgetIDs(ctx, org.ID, period, currency, []app.Node{n}); err != nil {
		return "", time.Time{}, err
	}
	return period, now, nil
}

// SetCap sets a node's standing cap (nil removes it) and applies it to the node's current and
// later periods. Lowering a cap below what is already spent is allowed: the node then refuses
// every new reservation. ENOTFOUND for an unknown node.
func (l *Ledger) SetCap(ctx context.Context, n app.Node, cap *int64) (app.Budget, error) {
	period, now, err := l.openPeriod(ctx, n)
	if err != nil {
		return app.Budget{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO budget_caps (node_kind, node_id, cap, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (node_kind, node_id) DO UPDATE SET cap = excluded.cap, updated_at = excluded.updated_at`,
		n.Kind, n.ID, cap, now.UTC())
	b.Queue(`UPDATE budgets SET cap = $3 WHERE node_kind = $1 AND node_id = $2 AND period >= $4`, n.Kind, n.ID, cap, period)
	if err := l.db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return app.Budget{}, fmt.Errorf("set cap: %w", FormatError(err))
	}
	return l.budget(ctx, n, period)
}

// SetThresholds sets a node's alert thresholds (percent of the cap; nil restores the defaults,
// app.DefaultThresholds) and applies them to the node's current and later periods. Thresholds
// already alerted in a period stay alerted; a new threshold the node is already past alerts at
// once, in this transaction. EINVALID for a bad threshold, ENOTFOUND for an unknown node.
func (l *Ledger) SetThresholds(ctx context.Context, n app.Node, thresholds []int) (app.Budget, error) {
	stored := thresholds
	if thresholds != nil {
		var err error
		if stored, err = app.NormalizeThresholds(thresholds); err != nil {
			return app.Budget{}, err
		}
	}
	effective := stored
	if effective == nil {
		effective = app.DefaultThresholds
	}
	period, now, err := l.openPeriod(ctx, n)
	if err != nil {
		return app.Budget{}, err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO budget_caps (node_kind, node_id, cap, thresholds, updated_at)
		SELECT $1::text, $2::uuid, cap, $3::int[], $4::timestamptz FROM budgets WHERE node_kind = $1 AND node_id = $2 AND period = $5
		ON CONFLICT (node_kind, node_id) DO UPDATE SET thresholds = excluded.thresholds, updated_at = excluded.updated_at`,
		n.Kind, n.ID, stored, now.UTC(), period)
	b.Queue(`UPDATE budgets SET thresholds = $3 WHERE node_kind = $1 AND node_id = $2 AND period >= $4`, n.Kind, n.ID, effective, period)
	if err := l.db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return app.Budget{}, fmt.Errorf("set thresholds: %w", FormatError(err))
	}
	return l.budget(ctx, n, period)
}

// Budget returns a node's budget for its current period (creating the row if needed).
// ENOTFOUND for an unknown node.
func (l *Ledger) Budget(ctx context.Context, n app.Node) (app.Budget, error) {
	period, _, err := l.openPeriod(ctx, n)
	if err != nil {
		return app.Budget{}, err
	}
	return l.budget(ctx, n, period)
}

func (l *Ledger) budget(ctx context.Context, n app.Node, period string) (app.Budget, error) {
	var b app.Budget
	var kind string
	err := l.db.Pool.QueryRow(ctx, `SELECT id, node_kind, node_id, period, currency, cap, reserved, spent,
			thresholds, last_alert_threshold
		FROM budgets WHERE node_kind = $1 AND node_id = $2 AND period = $3`, n.Kind, n.ID, period).
		Scan(&b.ID, &kind, &b.Node.ID, &b.Period, &b.Currency, &b.Cap, &b.Reserved, &b.Spent, &b.Thresholds, &b.LastAlert)
	if err != nil {
		return app.Budget{}, fmt.Errorf("select budget: %w", FormatError(err))
	}
	b.Node.Kind = app.NodeKind(kind)
	return b, nil
}

// int64sLiteral renders ids as a PostgreSQL array literal, so that arrays of arrays can travel
// as text[] and be cast back per row.
func int64sLiteral(ids []int64) string {
	buf := make([]byte, 0, 8*len(ids)+2)
	buf = append(buf, '{')
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, id, 10)
	}
	return string(append(buf, '}'))
}
