package db

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// The audit log is append-only: migrations/0005 refuses UPDATE, DELETE and TRUNCATE on it, so
// no code path (nor a compromised console session) can rewrite history.

// AuditEntry is one line of the audit log: who (ActorID, Actor) did Action to what
// (TargetKind, TargetID) in which org (OrgID, "" for a gateway-wide action), and when.
type AuditEntry struct {
	ID int64
	At time.Time
	// ActorID is the console user's id ("" for the admin token or the command line); Actor is
	// its label (app.Actor.Label), kept even if the user is gone.
	ActorID    string
	Actor      string
	OrgID      string
	Action     string // e.g. "budget.cap_set", "key.revoke", "user.login"
	TargetKind string
	TargetID   string
	Details    map[string]any
}

// Default and largest page of AuditLog.
const (
	DefaultAuditPage = 100
	MaxAuditPage     = 1000
)

// Audit appends e to the audit log, stamped with the database clock (e.ID and e.At are
// ignored). EINVALID without an actor or action, or for an ActorID or OrgID that is not a uuid.
func (db *DB) Audit(ctx context.Context, e AuditEntry) error {
	if e.Actor == "" || e.Action == "" {
		return app.Errorf(app.EINVALID, "an audit entry needs an actor and an action")
	}
	var actorID, orgID any
	if e.ActorID != "" {
		if uuid.Validate(e.ActorID) != nil {
			return app.Errorf(app.EINVALID, "audit actor id %q is not a uuid", e.ActorID)
		}
		actorID = e.ActorID
	}
	if e.OrgID != "" {
		if uuid.Validate(e.OrgID) != nil {
			return app.Errorf(app.EINVALID, "audit org id %q is not a uuid", e.OrgID)
		}
		orgID = e.OrgID
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO audit_log (at, actor_id, actor, org_id, action, target_kind, target_id, details)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		db.now(), actorID, e.Actor, orgID, e.Action, e.TargetKind, e.TargetID, details)
	if err != nil {
		return fmt.Errorf("append audit log: %w", FormatError(err))
	}
	return nil
}

// AuditLog returns up to limit entries, newest first, with ids below beforeID (0: from the
// newest), for paging. orgID "" returns the entries of ALL orgs and the gateway-wide ones:
// that view is for operators only, and the caller checks it. Any other orgID returns only that
// org's entries, or ENOTFOUND for an unknown org. limit <= 0 means DefaultAuditPage; it is
// capped at MaxAuditPage.
func (db *DB) AuditLog(ctx context.Context, orgID string, limit int, beforeID int64) ([]AuditEntry, error) {
	if err := db.checkScope(ctx, orgID); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultAuditPage
	}
	limit = min(limit, MaxAuditPage)
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	// Two statements rather than one with "$1 IS NULL OR": each keeps its own index path under
	// the pool's generic plans (audit_log_org for an org, the primary key for all).
	const cols = `SELECT id, at, coalesce(actor_id::text, ''), actor, coalesce(org_id::text, ''),
			action, target_kind, target_id, details FROM audit_log `
	var rows pgx.Rows
	if orgID == "" {
		rows, _ = db.Pool.Query(ctx, cols+`WHERE id < $1 ORDER BY id DESC LIMIT $2`, beforeID, limit)
	} else {
		rows, _ = db.Pool.Query(ctx, cols+`WHERE org_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, orgID, beforeID, limit)
	}
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
