package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"yosan/app"
	"yosan/billing"
	"yosan/db"
)

// newBilling builds the billing service from the config.
func newBilling(cfg *Config, d *db.DB, log *slog.Logger) *billing.Service {
	s := &billing.Service{DB: d, Config: cfg.Billing.Invoice, InvoicePrefix: cfg.Billing.InvoicePrefix,
		CreditNotePrefix: cfg.Billing.CreditNotePrefix, CloseDelay: cfg.Billing.CloseDelay, Log: log}
	if st := cfg.Billing.Stripe; st != nil {
		s.Stripe = billing.NewStripe(st.SecretKey, st.APIURL, &http.Client{Timeout: 30 * time.Second})
		s.WebhookSecret = st.WebhookSecret
	}
	return s
}

// billingCmd runs `yosan billing <close|credit|sync>` against DATABASE_URL with the config
// file's billing section, writing a report to out.
func billingCmd(args []string, out io.Writer, log *slog.Logger) error {
	usage := "usage: yosan billing close --period 2026-11 [--org ID]\n       yosan billing credit --org ID --invoice ID\n       yosan billing sync"
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("billing "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	period := fs.String("period", "", "the month to close, e.g. 2026-11")
	org := fs.String("org", "", "one org's id (default: every org of the period)")
	invoice := fs.String("invoice", "", "the invoice id to credit")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w\n%s", err, usage)
	}
	env, err := openCommand()
	if err != nil {
		return err
	}
	defer env.close()
	ctx, cfg, d := env.ctx, env.cfg, env.db
	svc := newBilling(cfg, d, log)
	switch args[0] {
	case "close":
		if *period == "" {
			return errors.New("--period is required, e.g. --period 2026-11")
		}
		res, err := svc.ClosePeriod(ctx, *period, *org)
		if err != nil {
			return err
		}
		failed := 0
		for _, r := range res {
			switch {
			case r.Err != nil:
				failed++
				fmt.Fprintf(out, "%s  not closed: %s\n", r.OrgID, app.ErrorMessage(r.Err))
			case r.Result.NoUsage:
				fmt.Fprintf(out, "%s  no usage in %s: no invoice\n", r.OrgID, *period)
			default:
				inv := r.Result.Invoice
				verb := "issued"
				if !r.Result.Created {
					verb = "already issued"
				}
				fmt.Fprintf(out, "%s  %s %s: subtotal ¥%d + tax ¥%d = ¥%d\n", r.OrgID, verb, inv.Number, inv.Subtotal, inv.Tax, inv.Total)
			}
		}
		if len(res) == 0 {
			fmt.Fprintf(out, "no org has usage in %s\n", *period)
		}
		if n, f, err := svc.SyncStripe(ctx, ""); err != nil {
			fmt.Fprintf(out, "stripe: %v (the gateway retries in the background)\n", err)
		} else if n+f > 0 {
			fmt.Fprintf(out, "stripe: %d synced, %d failed (retried in the background)\n", n, f)
		}
		if failed > 0 {
			return fmt.Errorf("%d org(s) not closed; run the close again once their reservations are settled", failed)
		}
		return nil
	case "credit":
		if *org == "" || *invoice == "" {
			return errors.New("--org and --invoice are required")
		}
		cn, err := svc.Credit(ctx, *org, *invoice)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "credit note %s issued for %s (¥%d); close %s again to issue the corrected invoice\n", cn.Number, cn.Corrects, cn.Total, cn.Period)
		return nil
	case "sync":
		n, f, err := svc.SyncStripe(ctx, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "stripe: %d synced, %d failed\n", n, f)
		return nil
	}
	return errors.New(usage)
}
