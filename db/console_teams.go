package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// TeamRoster is a team with its members, for the console's teams page.
type TeamRoster struct {
	app.Team
	Members []app.Member
	Keys    int64
}

// TeamRosters lists an org's teams with their members and key counts, in one statement.
func (db *DB) TeamRosters(ctx context.Context, orgID string) ([]TeamRoster, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT t.id::text, t.name, t.created_at,
			coalesce((SELECT count(*) FROM api_keys k WHERE k.team_id = t.id AND k.revoked_at IS NULL), 0),
			coalesce(array_agg(m.id::text ORDER BY m.email) FILTER (WHERE m.id IS NOT NULL), '{}'),
			coalesce(array_agg(m.email ORDER BY m.email) FILTER (WHERE m.id IS NOT NULL), '{}'),
			coalesce(array_agg(m.created_at ORDER BY m.email) FILTER (WHERE m.id IS NOT NULL), '{}')
		FROM teams t LEFT JOIN members m ON m.team_id = t.id AND m.org_id = t.org_id
		WHERE t.org_id = $1 GROUP BY t.id ORDER BY t.name, t.id`, orgID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TeamRoster, error) {
		var r TeamRoster
		var ids, emails []string
		var created []time.Time
		if err := row.Scan(&r.ID, &r.Name, &r.CreatedAt, &r.Keys, &ids, &emails, &created); err != nil {
			return r, err
		}
		r.OrgID = orgID
		for i := range ids {
			r.Members = append(r.Members, app.Member{ID: ids[i], OrgID: orgID, TeamID: r.ID, Email: emails[i], CreatedAt: created[i]})
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", FormatError(err))
	}
	return out, nil
}
