package db

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// CreateOrg inserts an org. Currency, TimeZone and USDJPY must already be validated and
// defaulted by the caller. It returns the org with its new ID.
func (db *DB) CreateOrg(ctx context.Context, o app.Org) (app.Org, error) {
	o.ID = uuid.NewString()
	o.CreatedAt = db.now()
	_, err := db.Pool.Exec(ctx, `INSERT INTO orgs (id, name, currency, timezone, usd_jpy, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, o.ID, o.Name, o.Currency, o.TimeZone, o.USDJPY, o.CreatedAt)
	if err != nil {
		return app.Org{}, fmt.Errorf("insert org: %w", FormatError(err))
	}
	return o, nil
}

// Org returns the org with id, or ENOTFOUND.
func (db *DB) Org(ctx context.Context, id string) (app.Org, error) {
	if uuid.Validate(id) != nil {
		return app.Org{}, app.Errorf(app.ENOTFOUND, "org %q not found", id)
	}
	var o app.Org
	err := db.Pool.QueryRow(ctx, `SELECT id, name, currency, timezone, usd_jpy, created_at FROM orgs WHERE id = $1`, id).
		Scan(&o.ID, &o.Name, &o.Currency, &o.TimeZone, &o.USDJPY, &o.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Org{}, app.Errorf(app.ENOTFOUND, "org %q not found", id)
	}
	if err != nil {
		return app.Org{}, fmt.Errorf("select org: %w", FormatError(err))
	}
	return o, nil
}

// CreateTeam inserts a team into org orgID. It returns ENOTFOUND when the org does not exist.
func (db *DB) CreateTeam(ctx context.Context, orgID, name string) (app.Team, error) {
	if _, err := db.Org(ctx, orgID); err != nil {
		return app.Team{}, err
	}
	t := app.Team{ID: uuid.NewString(), OrgID: orgID, Name: name, CreatedAt: db.now()}
	_, err := db.Pool.Exec(ctx, `INSERT INTO teams (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)`,
		t.ID, t.OrgID, t.Name, t.CreatedAt)
	if err != nil {
		return app.Team{}, fmt.Errorf("insert team: %w", FormatError(err))
	}
	return t, nil
}

// Team returns the team id of org orgID ("" matches any org), or ENOTFOUND.
func (db *DB) Team(ctx context.Context, orgID, id string) (app.Team, error) {
	if uuid.Validate(id) != nil {
		return app.Team{}, app.Errorf(app.ENOTFOUND, "team %q not found", id)
	}
	var t app.Team
	err := db.Pool.QueryRow(ctx, `SELECT id, org_id, name, created_at FROM teams
		WHERE id = $1 AND ($2 = '' OR org_id::text = $2)`, id, orgID).Scan(&t.ID, &t.OrgID, &t.Name, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Team{}, app.Errorf(app.ENOTFOUND, "team %q not found", id)
	}
	if err != nil {
		return app.Team{}, fmt.Errorf("select team: %w", FormatError(err))
	}
	return t, nil
}

// CreateMember inserts a member of team teamID in org orgID, its email trimmed and in lower
// case (one spelling per address, whichever surface adds it). It returns EINVALID for a
// malformed email, ENOTFOUND for an unknown org or team and ECONFLICT when the email is
// already a member of the org.
func (db *DB) CreateMember(ctx context.Context, orgID, teamID, email string) (app.Member, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if err := checkEmail(email); err != nil {
		return app.Member{}, err
	}
	if _, err := db.Team(ctx, orgID, teamID); err != nil {
		return app.Member{}, err
	}
	m := app.Member{ID: uuid.NewString(), OrgID: orgID, TeamID: teamID, Email: email, CreatedAt: db.now()}
	_, err := db.Pool.Exec(ctx, `INSERT INTO members (id, org_id, team_id, email, created_at) VALUES ($1, $2, $3, $4, $5)`,
		m.ID, m.OrgID, m.TeamID, m.Email, m.CreatedAt)
	if err != nil {
		if app.ErrorCode(FormatError(err)) == app.ECONFLICT {
			return app.Member{}, app.Errorf(app.ECONFLICT, "member %q already exists in this org", email)
		}
		return app.Member{}, fmt.Errorf("insert member: %w", FormatError(err))
	}
	return m, nil
}

// Member returns member id of org orgID ("" matches any org), or ENOTFOUND.
func (db *DB) Member(ctx context.Context, orgID, id string) (app.Member, error) {
	if uuid.Validate(id) != nil {
		return app.Member{}, app.Errorf(app.ENOTFOUND, "member %q not found", id)
	}
	var m app.Member
	err := db.Pool.QueryRow(ctx, `SELECT id, org_id, team_id, email, created_at FROM members
		WHERE id = $1 AND ($2 = '' OR org_id::text = $2)`, id, orgID).Scan(&m.ID, &m.OrgID, &m.TeamID, &m.Email, &m.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Member{}, app.Errorf(app.ENOTFOUND, "member %q not found", id)
	}
	if err != nil {
		return app.Member{}, fmt.Errorf("select member: %w", FormatError(err))
	}
	return m, nil
}

// HashKey returns the stored hash of a key secret.
func HashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewKeySecret returns a fresh random key secret with the recognisable prefix.
func NewKeySecret() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // crypto/rand never fails on Linux
	}
	return app.KeyPrefix + hex.EncodeToString(b[:])
}

// CreateKey stores a key with the given secret (only its hash is kept). The key's team and
// member (if any) must belong to k.OrgID and the member to the team; the plan must exist.
func (db *DB) CreateKey(ctx context.Context, k app.APIKey, secret string) (app.APIKey, error) {
	if _, err := db.Team(ctx, k.OrgID, k.TeamID); err != nil {
		return app.APIKey{}, err
	}
	if k.MemberID != "" {
		m, err := db.Member(ctx, k.OrgID, k.MemberID)
		if err != nil {
			return app.APIKey{}, err
		}
		if m.TeamID != k.TeamID {
			return app.APIKey{}, app.Errorf(app.EINVALID, "member %s is not in team %s", k.MemberID, k.TeamID)
		}
	}
	var exists bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM plans WHERE name = $1)`, k.Plan).Scan(&exists); err != nil {
		return app.APIKey{}, fmt.Errorf("check plan: %w", FormatError(err))
	}
	if !exists {
		return app.APIKey{}, app.Errorf(app.EINVALID, "plan %q does not exist", k.Plan)
	}
	k.ID = uuid.NewString()
	k.Prefix = secret[:min(len(secret), len(app.KeyPrefix)+6)]
	k.CreatedAt = db.now()
	var member any
	if k.MemberID != "" {
		member = k.MemberID
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO api_keys (id, org_id, team_id, member_id, name, plan, key_hash, prefix, expires_at,
			created_at, sensitive_only)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		k.ID, k.OrgID, k.TeamID, member, k.Name, k.Plan, HashKey(secret), k.Prefix, k.ExpiresAt, k.CreatedAt, k.SensitiveOnly)
	if err != nil {
		return app.APIKey{}, fmt.Errorf("insert key: %w", FormatError(err))
	}
	return k, nil
}

// RevokeKey marks key id revoked (idempotent). It returns ENOTFOUND for an unknown key.
func (db *DB) RevokeKey(ctx context.Context, id string) (app.APIKey, error) {
	if uuid.Validate(id) != nil {
		return app.APIKey{}, app.Errorf(app.ENOTFOUND, "key %q not found", id)
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1`, id, db.now())
	if err != nil {
		return app.APIKey{}, fmt.Errorf("revoke key: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return app.APIKey{}, app.Errorf(app.ENOTFOUND, "key %q not found", id)
	}
	return db.key(ctx, `k.id = $1`, id)
}

const keySelect = `SELECT k.id, k.org_id, k.team_id, coalesce(k.member_id::text, ''), k.name, k.plan, k.prefix,
	k.expires_at, k.revoked_at, k.created_at,
	o.id, o.name, o.currency, o.timezone, o.usd_jpy, o.created_at, p.tiers, k.key_hash, k.sensitive_only, p.clamp_max_tokens
	FROM api_keys k JOIN orgs o ON o.id = k.org_id JOIN plans p ON p.name = k.plan WHERE `

func (db *DB) principal(ctx context.Context, where string, arg any) (app.Principal, error) {
	var p app.Principal
	k := &p.Key
	o := &p.Org
	err := db.Pool.QueryRow(ctx, keySelect+where, arg).Scan(&k.ID, &k.OrgID, &k.TeamID, &k.MemberID, &k.Name, &k.Plan, &k.Prefix,
		&k.ExpiresAt, &k.RevokedAt, &k.CreatedAt, &o.ID, &o.Name, &o.Currency, &o.TimeZone, &o.USDJPY, &o.CreatedAt, &p.Tiers, &p.KeyHash,
		&k.SensitiveOnly, &p.ClampMaxTokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Principal{}, app.Errorf(app.ENOTFOUND, "key not found")
	}
	if err != nil {
		return app.Principal{}, fmt.Errorf("select key: %w", FormatError(err))
	}
	return p, nil
}

func (db *DB) key(ctx context.Context, where string, arg any) (app.APIKey, error) {
	p, err := db.principal(ctx, where, arg)
	return p.Key, err
}

// PrincipalByHash returns the key whose secret hashes to hash, with its org and plan tiers,
// whether or not it is revoked or expired (the caller decides). ENOTFOUND when none matches.
func (db *DB) PrincipalByHash(ctx context.Context, hash []byte) (app.Principal, error) {
	return db.principal(ctx, `k.key_hash = $1`, hash)
}

// UpsertPlans stores the plans from the config (adding and updating, never deleting a plan a
// key may still name).
func (db *DB) UpsertPlans(ctx context.Context, plans []app.Plan) error {
	b := &pgx.Batch{}
	for _, p := range plans {
		b.Queue(`INSERT INTO plans (name, tiers, clamp_max_tokens) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET tiers = excluded.tiers, clamp_max_tokens = excluded.clamp_max_tokens`,
			p.Name, p.Tiers, p.ClampMaxTokens)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("upsert plans: %w", FormatError(err))
	}
	return nil
}

// ModelPrice is one effective-dated price of a model.
type ModelPrice struct {
	Model string
	From  time.Time
	Price app.Price
}

// UpsertModels records the configured models and their effective-dated prices, so the ledger's
// model names and the invoices can always be traced to a price.
func (db *DB) UpsertModels(ctx context.Context, models []app.Model, prices []ModelPrice) error {
	b := &pgx.Batch{}
	for _, m := range models {
		b.Queue(`INSERT INTO models (name, provider, upstream_name, tier, kind, max_output_tokens, context_window)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (name) DO UPDATE SET provider = excluded.provider, upstream_name = excluded.upstream_name,
				tier = excluded.tier, kind = excluded.kind, max_output_tokens = excluded.max_output_tokens,
				context_window = excluded.context_window`,
			m.Name, m.Provider, m.UpstreamName, m.Tier, m.Kind, m.MaxOutputTokens, m.ContextWindow)
	}
	for _, p := range prices {
		b.Queue(`INSERT INTO model_prices (model, effective_from, input_per_m, output_per_m, cached_per_m, cache_write_per_m,
				cache_write_1h_per_m)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (model, effective_from) DO UPDATE SET input_per_m = excluded.input_per_m,
				output_per_m = excluded.output_per_m, cached_per_m = excluded.cached_per_m,
				cache_write_per_m = excluded.cache_write_per_m, cache_write_1h_per_m = excluded.cache_write_1h_per_m`,
			p.Model, p.From, p.Price.InputPerM, p.Price.OutputPerM, p.Price.CachedPerM, p.Price.CacheWritePerM,
			p.Price.CacheWrite1hPerM)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("upsert models: %w", FormatError(err))
	}
	return nil
}

// PeriodRate returns the USD->JPY rate fixed for org's period, fixing it when the period opens:
// from a rate set for the org-period by an admin, else from the config file's rate for the
// period (fx_rates), else from the org's default rate.
func (db *DB) PeriodRate(ctx context.Context, org app.Org, period string) (int64, error) {
	var rate int64
	err := db.Pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO org_periods (org_id, period, usd_jpy, fx_source, opened_at)
			SELECT o.id, $2, coalesce(fx.usd_jpy, o.usd_jpy), coalesce(fx.source, 'org default rate'), $3
			FROM orgs o LEFT JOIN fx_rates fx ON fx.period = $2 WHERE o.id = $1
			ON CONFLICT (org_id, period) DO UPDATE SET opened_at = coalesce(org_periods.opened_at, excluded.opened_at)
			RETURNING usd_jpy)
		SELECT usd_jpy FROM ins`,
		org.ID, period, db.now()).Scan(&rate)
	if err != nil {
		return 0, fmt.Errorf("fix period rate: %w", FormatError(err))
	}
	return rate, nil
}

// now is the clock at the database's precision (microseconds), so what a create returns equals
// what a later read returns.
func (db *DB) now() time.Time { return db.Now().UTC().Truncate(time.Microsecond) }

// Orgs lists every org, by name (for operators).
func (db *DB) Orgs(ctx context.Context) ([]app.Org, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id::text, name, currency, timezone, usd_jpy, created_at FROM orgs ORDER BY name, id`)
	orgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.Org, error) {
		var o app.Org
		err := row.Scan(&o.ID, &o.Name, &o.Currency, &o.TimeZone, &o.USDJPY, &o.CreatedAt)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", FormatError(err))
	}
	return orgs, nil
}

// OrgNames returns the names of the orgs with the given ids.
func (db *DB) OrgNames(ctx context.Context, ids []string) (map[string]string, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT id::text, name FROM orgs WHERE id::text = ANY($1)`, ids)
	out := map[string]string{}
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var id, name string
		err := row.Scan(&id, &name)
		out[id] = name
		return struct{}{}, err
	})
	if err != nil {
		return nil, fmt.Errorf("org names: %w", FormatError(err))
	}
	return out, nil
}
