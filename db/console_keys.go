package db

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Read queries of the console's keys, reservations, plans & models, audit and users pages. Each
// page reads a fixed number of statements whatever the number of rows: lists come from one
// statement each (joins and correlated subqueries, never a query per row).

// KeyListing is an API key as the console lists it: the key with its team's name, its member's
// email and when it was last used.
type KeyListing struct {
	app.APIKey
	TeamName    string
	MemberEmail string // "" when the key is not bound to a member
	// LastUsed is the time of the key's newest reservation, nil when it was never used.
	LastUsed *time.Time
}

const keyListingSelect = `SELECT k.id::text, k.org_id::text, k.team_id::text, coalesce(k.member_id::text, ''),
	k.name, k.plan, k.prefix, k.expires_at, k.revoked_at, k.created_at, t.name, coalesce(m.email, ''),
	(SELECT max(r.created_at) FROM reservations r WHERE r.key_id = k.id AND r.org_id = k.org_id)
	FROM api_keys k
	JOIN teams t ON t.org_id = k.org_id AND t.id = k.team_id
	LEFT JOIN members m ON m.org_id = k.org_id AND m.id = k.member_id
	WHERE k.org_id = $1`

func scanKeyListing(row pgx.CollectableRow) (KeyListing, error) {
	var k KeyListing
	err := row.Scan(&k.ID, &k.OrgID, &k.TeamID, &k.MemberID, &k.Name, &k.Plan, &k.Prefix, &k.ExpiresAt, &k.RevokedAt,
		&k.CreatedAt, &k.TeamName, &k.MemberEmail, &k.LastUsed)
	return k, err
}

// OrgKeys lists every key of org orgID, newest first, in one statement: the last use of each
// key is a correlated max() answered by the index reservations (key_id, created_at DESC).
func (db *DB) OrgKeys(ctx context.Context, orgID string) ([]KeyListing, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, keyListingSelect+` ORDER BY k.created_at DESC, k.id`, orgID)
	keys, err := pgx.CollectRows(rows, scanKeyListing)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", FormatError(err))
	}
	return keys, nil
}

// OrgKey returns key id of org orgID. It returns ENOTFOUND when the key does not exist or
// belongs to another org.
func (db *DB) OrgKey(ctx context.Context, orgID, id string) (KeyListing, error) {
	if uuid.Validate(orgID) != nil || uuid.Validate(id) != nil {
		return KeyListing{}, app.Errorf(app.ENOTFOUND, "key %q not found", id)
	}
	rows, _ := db.Pool.Query(ctx, keyListingSelect+` AND k.id = $2`, orgID, id)
	k, err := pgx.CollectExactlyOneRow(rows, scanKeyListing)
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyListing{}, app.Errorf(app.ENOTFOUND, "key %q not found", id)
	}
	if err != nil {
		return KeyListing{}, fmt.Errorf("select key: %w", FormatError(err))
	}
	return k, nil
}

// KeyChoices are what the key form offers: the org's teams and members and every plan.
type KeyChoices struct {
	Teams   []app.Team
	Members []app.Member
	Plans   []string
}

// KeyFormChoices returns the teams and members of org orgID (by name, by email) and the plans
// (by name), in one statement.
func (db *DB) KeyFormChoices(ctx context.Context, orgID string) (KeyChoices, error) {
	var out KeyChoices
	if uuid.Validate(orgID) != nil {
		return out, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT 1, id::text, name, '' FROM teams WHERE org_id = $1
		UNION ALL SELECT 2, id::text, email, team_id::text FROM members WHERE org_id = $1
		UNION ALL SELECT 3, name, name, '' FROM plans
		ORDER BY 1, 3, 2`, orgID)
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var kind int
		var id, name, team string
		if err := row.Scan(&kind, &id, &name, &team); err != nil {
			return struct{}{}, err
		}
		switch kind {
		case 1:
			out.Teams = append(out.Teams, app.Team{ID: id, OrgID: orgID, Name: name})
		case 2:
			out.Members = append(out.Members, app.Member{ID: id, OrgID: orgID, TeamID: team, Email: name})
		case 3:
			out.Plans = append(out.Plans, name)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return KeyChoices{}, fmt.Errorf("list key form choices: %w", FormatError(err))
	}
	return out, nil
}

// LedgerFilter selects a page of an org's reservations, newest first.
type LedgerFilter struct {
	OrgID string
	// Status is "" for any status.
	Status app.ReservationStatus
	// KeyID and Model are "" for any.
	KeyID string
	Model string
	// From and To bound created_at (From inclusive, To exclusive); zero means unbounded.
	From, To time.Time
	// StuckAt, when set, keeps only pending rows whose deadline is before it.
	StuckAt time.Time
	// BeforeAt and BeforeID continue after the last row of the previous page (keyset on
	// created_at, request_id); zero for the first page.
	BeforeAt time.Time
	BeforeID string
	Limit    int
}

// LedgerEntry is one reservation as the explorer shows it.
type LedgerEntry struct {
	RequestID    string
	CreatedAt    time.Time
	KeyID        string
	KeyName      string
	Model        string
	Provider     string
	Status       app.ReservationStatus
	InputTokens  *int64
	CachedTokens *int64
	OutputTokens *int64
	Currency     string
	Amount       int64
	Actual       *int64
	Overrun      bool
	UsageSource  string
	Deadline     time.Time
	// ErrorClass and ErrorCode say why a failed attempt failed ("" otherwise).
	ErrorClass, ErrorCode string
	// Nodes are the kinds of the budget nodes charged, in tree order: "org, team, member, key,
	// global".
	Nodes string
}

// LedgerPage returns one page of org f.OrgID's reservations matching f, newest first, in one
// statement: the key's name comes from a join, the charged nodes' kinds from the budgets rows of
// budget_ids. EINVALID for a malformed key id.
//
// The statement names only the filters that are set (its text is built from fixed fragments,
// the values are parameters), so under the pool's generic plans each shape keeps its own index
// path: a key's rows come from reservations (key_id, created_at DESC), stuck rows from the
// partial index on pending deadlines, the rest from reservations (org_id, created_at DESC).
func (db *DB) LedgerPage(ctx context.Context, f LedgerFilter) ([]LedgerEntry, error) {
	if uuid.Validate(f.OrgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", f.OrgID)
	}
	args := []any{f.OrgID}
	where := []string{"r.org_id = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	if f.KeyID != "" {
		if uuid.Validate(f.KeyID) != nil {
			return nil, app.Errorf(app.EINVALID, "no such key")
		}
		add("r.key_id = $?", f.KeyID)
	}
	if f.Status != "" {
		add("r.status = $?", string(f.Status))
	}
	if f.Model != "" {
		add("r.model = $?", f.Model)
	}
	if !f.From.IsZero() {
		add("r.created_at >= $?", f.From)
	}
	if !f.To.IsZero() {
		add("r.created_at < $?", f.To)
	}
	if !f.StuckAt.IsZero() {
		add("r.status = 'pending' AND r.deadline < $?", f.StuckAt)
	}
	if !f.BeforeAt.IsZero() {
		args = append(args, f.BeforeAt, f.BeforeID)
		where = append(where, fmt.Sprintf("(r.created_at, r.request_id) < ($%d::timestamptz, $%d::text)", len(args)-1, len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	args = append(args, limit)
	rows, _ := db.Pool.Query(ctx, `SELECT r.request_id, r.created_at, r.key_id::text, coalesce(k.name, ''), r.model,
			r.provider, r.status, r.input_tokens, r.cached_tokens, r.output_tokens, r.currency, r.amount, r.actual,
			r.overrun, coalesce(r.usage_source, ''), r.deadline, coalesce(r.error_class, ''), coalesce(r.error_code, ''),
			concat_ws(', ',
				(SELECT string_agg(b.node_kind, ', ' ORDER BY array_position(ARRAY['org', 'team', 'member', 'key'], b.node_kind))
					FROM budgets b WHERE b.id = ANY (r.budget_ids) AND b.org_id = r.org_id),
				CASE WHEN r.global_budget_id IS NOT NULL THEN 'global' END)
		FROM reservations r
		LEFT JOIN api_keys k ON k.id = r.key_id AND k.org_id = r.org_id
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY r.created_at DESC, r.request_id DESC
		LIMIT $`+fmt.Sprint(len(args)), args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LedgerEntry, error) {
		var e LedgerEntry
		var status string
		err := row.Scan(&e.RequestID, &e.CreatedAt, &e.KeyID, &e.KeyName, &e.Model, &e.Provider, &status,
			&e.InputTokens, &e.CachedTokens, &e.OutputTokens, &e.Currency, &e.Amount, &e.Actual, &e.Overrun,
			&e.UsageSource, &e.Deadline, &e.ErrorClass, &e.ErrorCode, &e.Nodes)
		e.Status = app.ReservationStatus(status)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", FormatError(err))
	}
	return out, nil
}

// LedgerChoices are what the explorer's filters offer.
type LedgerChoices struct {
	// Keys are the org's keys (id and name), by name.
	Keys []app.APIKey
	// Models are the names of the catalog's models. Every model a reservation names is in the
	// catalog table (UpsertModels never deletes one), so this lists each model the ledger can
	// hold without scanning the ledger.
	Models []string
}

// LedgerFilterChoices returns the keys of org orgID and the model names, in one statement.
func (db *DB) LedgerFilterChoices(ctx context.Context, orgID string) (LedgerChoices, error) {
	var out LedgerChoices
	if uuid.Validate(orgID) != nil {
		return out, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT 1, id::text, name FROM api_keys WHERE org_id = $1
		UNION ALL SELECT 2, name, name FROM models
		ORDER BY 1, 3, 2`, orgID)
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var kind int
		var id, name string
		if err := row.Scan(&kind, &id, &name); err != nil {
			return struct{}{}, err
		}
		if kind == 1 {
			out.Keys = append(out.Keys, app.APIKey{ID: id, OrgID: orgID, Name: name})
		} else {
			out.Models = append(out.Models, name)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return LedgerChoices{}, fmt.Errorf("list reservation filters: %w", FormatError(err))
	}
	return out, nil
}

// Plans lists every plan with its tiers, by name.
func (db *DB) Plans(ctx context.Context) ([]app.Plan, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT name, tiers, clamp_max_tokens FROM plans ORDER BY name`)
	plans, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.Plan, error) {
		var p app.Plan
		err := row.Scan(&p.Name, &p.Tiers, &p.ClampMaxTokens)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", FormatError(err))
	}
	return plans, nil
}

// ModelListing is a catalog model with every price it has had or will have, oldest first.
type ModelListing struct {
	app.Model
	Prices []app.DatedPrice
}

// ModelCatalog lists the models (by name) with their effective-dated prices, in one statement.
func (db *DB) ModelCatalog(ctx context.Context) ([]ModelListing, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT m.name, m.provider, m.upstream_name, m.tier, m.kind, m.max_output_tokens,
			m.context_window, p.effective_from, p.input_per_m, p.cached_per_m, p.output_per_m, p.cache_write_per_m,
			p.cache_write_1h_per_m
		FROM models m LEFT JOIN model_prices p ON p.model = m.name
		ORDER BY m.name, p.effective_from`)
	var out []ModelListing
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var m app.Model
		var from *time.Time
		var in, cached, output, writes, writes1h *int64
		if err := row.Scan(&m.Name, &m.Provider, &m.UpstreamName, &m.Tier, &m.Kind, &m.MaxOutputTokens,
			&m.ContextWindow, &from, &in, &cached, &output, &writes, &writes1h); err != nil {
			return struct{}{}, err
		}
		if len(out) == 0 || out[len(out)-1].Name != m.Name {
			out = append(out, ModelListing{Model: m})
		}
		if from != nil {
			last := &out[len(out)-1]
			last.Prices = append(last.Prices, app.DatedPrice{From: *from,
				Price: app.Price{InputPerM: *in, CachedPerM: *cached, OutputPerM: *output, CacheWritePerM: *writes, CacheWrite1hPerM: *writes1h}})
		}
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list models: %w", FormatError(err))
	}
	return out, nil
}

// OrgTeams lists the teams of org orgID, by name.
func (db *DB) OrgTeams(ctx context.Context, orgID string) ([]app.Team, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT id::text, org_id::text, name, created_at FROM teams WHERE org_id = $1 ORDER BY name, id`, orgID)
	teams, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (app.Team, error) {
		var t app.Team
		err := row.Scan(&t.ID, &t.OrgID, &t.Name, &t.CreatedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", FormatError(err))
	}
	return teams, nil
}

// OrgAuditPage returns up to limit audit entries of org orgID, newest first, with ids below
// beforeID (0: from the newest) and an action starting with prefix ("" for all), in one
// statement on the index audit_log (org_id, id DESC). ENOTFOUND for a malformed org id.
func (db *DB) OrgAuditPage(ctx context.Context, orgID, prefix string, beforeID int64, limit int) ([]AuditEntry, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	if limit <= 0 {
		limit = DefaultAuditPage
	}
	limit = min(limit, MaxAuditPage)
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	rows, _ := db.Pool.Query(ctx, `SELECT id, at, coalesce(actor_id::text, ''), actor, coalesce(org_id::text, ''),
			action, target_kind, target_id, details
		FROM audit_log
		WHERE org_id = $1 AND id < $2 AND left(action, length($3)) = $3
		ORDER BY id DESC LIMIT $4`, orgID, beforeID, prefix, limit)
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := row.Scan(&e.ID, &e.At, &e.ActorID, &e.Actor, &e.OrgID, &e.Action, &e.TargetKind, &e.TargetID, &e.Details)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", FormatError(err))
	}
	return es, nil
}
