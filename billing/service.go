package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"yosan/app"
	"yosan/db"
)

// Service runs the month close and the Stripe mirror on the database: the admin API, the
// `yosan billing` commands and the scheduler in every gateway process share it.
type Service struct {
	DB     *db.DB
	Config Config
	// InvoicePrefix and CreditNotePrefix start the document numbers ("INV-000001").
	InvoicePrefix    string
	CreditNotePrefix string
	// Stripe mirrors the documents; nil means no Stripe.
	Stripe *Stripe
	// WebhookSecret verifies Stripe's webhooks (whsec_...).
	WebhookSecret string
	// CloseDelay is how long after a period's end (in the org's time zone) the scheduler waits
	// before closing it.
	CloseDelay time.Duration
	// Lease bounds one Stripe sync of one document.
	Lease time.Duration
	Log   *slog.Logger
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// OrgClose is the month close of one org.
type OrgClose struct {
	OrgID  string
	Result db.CloseResult
	// Err is why this org's close did not happen (ECONFLICT while reservations are pending).
	Err error
}

// assemble builds invoices with the service's settings and the database's clock.
func (s *Service) assemble(f app.InvoiceFacts) (app.Invoice, error) {
	cfg := s.Config
	cfg.Now = s.DB.Now
	return Assemble(cfg, f)
}

// ClosePeriod closes period for every org that has it (or only orgID): one invoice per org
// with settled usage, numbered in order. It is safe to re-run: an org already closed answers
// its standing invoice and nothing is created twice. One org's failure (pending reservations)
// does not stop the others; it is in its OrgClose. The error is for a bad period or a database
// failure listing the orgs.
func (s *Service) ClosePeriod(ctx context.Context, period, orgID string) ([]OrgClose, error) {
	if err := s.Config.Validate(); err != nil {
		return nil, app.WrapError(app.EINVALID, err, "billing is not configured: set billing.issuer (name and registration_number) in the config file ("+app.ErrorMessage(err)+")")
	}
	if !db.ValidPeriod(period) {
		return nil, app.Errorf(app.EINVALID, "period %q must be a month such as 2026-11", period)
	}
	var orgs []string
	if orgID != "" {
		orgs = []string{orgID}
	} else {
		var err error
		if orgs, err = s.DB.OrgsWithPeriod(ctx, period); err != nil {
			return nil, err
		}
	}
	out := make([]OrgClose, 0, len(orgs))
	for _, id := range orgs {
		res, err := s.DB.CloseOrgPeriod(ctx, id, period, s.Config.Issuer.RegistrationNumber, s.InvoicePrefix, s.assemble)
		out = append(out, OrgClose{OrgID: id, Result: res, Err: err})
		if err != nil {
			s.log().Warn("month close", "org", id, "period", period, "err", err)
		} else if res.Created {
			s.log().Info("invoice issued", "org", id, "period", period, "number", res.Invoice.Number, "total", res.Invoice.Total)
		}
	}
	return out, nil
}

// CloseDue closes every org-period that ended at least CloseDelay ago in its org's time zone,
// and returns how many invoices it issued. Periods with pending reservations wait for the next
// round.
func (s *Service) CloseDue(ctx context.Context) (int, error) {
	ps, err := s.DB.PeriodsToClose(ctx)
	if err != nil {
		return 0, err
	}
	now := s.DB.Now()
	n := 0
	for _, p := range ps {
		loc, err := time.LoadLocation(p.TimeZone)
		if err != nil {
			continue
		}
		_, end, err := db.PeriodBounds(p.Period, loc)
		if err != nil || now.Before(end.Add(s.CloseDelay)) {
			continue
		}
		cs, err := s.ClosePeriod(ctx, p.Period, p.OrgID)
		if err != nil {
			return n, err
		}
		for _, c := range cs {
			if c.Err == nil && c.Result.Created {
				n++
			}
		}
	}
	return n, nil
}

// Credit issues a credit note negating invoice id of org and reopens its period, so the next
// close issues the corrected invoice. See db.CreditInvoice for the errors.
func (s *Service) Credit(ctx context.Context, orgID, id string) (app.Invoice, error) {
	if err := s.Config.Validate(); err != nil {
		return app.Invoice{}, app.WrapError(app.EINVALID, err, "billing is not configured: set billing.issuer (name and registration_number) in the config file ("+app.ErrorMessage(err)+")")
	}
	return s.DB.CreditInvoice(ctx, orgID, id, s.Config.Issuer.RegistrationNumber, s.CreditNotePrefix)
}

// SyncStripe mirrors the documents due for a Stripe sync (or only document onlyID) and
// returns how many it synced and how many failed (each failure is kept on the document and
// retried with backoff). Without Stripe it does nothing.
func (s *Service) SyncStripe(ctx context.Context, onlyID string) (synced, failed int, err error) {
	if s.Stripe == nil {
		return 0, 0, nil
	}
	lease := s.Lease
	if lease <= 0 {
		lease = 2 * time.Minute
	}
	// One document per claim: each sync is bounded by half the lease, so no claim outlives
	// its lease and lets another process sync the same document at the same time. At most
	// 20 documents per call, as before.
	for range 20 {
		jobs, err := s.DB.ClaimStripeJobs(ctx, lease, 1, onlyID)
		if err != nil {
			return synced, failed, err
		}
		if len(jobs) == 0 {
			break
		}
		j := jobs[0]
		if err := s.syncOne(ctx, j, lease); err != nil {
			failed++
			msg := app.OneLine(err.Error(), 500)
			next := s.DB.Now().Add(stripeBackoff(j.Attempts))
			s.log().Warn("stripe sync failed", "invoice", j.Invoice.Number, "attempt", j.Attempts, "retry_at", next, "err", msg)
			if ferr := s.DB.FinishStripeSync(context.WithoutCancel(ctx), j.Invoice.ID, msg, next); ferr != nil {
				return synced, failed, ferr
			}
			continue
		}
		synced++
		if err := s.DB.FinishStripeSync(context.WithoutCancel(ctx), j.Invoice.ID, "", time.Time{}); err != nil {
			return synced, failed, err
		}
		if onlyID != "" || ctx.Err() != nil {
			break
		}
	}
	return synced, failed, nil
}

// stripeBackoff is the wait before the next sync attempt: 30 s doubling to 1 h, ±20 %.
func stripeBackoff(attempt int) time.Duration {
	d := 30 * time.Second
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (s *Service) syncOne(ctx context.Context, j db.StripeJob, lease time.Duration) error {
	var st SyncState
	if len(j.State) > 0 {
		if err := json.Unmarshal(j.State, &st); err != nil {
			return fmt.Errorf("decode stripe state: %w", err)
		}
	}
	if st.CustomerID == "" {
		st.CustomerID = j.Billing.StripeCustomerID
	}
	if j.Invoice.Kind == app.KindCreditNote {
		if j.CorrectedStripeInvoiceID == "" {
			return errors.New("the corrected invoice is not in Stripe yet; the credit note follows it")
		}
		st.InvoiceID = j.CorrectedStripeInvoiceID
	}
	cust := StripeCustomer{Name: j.Invoice.Recipient, Email: j.Billing.Email, TaxID: j.Billing.TaxID, OrgID: j.Invoice.OrgID}
	save := func(st SyncState) error {
		b, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encode stripe state: %w", err)
		}
		stripeInvoice := ""
		if j.Invoice.Kind == app.KindInvoice {
			stripeInvoice = st.InvoiceID
		}
		return s.DB.SaveStripeState(context.WithoutCancel(ctx), j.Invoice.OrgID, j.Invoice.ID, b, st.CustomerID, stripeInvoice)
	}
	sctx, cancel := context.WithTimeout(ctx, lease/2)
	defer cancel()
	_, err := s.Stripe.Sync(sctx, j.Invoice, cust, st, save)
	return err
}

// StripeWebhook applies a Stripe event (verified with WebhookSecret) to the document it is
// about. It returns the document's number ("" when the event is of another type or about an
// invoice Yosan did not make). EUNAUTHORIZED for a bad signature, EINVALID for a bad payload,
// ENOTFOUND when webhooks are not configured.
func (s *Service) StripeWebhook(ctx context.Context, payload []byte, sigHeader string) (string, error) {
	if s.WebhookSecret == "" {
		return "", app.Errorf(app.ENOTFOUND, "Stripe webhooks are not configured on this gateway (billing.stripe.webhook_secret_env)")
	}
	up, handled, err := ParseStripeWebhook(payload, sigHeader, s.WebhookSecret, s.DB.Now())
	if err != nil || !handled {
		return "", err
	}
	number, err := s.DB.SetInvoiceStatusFromStripe(ctx, up.StripeInvoiceID, up.YosanInvoiceID, up.Status)
	if err != nil {
		return "", err
	}
	if number != "" {
		s.log().Info("invoice status from stripe", "number", number, "status", up.Status, "event", up.EventID)
	}
	return number, nil
}

// Run closes due periods and syncs Stripe every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration, autoClose bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if autoClose {
			if n, err := s.CloseDue(ctx); err != nil && ctx.Err() == nil {
				s.log().Error("scheduled month close", "err", err)
			} else if n > 0 {
				s.log().Info("scheduled month close", "invoices", n)
			}
		}
		if _, _, err := s.SyncStripe(ctx, ""); err != nil && ctx.Err() == nil {
			s.log().Error("stripe sync", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
