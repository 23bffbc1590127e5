package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"yosan/app"
	"yosan/db"
)

// Worker defaults.
const (
	// DefaultRetryFor is how long a delivery is retried: more than a day, so a receiver down
	// over a whole night and morning still gets it.
	DefaultRetryFor = 26 * time.Hour
	// DefaultLease is how long a claimed delivery is held: longer than any one send (SMTP
	// sessions and webhook requests have their own, shorter, timeouts), so a live worker is
	// never overtaken, and short enough that a crashed worker's deliveries resume soon.
	DefaultLease = 2 * time.Minute
	// DefaultFirstRetry is the first wait between attempts; it doubles up to MaxRetry.
	DefaultFirstRetry = 30 * time.Second
	MaxRetry          = time.Hour
)

// Worker moves alerts from the outbox to people. Each round it fans new events out to their
// scope's channels (rendering each message once, so retries and re-sends send the same bytes
// under the same message id), then claims the deliveries that are due and sends them. Any
// number of workers (one per gateway process) may run at once: events and deliveries are
// claimed with SKIP LOCKED and leases. Delivery is at least once: a worker that dies after the
// receiver got a message but before recording it sends it again after its lease, under the same
// webhook-id / Message-ID, which is what receivers deduplicate on.
type Worker struct {
	DB *db.DB
	// Mailer sends email; nil means SMTP is not configured and email deliveries fail (and are
	// retried, so configuring SMTP and restarting within RetryFor still delivers them).
	Mailer *Mailer
	// Webhooks sends webhooks; nil means a default sender.
	Webhooks *WebhookSender
	// ConsoleURL is linked from every message.
	ConsoleURL string
	RetryFor   time.Duration
	Lease      time.Duration
	// FirstRetry is the wait after the first failed attempt; it doubles up to MaxRetry.
	FirstRetry time.Duration
	// Batch bounds the events fanned out per transaction; Parallel bounds the sends in flight
	// and the deliveries claimed at once (all of a claim are sent in one wave, well within the
	// lease, which the config keeps at twice a send's timeout or more).
	Batch    int
	Parallel int
	Log      *slog.Logger
	// Jitter returns a number in [0, 1) that spreads retries; nil means math/rand.
	Jitter func() float64
}

func (w *Worker) defaults() {
	if w.RetryFor <= 0 {
		w.RetryFor = DefaultRetryFor
	}
	if w.Lease <= 0 {
		w.Lease = DefaultLease
	}
	if w.FirstRetry <= 0 {
		w.FirstRetry = DefaultFirstRetry
	}
	if w.Batch <= 0 {
		w.Batch = 100
	}
	if w.Parallel <= 0 {
		w.Parallel = 8
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
	if w.Webhooks == nil {
		w.Webhooks = &WebhookSender{}
	}
	if w.Jitter == nil {
		w.Jitter = rand.Float64
	}
}

// Render renders ev for ch: an email's subject and text, or a webhook's JSON body.
func (w *Worker) Render(ev app.AlertEvent, ch app.AlertChannel) (db.Rendered, error) {
	if ch.Kind == app.ChannelWebhook {
		body, err := WebhookPayload(ev, w.ConsoleURL)
		if err != nil {
			return db.Rendered{}, err
		}
		return db.Rendered{Body: string(body)}, nil
	}
	subject, text := RenderEmail(ev, w.ConsoleURL)
	return db.Rendered{Subject: subject, Body: text}, nil
}

// Stats counts what one round did.
type Stats struct {
	Events  int // events fanned out
	Sent    int // deliveries sent
	Retried int // deliveries that failed and will be retried
	Failed  int // deliveries that failed for good
}

// RunOnce runs one round: it fans out every pending event and sends every due delivery (in
// claims of Parallel). It returns what it did and the first database error, if any.
func (w *Worker) RunOnce(ctx context.Context) (Stats, error) {
	w.defaults()
	var st Stats
	for {
		n, err := w.DB.FanOutAlerts(ctx, w.Render, w.RetryFor, w.Batch)
		st.Events += n
		if err != nil {
			return st, fmt.Errorf("alert round: %w", err)
		}
		if n < w.Batch {
			break
		}
	}
	for {
		// A claim no larger than one wave of sends: a claim of many, sent wave after wave,
		// could outlive its lease and be claimed and sent again by another process.
		claimed, err := w.DB.ClaimAlertDeliveries(ctx, w.Lease, w.Parallel, "")
		if err != nil {
			return st, fmt.Errorf("alert round: %w", err)
		}
		// Sends already claimed finish even when ctx ends (a shutdown): each is bounded by its
		// own timeout, and an interrupted send would only be repeated after the lease.
		results := w.deliverAll(context.WithoutCancel(ctx), claimed)
		for _, r := range results {
			if r.err != nil {
				return st, fmt.Errorf("alert round: %w", r.err)
			}
			switch {
			case r.status == app.DeliverySent:
				st.Sent++
			case r.status == app.DeliveryFailed:
				st.Failed++
			default:
				st.Retried++
			}
		}
		if len(claimed) < w.Parallel || ctx.Err() != nil {
			return st, nil
		}
	}
}

type result struct {
	status app.DeliveryStatus
	err    error
}

// deliverAll sends the claimed deliveries, at most Parallel at a time.
func (w *Worker) deliverAll(ctx context.Context, claimed []db.Claimed) []result {
	out := make([]result, len(claimed))
	sem := make(chan struct{}, w.Parallel)
	var wg sync.WaitGroup
	for i := range claimed {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			out[i].status, out[i].err = w.deliver(ctx, claimed[i])
		}(i)
	}
	wg.Wait()
	return out
}

// Run runs a round every interval until ctx ends, logging failures. It returns after the
// round in progress, whose claimed sends are completed and recorded.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	w.defaults()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := w.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			w.Log.Error("deliver alerts", "err", err)
		}
		if st != (Stats{}) {
			w.Log.Info("alerts delivered", "events", st.Events, "sent", st.Sent, "retrying", st.Retried, "failed", st.Failed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Backoff is the wait after failed attempt number attempt (1 for the first): first, doubling
// with each attempt up to MaxRetry (or first, if that is longer), spread by ±20 % with jitter
// in [0, 1).
func Backoff(first time.Duration, attempt int, jitter float64) time.Duration {
	d := first
	for i := 1; i < attempt && d < MaxRetry; i++ {
		d *= 2
	}
	d = min(d, max(MaxRetry, first))
	return time.Duration(float64(d) * (0.8 + 0.4*jitter))
}

// MessageID is the webhook-id of a delivery: the same on every retry and re-send.
func MessageID(deliveryID string) string {
	return "msg_" + strings.ReplaceAll(deliveryID, "-", "")
}

// deliver sends one claimed delivery and records the attempt, returning the new status. The
// error is a database error only: a failed send is an outcome, recorded for a retry.
func (w *Worker) deliver(ctx context.Context, c db.Claimed) (app.DeliveryStatus, error) {
	d := c.Delivery
	started := w.DB.Now()
	a := db.Attempt{Started: started}
	var err error
	switch {
	case c.ChannelGone:
		err, a.Final = errors.New("the channel was deleted or disabled"), true
	case c.Channel.Kind == app.ChannelWebhook:
		a.Target = c.Channel.URL
		sctx, cancel := context.WithTimeout(ctx, w.Lease/2)
		a.StatusCode, err = w.Webhooks.Send(sctx, c.Channel.URL, MessageID(d.ID), c.Channel.Secrets, started, []byte(d.Body))
		cancel()
	case c.Channel.Kind == app.ChannelEmail:
		a.Target = strings.Join(c.Channel.Emails, ", ")
		if w.Mailer == nil {
			err = errors.New("SMTP is not configured (alerts.smtp in the config file)")
			break
		}
		sctx, cancel := context.WithTimeout(ctx, w.Lease/2)
		err = w.Mailer.Send(sctx, d.ID, c.Channel.Emails, d.Subject, d.Body)
		cancel()
	default:
		err, a.Final = fmt.Errorf("unknown channel kind %q", c.Channel.Kind), true
	}
	a.Finished = w.DB.Now()
	if err != nil {
		a.Error = app.OneLine(err.Error(), 500)
		a.Retry = a.Finished.Add(Backoff(w.FirstRetry, d.Attempts, w.Jitter()))
		w.Log.Warn("alert delivery failed", "delivery", d.ID, "channel", c.Channel.ID, "attempt", d.Attempts, "err", err)
	} else {
		a.OK = true
	}
	// The outcome is recorded even when ctx ended during the send (a shutdown): it is what
	// happened, and it frees the delivery at once instead of at the end of the lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return w.DB.FinishAlertAttempt(rctx, c, a)
}

// SendTest sends a test message to one channel of the scope (orgID "" for the operator's)
// now, once, and returns the delivery as it ended (sent, or failed with the error). ENOTFOUND
// for an unknown channel.
func (w *Worker) SendTest(ctx context.Context, orgID, channelID string) (app.AlertDelivery, error) {
	w.defaults()
	id, err := w.DB.CreateTestAlert(ctx, orgID, channelID, w.Render)
	if err != nil {
		return app.AlertDelivery{}, err
	}
	claimed, err := w.DB.ClaimAlertDeliveries(ctx, w.Lease, 1, id)
	if err != nil {
		return app.AlertDelivery{}, err
	}
	for _, c := range claimed {
		if _, err := w.deliver(ctx, c); err != nil {
			return app.AlertDelivery{}, err
		}
	}
	d, _, err := w.DB.AlertDelivery(ctx, orgID, id)
	return d, err
}
