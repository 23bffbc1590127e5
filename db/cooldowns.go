package db

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Cooldowns is the provider cooldown store: rows in PostgreSQL shared by every gateway
// process, read through a small in-process cache (refreshed at most every RefreshEvery) so
// the hot path does not query for each request. A cooldown this process records is in its
// cache at once; one recorded by another process shows within RefreshEvery.
type Cooldowns struct {
	DB           *DB
	RefreshEvery time.Duration

	mu     sync.Mutex
	loaded time.Time
	active map[[2]string]app.Cooldown
}

// Active returns the cooldown in force for provider and model, or for the whole provider.
// A database failure keeps the last known state until the next refresh (it is logged by the
// next Record or List).
func (c *Cooldowns) Active(provider, model string, now time.Time) (app.Cooldown, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	every := c.RefreshEvery
	if every <= 0 {
		every = time.Second
	}
	if c.loaded.IsZero() || now.Sub(c.loaded) >= every || now.Before(c.loaded) {
		// One bounded query per refresh. A failure keeps the last known state until the next
		// refresh, so a database outage does not put a query on every request.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		list, err := c.list(ctx, now)
		cancel()
		c.loaded = now
		if err == nil {
			c.active = make(map[[2]string]app.Cooldown, len(list))
			for _, cd := range list {
				c.active[[2]string{cd.Provider, cd.Model}] = cd
			}
		}
	}
	for _, k := range [][2]string{{provider, model}, {provider, ""}} {
		if cd, ok := c.active[k]; ok && cd.ResetAt.After(now) {
			return cd, true
		}
	}
	return app.Cooldown{}, false
}

// Record starts or extends the cooldown of provider and model until until (never shortening
// one already longer), counting the failures.
func (c *Cooldowns) Record(ctx context.Context, provider, model string, cls app.Classification, until time.Time) error {
	now := c.DB.now()
	var cd app.Cooldown
	var class string
	err := c.DB.Pool.QueryRow(ctx, `INSERT INTO provider_cooldowns (provider, model, class, code, reset_at, message,
			first_seen, last_seen, count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 1)
		ON CONFLICT (provider, model) DO UPDATE SET class = excluded.class, code = excluded.code,
			reset_at = CASE WHEN provider_cooldowns.cleared_at IS NULL AND provider_cooldowns.reset_at > excluded.reset_at
				THEN provider_cooldowns.reset_at ELSE excluded.reset_at END,
			message = excluded.message, last_seen = excluded.last_seen,
			first_seen = CASE WHEN provider_cooldowns.cleared_at IS NOT NULL OR provider_cooldowns.reset_at <= excluded.last_seen
				THEN excluded.first_seen ELSE provider_cooldowns.first_seen END,
			count = CASE WHEN provider_cooldowns.cleared_at IS NOT NULL OR provider_cooldowns.reset_at <= excluded.last_seen
				THEN 1 ELSE provider_cooldowns.count + 1 END,
			cleared_at = NULL
		RETURNING provider, model, class, code, reset_at, message, first_seen, last_seen, count`,
		provider, model, string(cls.Class), cls.Code, until.UTC(), cls.Message, now).
		Scan(&cd.Provider, &cd.Model, &class, &cd.Code, &cd.ResetAt, &cd.Message, &cd.FirstSeen, &cd.LastSeen, &cd.Count)
	if err != nil {
		return fmt.Errorf("record cooldown: %w", FormatError(err))
	}
	cd.Class = app.ErrorClass(class)
	// A new cooldown that needs a human alerts the operator (the outbox delivers it).
	if cd.Class == app.ClassManualAction && cd.Count == 1 {
		if _, err := c.DB.Pool.Exec(ctx, `INSERT INTO alert_events (kind, org_id, node_kind, node_id, period, currency,
				model, provider, code, message, reset_at, created_at)
			VALUES ('provider.manual_action', NULL, 'global', '00000000-0000-0000-0000-000000000000', $1, 'JPY',
				$2, $3, $4, $5, $6, $7)`,
			now.UTC().Format("2006-01"), model, provider, cls.Code, cls.Message, cd.ResetAt, now); err != nil {
			return fmt.Errorf("alert the operator of a cooldown: %w", FormatError(err))
		}
	}
	c.mu.Lock()
	if c.active == nil {
		c.active = map[[2]string]app.Cooldown{}
	}
	c.active[[2]string{cd.Provider, cd.Model}] = cd
	c.mu.Unlock()
	return nil
}

// List returns the cooldowns in force at now, by provider and model.
func (c *Cooldowns) List(ctx context.Context, now time.Time) ([]app.Cooldown, error) {
	return c.list(ctx, now)
}

func (c *Cooldowns) list(ctx context.Context, now time.Time) ([]app.Cooldown, error) {
	rows, _ := c.DB.Pool.Query(ctx, `SELECT provider, model, class, code, reset_at, message, first_seen, last_seen, count
		FROM provider_cooldowns WHERE cleared_at IS NULL AND reset_at > $1 ORDER BY provider, model`, now)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.Cooldown, error) {
		var cd app.Cooldown
		var class string
		err := row.Scan(&cd.Provider, &cd.Model, &class, &cd.Code, &cd.ResetAt, &cd.Message, &cd.FirstSeen, &cd.LastSeen, &cd.Count)
		cd.Class = app.ErrorClass(class)
		return cd, err
	})
	if err != nil {
		return nil, fmt.Errorf("list cooldowns: %w", FormatError(err))
	}
	return out, nil
}

// Clear ends the cooldown of provider and model at once (an admin fixed what needed a human).
// ENOTFOUND when none is in force.
func (c *Cooldowns) Clear(ctx context.Context, provider, model string) error {
	now := c.DB.now()
	tag, err := c.DB.Pool.Exec(ctx, `UPDATE provider_cooldowns SET cleared_at = $3
		WHERE provider = $1 AND model = $2 AND cleared_at IS NULL AND reset_at > $3`, provider, model, now)
	if err != nil {
		return fmt.Errorf("clear cooldown: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return app.Errorf(app.ENOTFOUND, "no cooldown of %s %s is in force", provider, model)
	}
	c.mu.Lock()
	delete(c.active, [2]string{provider, model})
	c.mu.Unlock()
	return nil
}
