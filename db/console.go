package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Read queries of the console's overview and budget pages. Each page reads with a fixed number
// of statements whatever the size of the org: the rows are joined in SQL and shaped in Go.

// NodeUsage is one budget node of an org (the org itself, a team, a member or a key) with its
// budget row of one period, named for people.
type NodeUsage struct {
	Kind app.NodeKind
	ID   string
	// Name is the org's or team's name, the member's email, or the key's name.
	Name string
	// TeamID is the team of a team, member or key node ("" for the org node); TeamName its name.
	TeamID   string
	TeamName string
	// MemberID is the member a key is bound to ("" when unbound); MemberEmail their email.
	MemberID    string
	MemberEmail string
	// KeyPrefix is the first characters of a key's secret; Revoked is true for a revoked key.
	KeyPrefix string
	Revoked   bool
	// HasRow is false when the node has no budget row in the period (nothing reserved yet):
	// Cap is then the node's standing cap for the current period, nil for a past one.
	HasRow   bool
	Cap      *int64
	Reserved int64
	Spent    int64
	// Thresholds are the alert thresholds (percent of the cap); LastAlert the highest one
	// already alerted in the period (0 when none).
	Thresholds []int
	LastAlert  int
}

// ModelUsage is an org's spend on one model in a period.
type ModelUsage struct {
	Model string
	// Requests counts the settled requests that were charged (committed or expired).
	Requests int64
	Spent    int64
	// Reserved is what pending requests of the model hold.
	Reserved int64
}

// DayUsage is an org's spend on one calendar day (in the org's time zone).
type DayUsage struct {
	// Day is the date at midnight UTC (only its year, month and day mean anything).
	Day      time.Time
	Requests int64
	Spent    int64
}

// Overrun is a request whose true cost exceeded what was reserved for it.
type Overrun struct {
	RequestID string
	KeyID     string
	KeyName   string
	KeyPrefix string
	Model     string
	Reserved  int64
	Actual    int64
	At        time.Time
}

// OrgUsage is what the console's overview shows about an org's period.
type OrgUsage struct {
	// Nodes lists the budget rows of the period (the org's own row always, with its standing cap
	// when the period has no row yet), with names.
	Nodes  []NodeUsage
	Models []ModelUsage
	Days   []DayUsage
	// Overruns are the latest overruns of the period (at most OverrunLimit); OverrunCount
	// counts them all.
	Overruns     []Overrun
	OverrunCount int
}

// OverrunLimit is how many overruns OrgUsage lists.
const OverrunLimit = 20

// charged is the statuses whose actual cost is spent.
const charged = `status IN ('committed', 'expired')`

// nodeNames joins the names of the budget node in the CTE row r (node_kind, node_id) from the
// org's tenant tables; $1 is the org.
const nodeNames = `
	LEFT JOIN orgs o ON r.node_kind = 'org' AND o.id = r.node_id AND o.id = $1
	LEFT JOIN teams t ON r.node_kind = 'team' AND t.id = r.node_id AND t.org_id = $1
	LEFT JOIN members m ON r.node_kind = 'member' AND m.id = r.node_id AND m.org_id = $1
	LEFT JOIN api_keys k ON r.node_kind = 'key' AND k.id = r.node_id AND k.org_id = $1
	LEFT JOIN members km ON km.id = k.member_id AND km.org_id = $1
	LEFT JOIN teams nt ON nt.id = coalesce(t.id, m.team_id, k.team_id) AND nt.org_id = $1`

// nodeCols are the columns scanNode reads, over nodeNames and a row r with the budget columns.
const nodeCols = `r.node_kind, r.node_id::text, coalesce(o.name, t.name, m.email, k.name, ''),
	coalesce(nt.id::text, ''), coalesce(nt.name, ''), coalesce(k.member_id::text, ''), coalesce(km.email, ''),
	coalesce(k.prefix, ''), k.revoked_at IS NOT NULL, r.has_row, r.cap, r.reserved, r.spent, r.thresholds,
	r.last_alert_threshold`

func scanNode(row pgx.CollectableRow) (NodeUsage, error) {
	var n NodeUsage
	var kind string
	err := row.Scan(&kind, &n.ID, &n.Name, &n.TeamID, &n.TeamName, &n.MemberID, &n.MemberEmail, &n.KeyPrefix,
		&n.Revoked, &n.HasRow, &n.Cap, &n.Reserved, &n.Spent, &n.Thresholds, &n.LastAlert)
	n.Kind = app.NodeKind(kind)
	return n, err
}

// OrgUsage reads an org's period for the overview in one round trip of four statements (budget
// rows with names, per-model sums, per-day sums in time zone tz, the latest overruns), whatever
// the number of teams, members and keys. from and to bound the period (to exclusive); they only
// let the ledger's (org_id, created_at) index narrow the scan, the period itself decides.
func (db *DB) OrgUsage(ctx context.Context, orgID, period, tz string, from, to time.Time) (OrgUsage, error) {
	var u OrgUsage
	if uuid.Validate(orgID) != nil {
		return u, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	// A reservation's created_at may lie a moment outside its period (it is stamped by the
	// batch, its period by the gateway): a day's margin keeps it in the scan.
	lo, hi := from.Add(-24*time.Hour).UTC(), to.Add(24*time.Hour).UTC()
	b := &pgx.Batch{}
	b.Queue(`WITH r AS (
			SELECT b.node_kind, b.node_id, true AS has_row, b.cap, b.reserved, b.spent, b.thresholds, b.last_alert_threshold
			FROM budgets b WHERE b.org_id = $1 AND b.period = $2 AND b.node_kind <> 'global'
			UNION ALL
			SELECT 'org', o.id, false, c.cap, 0, 0, coalesce(c.thresholds, $3::int[]), 0
			FROM orgs o LEFT JOIN budget_caps c ON c.node_kind = 'org' AND c.node_id = o.id
			WHERE o.id = $1 AND NOT EXISTS (
				SELECT 1 FROM budgets x WHERE x.node_kind = 'org' AND x.node_id = $1 AND x.period = $2))
		SELECT `+nodeCols+` FROM r`+nodeNames+`
		ORDER BY r.spent DESC, r.node_kind, r.node_id`, orgID, period, app.DefaultThresholds)
	b.Queue(`SELECT model, count(*) FILTER (WHERE `+charged+`),
			coalesce(sum(actual) FILTER (WHERE `+charged+`), 0)::bigint,
			coalesce(sum(amount) FILTER (WHERE status = 'pending'), 0)::bigint
		FROM reservations WHERE org_id = $1 AND period = $2 AND created_at >= $3 AND created_at < $4
		GROUP BY model ORDER BY 3 DESC, model`, orgID, period, lo, hi)
	b.Queue(`SELECT (created_at AT TIME ZONE $5)::date, count(*), coalesce(sum(actual), 0)::bigint
		FROM reservations WHERE org_id = $1 AND period = $2 AND created_at >= $3 AND created_at < $4 AND `+charged+`
		GROUP BY 1 ORDER BY 1`, orgID, period, lo, hi, tz)
	b.Queue(`SELECT r.request_id, r.key_id::text, coalesce(k.name, ''), coalesce(k.prefix, ''), r.model, r.amount,
			coalesce(r.actual, 0), r.created_at, count(*) OVER ()
		FROM reservations r LEFT JOIN api_keys k ON k.id = r.key_id AND k.org_id = $1
		WHERE r.org_id = $1 AND r.period = $2 AND r.overrun
		ORDER BY r.created_at DESC, r.request_id LIMIT $3`, orgID, period, OverrunLimit)
	br := db.Pool.SendBatch(ctx, b)
	defer br.Close()

	var err error
	rows, _ := br.Query()
	if u.Nodes, err = pgx.CollectRows(rows, scanNode); err != nil {
		return u, fmt.Errorf("read budget rows: %w", FormatError(err))
	}
	rows, _ = br.Query()
	u.Models, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ModelUsage, error) {
		var m ModelUsage
		err := row.Scan(&m.Model, &m.Requests, &m.Spent, &m.Reserved)
		return m, err
	})
	if err != nil {
		return u, fmt.Errorf("read spend per model: %w", FormatError(err))
	}
	rows, _ = br.Query()
	u.Days, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (DayUsage, error) {
		var d DayUsage
		err := row.Scan(&d.Day, &d.Requests, &d.Spent)
		return d, err
	})
	if err != nil {
		return u, fmt.Errorf("read spend per day: %w", FormatError(err))
	}
	rows, _ = br.Query()
	u.Overruns, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Overrun, error) {
		var o Overrun
		err := row.Scan(&o.RequestID, &o.KeyID, &o.KeyName, &o.KeyPrefix, &o.Model, &o.Reserved, &o.Actual, &o.At, &u.OverrunCount)
		return o, err
	})
	if err != nil {
		return u, fmt.Errorf("read overruns: %w", FormatError(err))
	}
	return u, nil
}

// BudgetTree returns every budget node of an org (the org, its teams, members and keys, revoked
// keys included) with its budget row of period, in ONE statement whatever the number of nodes.
// A node without a row in the period shows its standing cap and thresholds when current is true
// (the period is the org's current one, where the standing cap applies), no cap otherwise.
// The org node comes first; the rest are ordered by kind and name.
func (db *DB) BudgetTree(ctx context.Context, orgID, period string, current bool) ([]NodeUsage, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `WITH n AS (
			SELECT 'org' AS node_kind, id AS node_id, 0 AS ord FROM orgs WHERE id = $1
			UNION ALL SELECT 'team', id, 1 FROM teams WHERE org_id = $1
			UNION ALL SELECT 'member', id, 2 FROM members WHERE org_id = $1
			UNION ALL SELECT 'key', id, 3 FROM api_keys WHERE org_id = $1),
		r AS (
			SELECT n.node_kind, n.node_id, n.ord, b.id IS NOT NULL AS has_row,
				CASE WHEN b.id IS NOT NULL THEN b.cap WHEN $3 THEN c.cap END AS cap,
				coalesce(b.reserved, 0) AS reserved, coalesce(b.spent, 0) AS spent,
				coalesce(b.thresholds, c.thresholds, $4::int[]) AS thresholds,
				coalesce(b.last_alert_threshold, 0) AS last_alert_threshold
			FROM n
			LEFT JOIN budgets b ON b.node_kind = n.node_kind AND b.node_id = n.node_id AND b.period = $2 AND b.org_id = $1
			LEFT JOIN budget_caps c ON c.node_kind = n.node_kind AND c.node_id = n.node_id)
		SELECT `+nodeCols+` FROM r`+nodeNames+`
		ORDER BY r.ord, lower(coalesce(o.name, t.name, m.email, k.name, '')), r.node_id`,
		orgID, period, current, app.DefaultThresholds)
	nodes, err := pgx.CollectRows(rows, scanNode)
	if err != nil {
		return nil, fmt.Errorf("read budget tree: %w", FormatError(err))
	}
	return nodes, nil
}

// BudgetPeriods lists the periods in which an org has budget rows, newest first.
func (db *DB) BudgetPeriods(ctx context.Context, orgID string) ([]string, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT DISTINCT period FROM budgets WHERE org_id = $1 ORDER BY period DESC`, orgID)
	ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list budget periods: %w", FormatError(err))
	}
	return ps, nil
}

// BudgetNode returns one budget node of an org (without a budget row: HasRow is false), named.
// ENOTFOUND when the org has no such node, so a node of another org is never found through
// this org; EINVALID for an unknown or global kind.
func (db *DB) BudgetNode(ctx context.Context, orgID string, kind app.NodeKind, id string) (NodeUsage, error) {
	switch kind {
	case app.NodeOrg, app.NodeTeam, app.NodeMember, app.NodeKey:
	default:
		return NodeUsage{}, app.Errorf(app.EINVALID, "unknown budget kind %q (want org, team, member or key)", kind)
	}
	if uuid.Validate(orgID) != nil || uuid.Validate(id) != nil {
		return NodeUsage{}, app.Errorf(app.ENOTFOUND, "%s %q not found", kind, id)
	}
	rows, _ := db.Pool.Query(ctx, `WITH r AS (
			SELECT $2::text AS node_kind, $3::uuid AS node_id, false AS has_row, NULL::bigint AS cap,
				0::bigint AS reserved, 0::bigint AS spent, '{}'::int[] AS thresholds, 0 AS last_alert_threshold)
		SELECT `+nodeCols+` FROM r`+nodeNames+`
		WHERE coalesce(o.id, t.id, m.id, k.id) IS NOT NULL`, orgID, string(kind), id)
	n, err := pgx.CollectExactlyOneRow(rows, scanNode)
	if errors.Is(err, pgx.ErrNoRows) {
		return NodeUsage{}, app.Errorf(app.ENOTFOUND, "%s %q not found", kind, id)
	}
	if err != nil {
		return NodeUsage{}, fmt.Errorf("find budget node: %w", FormatError(err))
	}
	return n, nil
}

// ActionLog returns the latest limit audit entries of an org with the given action, newest
// first (for example the history of cap changes, "budget.cap_set").
func (db *DB) ActionLog(ctx context.Context, orgID, action string, limit int) ([]AuditEntry, error) {
	if uuid.Validate(orgID) != nil {
		return nil, app.Errorf(app.ENOTFOUND, "org %q not found", orgID)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT id, at, coalesce(actor_id::text, ''), actor, coalesce(org_id::text, ''),
			action, target_kind, target_id, details
		FROM audit_log WHERE org_id = $1 AND action = $2 ORDER BY id DESC LIMIT $3`, orgID, action, limit)
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
