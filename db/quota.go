package db

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// quotaKey identifies a quota window row before its id is known.
type quotaKey struct {
	provider, model string
	kind            app.QuotaKind
	start           int64 // unix seconds
}

// quotaIDCache remembers window row ids; a window that ended is dropped when the cache grows.
type quotaIDCache struct {
	mu  sync.Mutex
	ids map[quotaKey]quotaID
}

type quotaID struct {
	id  int64
	end time.Time
}

func (c *quotaIDCache) get(k quotaKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.ids[k]
	return v.id, ok
}

func (c *quotaIDCache) put(k quotaKey, id int64, end, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = make(map[quotaKey]quotaID)
	}
	if len(c.ids) >= 4096 {
		for key, v := range c.ids {
			if !v.end.After(now) {
				delete(c.ids, key)
			}
		}
	}
	c.ids[k] = quotaID{id, end}
}

// quotaIDs returns the row ids of the windows claimed, creating the missing rows.
func (l *Ledger) quotaIDs(ctx context.Context, claims []app.QuotaClaim) ([]int64, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(claims))
	var miss []int
	for i, q := range claims {
		if id, ok := l.qids.get(quotaKey{q.Provider, q.Model, q.Kind, q.Start.Unix()}); ok {
			ids[i] = id
		} else {
			miss = append(miss, i)
		}
	}
	for attempt := 0; len(miss) > 0; attempt++ {
		if attempt == 4 {
			return nil, fmt.Errorf("ensure quota windows: rows not visible after %d attempts", attempt)
		}
		var provs, models, kinds []string
		var starts, ends []time.Time
		for _, i := range miss {
			q := claims[i]
			provs, models, kinds = append(provs, q.Provider), append(models, q.Model), append(kinds, string(q.Kind))
			starts, ends = append(starts, q.Start.UTC()), append(ends, q.End.UTC())
		}
		rows, _ := l.db.Pool.Query(ctx, `WITH want AS (
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
					WITH ORDINALITY AS w(p, m, k, s, e, ord)),
			ins AS (
				INSERT INTO quota_windows (provider, model, kind, window_start, window_end)
				SELECT p, m, k, s, e FROM want ORDER BY p, m, k, s
				ON CONFLICT (provider, model, kind, window_start) DO NOTHING
				RETURNING id, provider, model, kind, window_start)
			SELECT w.ord, coalesce(ins.id, q.id) FROM want w
			LEFT JOIN ins ON ins.provider = w.p AND ins.model = w.m AND ins.kind = w.k AND ins.window_start = w.s
			LEFT JOIN quota_windows q ON q.provider = w.p AND q.model = w.m AND q.kind = w.k AND q.window_start = w.s`,
			provs, models, kinds, starts, ends)
		type found struct {
			Ord int
			ID  *int64
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[found])
		if err != nil {
			return nil, fmt.Errorf("ensure quota windows: %w", FormatError(err))
		}
		var still []int
		seen := make(map[int]bool, len(got))
		for _, f := range got {
			if f.Ord < 1 || f.Ord > len(miss) {
				return nil, fmt.Errorf("ensure quota windows: answer for window %d of %d", f.Ord, len(miss))
			}
			i := miss[f.Ord-1]
			seen[i] = true
			if f.ID == nil {
				// Created concurrently by a transaction this statement's snapshot cannot
				// see: the next statement does.
				still = append(still, i)
				continue
			}
			ids[i] = *f.ID
			q := claims[i]
			l.qids.put(quotaKey{q.Provider, q.Model, q.Kind, q.Start.Unix()}, *f.ID, q.End, l.db.Now())
		}
		if len(seen) != len(miss) {
			return nil, fmt.Errorf("ensure quota windows: %d answers for %d windows", len(seen), len(miss))
		}
		miss = still
	}
	return ids, nil
}

// QuotaWindow is one provider quota window as the status page shows it.
type QuotaWindow struct {
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Kind     app.QuotaKind `json:"kind"`
	Start    time.Time     `json:"window_start"`
	End      time.Time     `json:"window_end"`
	Reserved int64         `json:"reserved"`
	Used     int64         `json:"used"`
}

// QuotaWindows lists the windows open at now (those with any use), by provider, model and
// kind.
func (db *DB) QuotaWindows(ctx context.Context, now time.Time) ([]QuotaWindow, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT provider, model, kind, window_start, window_end, reserved, used
		FROM quota_windows WHERE window_start <= $1 AND window_end > $1
		ORDER BY provider, model, kind`, now.UTC())
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (QuotaWindow, error) {
		var w QuotaWindow
		var kind string
		err := row.Scan(&w.Provider, &w.Model, &kind, &w.Start, &w.End, &w.Reserved, &w.Used)
		w.Kind = app.QuotaKind(kind)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list quota windows: %w", FormatError(err))
	}
	return ws, nil
}

// PruneQuotaWindows deletes windows that ended before cutoff and hold no reservation, and
// returns how many it deleted. Their history is in the ledger rows.
func (db *DB) PruneQuotaWindows(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM quota_windows WHERE window_end < $1 AND reserved = 0`, cutoff.UTC())
	if err != nil {
		return 0, fmt.Errorf("prune quota windows: %w", FormatError(err))
	}
	return tag.RowsAffected(), nil
}

// Room returns the room a request's budget nodes have left: the least of its capped
// org-currency nodes and its global node, each math.MaxInt64 when uncapped. It reads without
// locking: a reservation made from it is still admitted only if it fits.
func (l *Ledger) Room(ctx context.Context, req app.ReserveRequest) (room, globalRoom int64, err error) {
	ids, err := l.budgetIDs(ctx, req.OrgID, req.Period, req.Currency, req.Nodes)
	if err != nil {
		return 0, 0, fmt.Errorf("budget room: %w", err)
	}
	var gid int64
	if req.GlobalPeriod != "" {
		gids, err := l.budgetIDs(ctx, "", req.GlobalPeriod, req.GlobalCurrency, []app.Node{{Kind: app.NodeGlobal, ID: app.GlobalNodeID}})
		if err != nil {
			return 0, 0, fmt.Errorf("budget room: %w", err)
		}
		gid = gids[0]
	}
	err = l.db.Pool.QueryRow(ctx, `SELECT
			coalesce(min(cap - reserved - spent) FILTER (WHERE id = ANY ($1) AND cap IS NOT NULL), $3),
			coalesce(min(cap - reserved - spent) FILTER (WHERE id = $2 AND cap IS NOT NULL), $3)
		FROM budgets WHERE id = ANY ($1) OR id = $2`, ids, gid, int64(math.MaxInt64)).Scan(&room, &globalRoom)
	if err != nil {
		return 0, 0, fmt.Errorf("budget room: %w", FormatError(err))
	}
	return room, globalRoom, nil
}
