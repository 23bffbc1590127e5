package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Alert events are written by triggers (migrations/0003) in the transaction that commits the
// spend that crossed a threshold; this file holds the rest of the alert pipeline's SQL: the
// channels, the fan-out of events into deliveries, the claim of due deliveries by workers, and
// the delivery log.
//
// Scope: orgID "" means the operator's scope (the global node's alerts and channels); any
// other value is an org id. Every statement filters on it.

// scopeArg turns an org scope into a query argument: NULL for the operator's scope.
func scopeArg(orgID string) any {
	if orgID == "" {
		return nil
	}
	return orgID
}

// checkScope returns ENOTFOUND for an org scope that is not a known org.
func (db *DB) checkScope(ctx context.Context, orgID string) error {
	if orgID == "" {
		return nil
	}
	_, err := db.Org(ctx, orgID)
	return err
}

const channelCols = `id::text, coalesce(org_id::text, ''), name, kind, emails, coalesce(url, ''),
	coalesce(secret, ''), coalesce(prev_secret, ''), prev_secret_expires_at, enabled, managed, created_at`

func scanChannel(row pgx.CollectableRow) (app.AlertChannel, error) {
	var ch app.AlertChannel
	var kind, secret, prev string
	var prevExp *time.Time
	err := row.Scan(&ch.ID, &ch.OrgID, &ch.Name, &kind, &ch.Emails, &ch.URL, &secret, &prev, &prevExp,
		&ch.Enabled, &ch.Managed, &ch.CreatedAt)
	ch.Kind = app.ChannelKind(kind)
	if secret != "" {
		ch.Secrets = []string{secret}
	}
	if prev != "" {
		ch.PrevSecret, ch.PrevSecretExpires = prev, prevExp
	}
	return ch, err
}

// CreateAlertChannel inserts a channel in the scope orgID. The caller validates the emails or
// URL and generates the webhook secret. ENOTFOUND for an unknown org.
func (db *DB) CreateAlertChannel(ctx context.Context, ch app.AlertChannel) (app.AlertChannel, error) {
	if err := db.checkScope(ctx, ch.OrgID); err != nil {
		return app.AlertChannel{}, err
	}
	ch.ID = uuid.NewString()
	ch.CreatedAt = db.now()
	var secret, url any
	if ch.Kind == app.ChannelWebhook {
		if len(ch.Secrets) == 0 {
			return app.AlertChannel{}, app.Errorf(app.EINVALID, "a webhook channel needs a signing secret")
		}
		secret, url = ch.Secrets[0], ch.URL
	}
	if ch.Emails == nil {
		ch.Emails = []string{}
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO alert_channels (id, org_id, name, kind, emails, url, secret, enabled,
			managed, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false, $9, $9)`,
		ch.ID, scopeArg(ch.OrgID), ch.Name, ch.Kind, ch.Emails, url, secret, ch.Enabled, ch.CreatedAt)
	if err != nil {
		return app.AlertChannel{}, fmt.Errorf("insert alert channel: %w", FormatError(err))
	}
	return ch, nil
}

// AlertChannels lists the scope's channels (deleted ones excluded), oldest first.
func (db *DB) AlertChannels(ctx context.Context, orgID string) ([]app.AlertChannel, error) {
	if err := db.checkScope(ctx, orgID); err != nil {
		return nil, err
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+channelCols+` FROM alert_channels
		WHERE org_id IS NOT DISTINCT FROM $1 AND deleted_at IS NULL ORDER BY created_at, id`, scopeArg(orgID))
	chs, err := pgx.CollectRows(rows, scanChannel)
	if err != nil {
		return nil, fmt.Errorf("list alert channels: %w", FormatError(err))
	}
	return chs, nil
}

// AlertChannel returns one channel of the scope, or ENOTFOUND.
func (db *DB) AlertChannel(ctx context.Context, orgID, id string) (app.AlertChannel, error) {
	if uuid.Validate(id) != nil {
		return app.AlertChannel{}, app.Errorf(app.ENOTFOUND, "alert channel %q not found", id)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+channelCols+` FROM alert_channels
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM $2 AND deleted_at IS NULL`, id, scopeArg(orgID))
	ch, err := pgx.CollectExactlyOneRow(rows, scanChannel)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.AlertChannel{}, app.Errorf(app.ENOTFOUND, "alert channel %q not found", id)
	}
	if err != nil {
		return app.AlertChannel{}, fmt.Errorf("select alert channel: %w", FormatError(err))
	}
	return ch, nil
}

// ChannelPatch changes some fields of a channel; nil fields stay as they are.
type ChannelPatch struct {
	Name    *string
	Emails  []string
	URL     *string
	Enabled *bool
}

// UpdateAlertChannel applies p to a channel of the scope. ENOTFOUND for an unknown channel,
// EFORBIDDEN for a channel the config file manages, EINVALID for a field of the wrong kind.
func (db *DB) UpdateAlertChannel(ctx context.Context, orgID, id string, p ChannelPatch) (app.AlertChannel, error) {
	ch, err := db.AlertChannel(ctx, orgID, id)
	if err != nil {
		return app.AlertChannel{}, err
	}
	if ch.Managed {
		return app.AlertChannel{}, app.Errorf(app.EFORBIDDEN, "alert channel %q is defined by the config file (alerts.operator_emails); change it there", id)
	}
	if p.Emails != nil && ch.Kind != app.ChannelEmail {
		return app.AlertChannel{}, app.Errorf(app.EINVALID, "'emails' applies to email channels only")
	}
	if p.URL != nil && ch.Kind != app.ChannelWebhook {
		return app.AlertChannel{}, app.Errorf(app.EINVALID, "'url' applies to webhook channels only")
	}
	_, err = db.Pool.Exec(ctx, `UPDATE alert_channels SET name = coalesce($3, name), emails = coalesce($4, emails),
			url = coalesce($5, url), enabled = coalesce($6, enabled), updated_at = $7
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM $2 AND deleted_at IS NULL`,
		id, scopeArg(orgID), p.Name, p.Emails, p.URL, p.Enabled, db.now())
	if err != nil {
		return app.AlertChannel{}, fmt.Errorf("update alert channel: %w", FormatError(err))
	}
	return db.AlertChannel(ctx, orgID, id)
}

// DeleteAlertChannel removes a channel of the scope. Its delivery log is kept; its pending
// deliveries fail at their next attempt. ENOTFOUND, or EFORBIDDEN for a managed channel.
func (db *DB) DeleteAlertChannel(ctx context.Context, orgID, id string) error {
	ch, err := db.AlertChannel(ctx, orgID, id)
	if err != nil {
		return err
	}
	if ch.Managed {
		return app.Errorf(app.EFORBIDDEN, "alert channel %q is defined by the config file (alerts.operator_emails); change it there", id)
	}
	_, err = db.Pool.Exec(ctx, `UPDATE alert_channels SET deleted_at = $3, enabled = false, updated_at = $3
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM $2 AND deleted_at IS NULL`, id, scopeArg(orgID), db.now())
	if err != nil {
		return fmt.Errorf("delete alert channel: %w", FormatError(err))
	}
	return nil
}

// RotateWebhookSecret makes secret the channel's signing secret; the old one keeps signing
// (a second signature in the header) for overlap, so receivers can switch without losing a
// message. ENOTFOUND, or EINVALID for an email channel.
func (db *DB) RotateWebhookSecret(ctx context.Context, orgID, id, secret string, overlap time.Duration) (app.AlertChannel, error) {
	ch, err := db.AlertChannel(ctx, orgID, id)
	if err != nil {
		return app.AlertChannel{}, err
	}
	if ch.Kind != app.ChannelWebhook {
		return app.AlertChannel{}, app.Errorf(app.EINVALID, "only webhook channels have a signing secret")
	}
	now := db.now()
	_, err = db.Pool.Exec(ctx, `UPDATE alert_channels SET prev_secret = secret, prev_secret_expires_at = $3,
			secret = $4, updated_at = $5
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM $2 AND deleted_at IS NULL`,
		id, scopeArg(orgID), now.Add(overlap), secret, now)
	if err != nil {
		return app.AlertChannel{}, fmt.Errorf("rotate webhook secret: %w", FormatError(err))
	}
	return db.AlertChannel(ctx, orgID, id)
}

// SyncOperatorEmails makes the config file's operator addresses one managed email channel of
// the operator's scope (id fixed, so every gateway process writes the same row); an empty list
// disables it.
func (db *DB) SyncOperatorEmails(ctx context.Context, emails []string) error {
	const id = "00000000-0000-0000-0000-0000000000a1"
	now := db.now()
	enabled := len(emails) > 0
	if !enabled {
		_, err := db.Pool.Exec(ctx, `UPDATE alert_channels SET enabled = false, updated_at = $2 WHERE id = $1 AND enabled`, id, now)
		if err != nil {
			return fmt.Errorf("disable operator channel: %w", FormatError(err))
		}
		return nil
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO alert_channels (id, org_id, name, kind, emails, enabled, managed,
			created_at, updated_at)
		VALUES ($1, NULL, 'operator (config)', 'email', $2, true, true, $3, $3)
		ON CONFLICT (id) DO UPDATE SET emails = excluded.emails, enabled = true, deleted_at = NULL,
			updated_at = excluded.updated_at
		WHERE alert_channels.emails IS DISTINCT FROM excluded.emails OR NOT alert_channels.enabled`,
		id, emails, now)
	if err != nil {
		return fmt.Errorf("sync operator channel: %w", FormatError(err))
	}
	return nil
}

// eventSelect reads events with the names of their org and node, for rendering and listing.
const eventSelect = `SELECT e.id::text, e.kind, coalesce(e.org_id::text, ''), coalesce(o.name, ''), e.node_kind,
		e.node_id::text,
		coalesce(CASE e.node_kind WHEN 'org' THEN o.name WHEN 'team' THEN t.name WHEN 'member' THEN m.email
			WHEN 'key' THEN k.name || ' (' || k.prefix || '…)' ELSE '' END, ''),
		e.period, e.currency, coalesce(e.threshold, 0), coalesce(e.crossed, '{}'),
		-- an overrun event shows its node's counters as they are when it is read (they include
		-- the overrun: the event is written in the transaction that commits it)
		CASE WHEN e.kind = 'budget.overrun' THEN coalesce(nb.spent, 0) ELSE e.spent END,
		CASE WHEN e.kind = 'budget.overrun' THEN coalesce(nb.reserved, 0) ELSE e.reserved END,
		CASE WHEN e.kind = 'budget.overrun' THEN nb.cap ELSE e.cap END,
		coalesce(e.request_id, ''), coalesce(e.model, ''), coalesce(e.amount, 0), coalesce(e.actual, 0),
		e.created_at, coalesce(e.channel_id::text, ''), coalesce(e.provider, ''), coalesce(e.code, ''),
		coalesce(e.message, ''), e.reset_at
	FROM alert_events e
	LEFT JOIN orgs o ON o.id = e.org_id
	LEFT JOIN teams t ON e.node_kind = 'team' AND t.id = e.node_id
	LEFT JOIN members m ON e.node_kind = 'member' AND m.id = e.node_id
	LEFT JOIN api_keys k ON e.node_kind = 'key' AND k.id = e.node_id
	LEFT JOIN budgets nb ON e.kind = 'budget.overrun' AND nb.node_kind = e.node_kind AND nb.node_id = e.node_id
		AND nb.period = e.period`

type eventRow struct {
	app.AlertEvent
	channelID string // a test event's one channel
}

func scanEvent(row pgx.CollectableRow) (eventRow, error) {
	var e eventRow
	var kind, nodeKind string
	var reset *time.Time
	err := row.Scan(&e.ID, &kind, &e.OrgID, &e.OrgName, &nodeKind, &e.Node.ID, &e.NodeName, &e.Period,
		&e.Currency, &e.Threshold, &e.Crossed, &e.Spent, &e.Reserved, &e.Cap, &e.RequestID, &e.Model,
		&e.Amount, &e.Actual, &e.CreatedAt, &e.channelID, &e.Provider, &e.Code, &e.Message, &reset)
	if reset != nil {
		e.ResetAt = *reset
	}
	e.Kind = app.AlertKind(kind)
	e.Node.Kind = app.NodeKind(nodeKind)
	if e.Node.Kind == app.NodeGlobal {
		e.NodeName = ""
	}
	return e, err
}

// AlertEvents lists the scope's alert events, newest first.
func (db *DB) AlertEvents(ctx context.Context, orgID string, limit int) ([]app.AlertEvent, error) {
	if err := db.checkScope(ctx, orgID); err != nil {
		return nil, err
	}
	rows, _ := db.Pool.Query(ctx, eventSelect+` WHERE e.org_id IS NOT DISTINCT FROM $1
		ORDER BY e.created_at DESC, e.id LIMIT $2`, scopeArg(orgID), limit)
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list alert events: %w", FormatError(err))
	}
	out := make([]app.AlertEvent, len(evs))
	for i := range evs {
		out[i] = evs[i].AlertEvent
	}
	return out, nil
}

// Rendered is a message rendered for one channel: an email's subject and text, or a webhook's
// JSON body (Subject empty).
type Rendered struct {
	Subject string
	Body    string
}

// RenderFunc renders an event for a channel.
type RenderFunc func(ev app.AlertEvent, ch app.AlertChannel) (Rendered, error)

// FanOutAlerts takes up to limit events not yet fanned out (skipping those another worker
// holds), renders each for every enabled channel of its scope, and records one delivery per
// event and channel, due now and retried until now+retryFor, in one transaction. An event of a
// scope without channels is fanned out to nothing: it stays listed. It returns the number of
// events handled.
func (db *DB) FanOutAlerts(ctx context.Context, render RenderFunc, retryFor time.Duration, limit int) (int, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("fan out alerts: %w", FormatError(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	rows, _ := tx.Query(ctx, eventSelect+` WHERE e.fanned_out_at IS NULL ORDER BY e.created_at, e.id
		LIMIT $1 FOR UPDATE OF e SKIP LOCKED`, limit)
	evs, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return 0, fmt.Errorf("fan out alerts: read events: %w", FormatError(err))
	}
	if len(evs) == 0 {
		return 0, nil
	}
	var orgs []string
	operator := false
	for _, e := range evs {
		if e.OrgID == "" {
			operator = true
		} else {
			orgs = append(orgs, e.OrgID)
		}
	}
	rows, _ = tx.Query(ctx, `SELECT `+channelCols+` FROM alert_channels
		WHERE deleted_at IS NULL AND enabled AND (org_id = ANY($1::uuid[]) OR ($2 AND org_id IS NULL))
		ORDER BY created_at, id`, orgs, operator)
	chs, err := pgx.CollectRows(rows, scanChannel)
	if err != nil {
		return 0, fmt.Errorf("fan out alerts: read channels: %w", FormatError(err))
	}
	now := db.now()
	b := &pgx.Batch{}
	ids := make([]string, 0, len(evs))
	for _, e := range evs {
		ids = append(ids, e.ID)
		for _, ch := range chs {
			if ch.OrgID != e.OrgID || (e.channelID != "" && ch.ID != e.channelID) {
				continue
			}
			r, err := render(e.AlertEvent, ch)
			if err != nil {
				return 0, fmt.Errorf("fan out alerts: render event %s for channel %s: %w", e.ID, ch.ID, err)
			}
			b.Queue(`INSERT INTO alert_deliveries (id, event_id, channel_id, org_id, kind, status, target, subject,
					body, next_attempt_at, give_up_at, created_at)
				VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $9)
				ON CONFLICT (event_id, channel_id) DO NOTHING`,
				uuid.NewString(), e.ID, ch.ID, scopeArg(e.OrgID), ch.Kind, channelTarget(ch), r.Subject, r.Body,
				now, now.Add(retryFor))
		}
	}
	b.Queue(`UPDATE alert_events SET fanned_out_at = $2 WHERE id = ANY($1::uuid[])`, ids, now)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("fan out alerts: insert deliveries: %w", FormatError(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("fan out alerts: commit: %w", FormatError(err))
	}
	return len(evs), nil
}

// channelTarget is what a delivery to ch is addressed to, for the log.
func channelTarget(ch app.AlertChannel) string {
	if ch.Kind == app.ChannelWebhook {
		return ch.URL
	}
	return strings.Join(ch.Emails, ", ")
}

// Claimed is a delivery a worker holds until Delivery's lease ends, with its channel as it is
// now (a fixed URL or a rotated secret applies to retries).
type Claimed struct {
	Delivery app.AlertDelivery
	Channel  app.AlertChannel
	// ChannelGone is true when the channel was deleted or disabled since the fan-out.
	ChannelGone bool
}

const deliveryCols = `d.id::text, d.event_id::text, d.channel_id::text, coalesce(d.org_id::text, ''), d.kind,
	d.status, d.target, d.subject, d.body, d.attempts, d.next_attempt_at, d.last_attempt_at,
	coalesce(d.last_status_code, 0), coalesce(d.last_error, ''), d.created_at, d.sent_at`

func scanDelivery(row pgx.CollectableRow) (app.AlertDelivery, error) {
	var d app.AlertDelivery
	var kind, status string
	err := row.Scan(&d.ID, &d.EventID, &d.ChannelID, &d.OrgID, &kind, &status, &d.Target, &d.Subject, &d.Body,
		&d.Attempts, &d.NextAttemptAt, &d.LastAttemptAt, &d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.SentAt)
	d.Kind, d.Status = app.ChannelKind(kind), app.DeliveryStatus(status)
	return d, err
}

// ClaimAlertDeliveries takes up to limit pending deliveries that are due and not held by a
// live worker, counts an attempt on each and holds them for lease (which must be longer than
// one send, so a live worker is never overtaken). A worker that dies mid-send leaves its
// deliveries to be claimed again when the lease ends. onlyID, when set, claims that one
// delivery whatever its due time (a test send).
func (db *DB) ClaimAlertDeliveries(ctx context.Context, lease time.Duration, limit int, onlyID string) ([]Claimed, error) {
	now := db.now()
	rows, _ := db.Pool.Query(ctx, `WITH due AS (
			SELECT id FROM alert_deliveries
			WHERE status = 'pending' AND (locked_until IS NULL OR locked_until <= $1)
				AND CASE WHEN $4 = '' THEN next_attempt_at <= $1 ELSE id::text = $4 END
			ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
		upd AS (
			UPDATE alert_deliveries d SET attempts = d.attempts + 1, locked_until = $3, last_attempt_at = $1
			FROM due WHERE d.id = due.id RETURNING d.*)
		SELECT `+deliveryCols+`, c.id::text, coalesce(c.org_id::text, ''), c.name, c.kind, c.emails,
			coalesce(c.url, ''), coalesce(c.secret, ''), coalesce(c.prev_secret, ''), c.prev_secret_expires_at,
			c.enabled, c.managed, c.created_at, c.deleted_at IS NOT NULL OR NOT c.enabled
		FROM upd d JOIN alert_channels c ON c.id = d.channel_id ORDER BY d.next_attempt_at, d.id`,
		now, limit, now.Add(lease), onlyID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		var kind, status, chKind, secret, prev string
		var prevExp *time.Time
		d := &c.Delivery
		ch := &c.Channel
		err := row.Scan(&d.ID, &d.EventID, &d.ChannelID, &d.OrgID, &kind, &status, &d.Target, &d.Subject, &d.Body,
			&d.Attempts, &d.NextAttemptAt, &d.LastAttemptAt, &d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.SentAt,
			&ch.ID, &ch.OrgID, &ch.Name, &chKind, &ch.Emails, &ch.URL, &secret, &prev, &prevExp, &ch.Enabled,
			&ch.Managed, &ch.CreatedAt, &c.ChannelGone)
		d.Kind, d.Status, ch.Kind = app.ChannelKind(kind), app.DeliveryStatus(status), app.ChannelKind(chKind)
		if secret != "" {
			ch.Secrets = []string{secret}
		}
		// During a rotation the previous secret signs too, until it expires.
		if prev != "" && prevExp != nil && prevExp.After(now) {
			ch.Secrets = append(ch.Secrets, prev)
			ch.PrevSecret, ch.PrevSecretExpires = prev, prevExp
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim alert deliveries: %w", FormatError(err))
	}
	return out, nil
}

// Attempt is the outcome of one send.
type Attempt struct {
	Started, Finished time.Time
	OK                bool
	StatusCode        int
	Error             string
	Target            string
	// Retry is when to try again after a failure; a time past the delivery's give-up time
	// fails it for good, and so does Final (a failure no retry can mend).
	Retry time.Time
	Final bool
}

// FinishAlertAttempt records the outcome of attempt number c.Delivery.Attempts in the log and
// on the delivery: sent, pending again at a.Retry, or failed when a.Retry passes the give-up
// time. A failure changes the delivery only if it is still held by this attempt (a worker
// whose lease ran out does not overwrite the one that took over); a success always counts, as
// the message did go out. It returns the delivery's new status.
func (db *DB) FinishAlertAttempt(ctx context.Context, c Claimed, a Attempt) (app.DeliveryStatus, error) {
	d := c.Delivery
	var status string
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO alert_attempts (delivery_id, attempt, started_at, finished_at, ok,
				status_code, error) VALUES ($1, $2, $3, $4, $5, nullif($6, 0), nullif($7, ''))
			ON CONFLICT (delivery_id, attempt) DO NOTHING`,
			d.ID, d.Attempts, a.Started, a.Finished, a.OK, a.StatusCode, a.Error); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE alert_deliveries SET
				status = CASE WHEN $3 THEN 'sent' WHEN $9 OR $6::timestamptz >= give_up_at THEN 'failed' ELSE 'pending' END,
				sent_at = CASE WHEN $3 THEN $4::timestamptz END,
				next_attempt_at = CASE WHEN $3 THEN next_attempt_at ELSE $6 END,
				locked_until = NULL, last_status_code = nullif($5, 0), last_error = nullif($7, ''),
				target = coalesce(nullif($8, ''), target)
			WHERE id = $1 AND status = 'pending' AND (attempts = $2 OR $3)
			RETURNING status`,
			d.ID, d.Attempts, a.OK, a.Finished, a.StatusCode, a.Retry, a.Error, a.Target, a.Final).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `SELECT status FROM alert_deliveries WHERE id = $1`, d.ID).Scan(&status)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record alert attempt: %w", FormatError(err))
	}
	return app.DeliveryStatus(status), nil
}

// DeliveryFilter selects deliveries of a scope.
type DeliveryFilter struct {
	Status app.DeliveryStatus
	Limit  int
}

// AlertDeliveries lists the scope's deliveries, newest first.
func (db *DB) AlertDeliveries(ctx context.Context, orgID string, f DeliveryFilter) ([]app.AlertDelivery, error) {
	if err := db.checkScope(ctx, orgID); err != nil {
		return nil, err
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+deliveryCols+` FROM alert_deliveries d
		WHERE d.org_id IS NOT DISTINCT FROM $1 AND ($2 = '' OR d.status = $2)
		ORDER BY d.created_at DESC, d.id LIMIT $3`, scopeArg(orgID), string(f.Status), f.Limit)
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list alert deliveries: %w", FormatError(err))
	}
	return ds, nil
}

// AttemptLog is one row of a delivery's log.
type AttemptLog struct {
	Attempt    int
	StartedAt  time.Time
	FinishedAt time.Time
	OK         bool
	StatusCode int
	Error      string
}

// AlertDelivery returns one delivery of the scope with its attempt log, or ENOTFOUND.
func (db *DB) AlertDelivery(ctx context.Context, orgID, id string) (app.AlertDelivery, []AttemptLog, error) {
	if uuid.Validate(id) != nil {
		return app.AlertDelivery{}, nil, app.Errorf(app.ENOTFOUND, "alert delivery %q not found", id)
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+deliveryCols+` FROM alert_deliveries d
		WHERE d.id = $1 AND d.org_id IS NOT DISTINCT FROM $2`, id, scopeArg(orgID))
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.AlertDelivery{}, nil, app.Errorf(app.ENOTFOUND, "alert delivery %q not found", id)
	}
	if err != nil {
		return app.AlertDelivery{}, nil, fmt.Errorf("select alert delivery: %w", FormatError(err))
	}
	rows, _ = db.Pool.Query(ctx, `SELECT attempt, started_at, finished_at, ok, coalesce(status_code, 0),
			coalesce(error, '')
		FROM alert_attempts WHERE delivery_id = $1 ORDER BY attempt`, id)
	log, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AttemptLog, error) {
		var a AttemptLog
		err := row.Scan(&a.Attempt, &a.StartedAt, &a.FinishedAt, &a.OK, &a.StatusCode, &a.Error)
		return a, err
	})
	if err != nil {
		return app.AlertDelivery{}, nil, fmt.Errorf("select alert attempts: %w", FormatError(err))
	}
	return d, log, nil
}

// ResendAlertDelivery makes a delivery of the scope due now again, with the same message id and
// body, retried until now+retryFor. ENOTFOUND for an unknown delivery.
func (db *DB) ResendAlertDelivery(ctx context.Context, orgID, id string, retryFor time.Duration) (app.AlertDelivery, error) {
	if uuid.Validate(id) != nil {
		return app.AlertDelivery{}, app.Errorf(app.ENOTFOUND, "alert delivery %q not found", id)
	}
	now := db.now()
	tag, err := db.Pool.Exec(ctx, `UPDATE alert_deliveries SET status = 'pending', next_attempt_at = $3,
			give_up_at = $4, sent_at = NULL
		WHERE id = $1 AND org_id IS NOT DISTINCT FROM $2`, id, scopeArg(orgID), now, now.Add(retryFor))
	if err != nil {
		return app.AlertDelivery{}, fmt.Errorf("resend alert delivery: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return app.AlertDelivery{}, app.Errorf(app.ENOTFOUND, "alert delivery %q not found", id)
	}
	d, _, err := db.AlertDelivery(ctx, orgID, id)
	return d, err
}

// CreateTestAlert writes a test event for one channel of the scope and its single delivery,
// due now and given up after its first attempt (a test reports, it does not retry). It returns
// the delivery's id. ENOTFOUND for an unknown channel.
func (db *DB) CreateTestAlert(ctx context.Context, orgID, channelID string, render RenderFunc) (string, error) {
	ch, err := db.AlertChannel(ctx, orgID, channelID)
	if err != nil {
		return "", err
	}
	now := db.now()
	ev := app.AlertEvent{ID: uuid.NewString(), Kind: app.AlertTest, OrgID: orgID, Period: "", CreatedAt: now,
		Node: app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, Currency: app.JPY}
	if orgID != "" {
		o, err := db.Org(ctx, orgID)
		if err != nil {
			return "", err
		}
		ev.OrgName, ev.Node, ev.NodeName, ev.Currency = o.Name, app.Node{Kind: app.NodeOrg, ID: orgID}, o.Name, o.Currency
	}
	r, err := render(ev, ch)
	if err != nil {
		return "", fmt.Errorf("render test alert: %w", err)
	}
	did := uuid.NewString()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO alert_events (id, kind, org_id, node_kind, node_id, period, currency, channel_id, created_at,
			fanned_out_at)
		VALUES ($1, 'alert.test', $2, $3, $4, $5, $6, $7, $8, $8)`,
		ev.ID, scopeArg(orgID), ev.Node.Kind, ev.Node.ID, ev.Period, ev.Currency, ch.ID, now)
	b.Queue(`INSERT INTO alert_deliveries (id, event_id, channel_id, org_id, kind, status, target, subject, body,
			next_attempt_at, give_up_at, created_at)
		VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $9, $9)`,
		did, ev.ID, ch.ID, scopeArg(orgID), ch.Kind, channelTarget(ch), r.Subject, r.Body, now)
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		return "", fmt.Errorf("create test alert: %w", FormatError(err))
	}
	return did, nil
}
