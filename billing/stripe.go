package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"github.com/stripe/stripe-go/v76/webhook"

	"yosan/app"
)

// StripeCustomer is who the org is in Stripe.
type StripeCustomer struct {
	Name  string
	Email string
	// TaxID is the org's own qualified invoice issuer number ("T" and 13 digits), sent as a
	// jp_trn tax id; "" when the org has none.
	TaxID string
	OrgID string
}

// SyncState is how far an invoice's mirroring in Stripe got. Sync saves it after every step, so
// a re-run (after an error or a crash) continues where it stopped and never creates anything
// twice.
type SyncState struct {
	// CustomerID is the org's Stripe customer. The caller passes the org's existing one so one
	// customer per org is reused across invoices.
	CustomerID string
	// InvoiceID is the Stripe invoice. For a credit note the caller passes the Stripe invoice of
	// the invoice it negates.
	InvoiceID string
	// ItemIDs maps an invoice line number to its Stripe invoice item; key 0 is the consumption
	// tax item.
	ItemIDs   map[int]string
	Finalized bool
	// CreditNoteID is the Stripe credit note of a credit note.
	CreditNoteID string
}

// maxStripeItems is how many invoice items a Stripe invoice takes; checked before anything is
// created, so an invoice too long for Stripe fails whole rather than half-mirrored.
const maxStripeItems = 250

// taxItem is the ItemIDs key of the consumption tax item (invoice lines are numbered from 1).
const taxItem = 0

// clone copies the state so that what save was given never changes under it.
func (st SyncState) clone() SyncState {
	st.ItemIDs = maps.Clone(st.ItemIDs)
	return st
}

// Stripe mirrors issued invoices and credit notes in Stripe, and reads Stripe's webhooks about
// them. It uses its own API client and backend, never stripe-go's package-level ones.
type Stripe struct {
	api *client.API
	// key is kept only to scrub it from error texts.
	key string
}

// NewStripe returns a Stripe client with secretKey. apiURL is the API base ("" for the real
// Stripe; stripe-mock's URL in tests). httpClient nil means stripe-go's default client (80 s
// timeout).
//
// The client never retries (MaxNetworkRetries 0): a failed Sync returns at once and the caller
// runs it again later; every create carries an idempotency key, so a request that reached
// Stripe before the failure is answered with the object it created, not created again. It logs
// nothing: errors are returned.
func NewStripe(secretKey, apiURL string, httpClient *http.Client) *Stripe {
	backend := func(t stripe.SupportedBackend) stripe.Backend {
		cfg := &stripe.BackendConfig{
			HTTPClient:        httpClient,
			MaxNetworkRetries: stripe.Int64(0),
			LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		}
		if apiURL != "" {
			cfg.URL = stripe.String(apiURL)
		}
		return stripe.GetBackendWithConfig(t, cfg)
	}
	return &Stripe{
		api: client.New(secretKey, &stripe.Backends{
			API:     backend(stripe.APIBackend),
			Connect: backend(stripe.ConnectBackend),
			Uploads: backend(stripe.UploadsBackend),
		}),
		key: secretKey,
	}
}

// Sync mirrors inv in Stripe, starting from st and calling save with the new state after every
// object it creates; it returns the final state.
//
// For an invoice it creates, each only if st does not have it yet: the customer (unless
// st.CustomerID is set), a draft send_invoice invoice in JPY, one invoice item per line and one
// for the consumption tax (inv.Tax, as we computed it: no Stripe tax rates, so Stripe's total is
// ours to the yen), then finalizes it. For a credit note it creates one Stripe credit note for
// the full amount on the Stripe invoice st.InvoiceID (the negated invoice's), after reading that
// invoice's status (a GET, the one request that is not a create).
//
// Every create carries an idempotency key derived from inv.ID (e.g. "yosan-inv-<ID>-line3"), so
// repeating a step whose result was lost is safe for as long as Stripe keeps keys (24 hours).
//
// Errors: an *app.Error EINVALID for an unknown inv.Kind, line numbers that are not positive
// and unique, or more lines than a Stripe invoice takes (249 and the tax); ECONFLICT for a
// credit note whose invoice is not in Stripe (st.InvoiceID == ""), or is there but still a
// draft (its sync has not finalized it yet: retry later) or void; otherwise the Stripe or
// network error (a *stripe.Error in the chain when Stripe answered; never containing the secret
// key) or save's error, wrapped with the step. On error the returned state holds everything
// created so far, including an object whose save failed.
func (s *Stripe) Sync(ctx context.Context, inv app.Invoice, cust StripeCustomer, st SyncState, save func(SyncState) error) (SyncState, error) {
	st = st.clone()
	switch inv.Kind {
	case app.KindInvoice:
		return s.syncInvoice(ctx, inv, cust, st, save)
	case app.KindCreditNote:
		return s.syncCreditNote(ctx, inv, st, save)
	default:
		return st, app.Errorf(app.EINVALID, "stripe: invoice %s has unknown kind %q", inv.Number, inv.Kind)
	}
}

func (s *Stripe) syncInvoice(ctx context.Context, inv app.Invoice, cust StripeCustomer, st SyncState, save func(SyncState) error) (SyncState, error) {
	if len(inv.Lines)+1 > maxStripeItems {
		return st, app.Errorf(app.EINVALID, "stripe: invoice %s has %d lines; a Stripe invoice takes at most %d items with the tax", inv.Number, len(inv.Lines), maxStripeItems)
	}
	seen := make(map[int]bool, len(inv.Lines))
	for _, l := range inv.Lines {
		if l.N <= taxItem || seen[l.N] { // the numbers key the items and their idempotency keys
			return st, app.Errorf(app.EINVALID, "stripe: invoice %s: line number %d is not positive and unique", inv.Number, l.N)
		}
		seen[l.N] = true
	}
	if st.CustomerID == "" {
		p := &stripe.CustomerParams{
			Name:     stripe.String(cust.Name),
			Email:    stripe.String(cust.Email),
			Metadata: map[string]string{"yosan_org_id": cust.OrgID},
		}
		if cust.TaxID != "" {
			p.TaxIDData = []*stripe.CustomerTaxIDDataParams{{Type: stripe.String("jp_trn"), Value: stripe.String(cust.TaxID)}}
		}
		p.Context = ctx
		p.SetIdempotencyKey("yosan-cust-" + cust.OrgID)
		c, err := s.api.Customers.New(p)
		if err != nil {
			return st, fmt.Errorf("stripe: create customer for org %s: %w", cust.OrgID, s.redact(err))
		}
		st.CustomerID = c.ID
		if err := save(st.clone()); err != nil {
			return st, fmt.Errorf("stripe: save customer %s of org %s: %w", c.ID, cust.OrgID, err)
		}
	}

	if st.InvoiceID == "" {
		p := &stripe.InvoiceParams{
			Customer:         stripe.String(st.CustomerID),
			CollectionMethod: stripe.String(string(stripe.InvoiceCollectionMethodSendInvoice)),
			DaysUntilDue:     stripe.Int64(daysUntilDue(inv.IssuedAt, inv.DueAt)),
			Currency:         stripe.String(string(stripe.CurrencyJPY)),
			// We send our own qualified invoice by mail; Stripe must not finalize, email or
			// chase it on its own.
			AutoAdvance: stripe.Bool(false),
			// Only the items created for this invoice, never stray pending items of the customer.
			PendingInvoiceItemsBehavior: stripe.String("exclude"),
			Description:                 stripe.String(inv.Number + " " + inv.Period),
			Metadata: map[string]string{
				"yosan_invoice_id":     inv.ID,
				"yosan_invoice_number": inv.Number,
				"period":               inv.Period,
			},
		}
		p.Context = ctx
		p.SetIdempotencyKey("yosan-inv-" + inv.ID)
		in, err := s.api.Invoices.New(p)
		if err != nil {
			return st, fmt.Errorf("stripe: create invoice for %s: %w", inv.Number, s.redact(err))
		}
		st.InvoiceID = in.ID
		if err := save(st.clone()); err != nil {
			return st, fmt.Errorf("stripe: save invoice %s of %s: %w", in.ID, inv.Number, err)
		}
	}

	for _, l := range inv.Lines {
		if err := s.createItem(ctx, inv, &st, save, l.N, l.Amount, lineDescription(l)); err != nil {
			return st, err
		}
	}
	taxDesc := fmt.Sprintf("消費税 %d%% (Consumption tax %d%%, rounded once per invoice)", inv.TaxRate, inv.TaxRate)
	if err := s.createItem(ctx, inv, &st, save, taxItem, inv.Tax, taxDesc); err != nil {
		return st, err
	}

	if !st.Finalized {
		p := &stripe.InvoiceFinalizeInvoiceParams{AutoAdvance: stripe.Bool(false)}
		p.Context = ctx
		p.SetIdempotencyKey("yosan-inv-" + inv.ID + "-finalize")
		if _, err := s.api.Invoices.FinalizeInvoice(st.InvoiceID, p); err != nil {
			return st, fmt.Errorf("stripe: finalize invoice %s of %s: %w", st.InvoiceID, inv.Number, s.redact(err))
		}
		st.Finalized = true
		if err := save(st.clone()); err != nil {
			return st, fmt.Errorf("stripe: save finalized invoice %s of %s: %w", st.InvoiceID, inv.Number, err)
		}
	}
	return st, nil
}

// createItem adds invoice item n (taxItem for the tax) to the Stripe invoice unless st has it.
func (s *Stripe) createItem(ctx context.Context, inv app.Invoice, st *SyncState, save func(SyncState) error, n int, amount int64, desc string) error {
	if st.ItemIDs[n] != "" {
		return nil
	}
	key := "yosan-inv-" + inv.ID + "-line" + strconv.Itoa(n)
	what := "line " + strconv.Itoa(n)
	if n == taxItem {
		key = "yosan-inv-" + inv.ID + "-tax"
		what = "tax"
	}
	p := &stripe.InvoiceItemParams{
		Customer: stripe.String(st.CustomerID),
		Invoice:  stripe.String(st.InvoiceID),
		// JPY is a zero-decimal currency: the amount is in yen.
		Amount:      stripe.Int64(amount),
		Currency:    stripe.String(string(stripe.CurrencyJPY)),
		Description: stripe.String(desc),
		Metadata:    map[string]string{"yosan_invoice_id": inv.ID, "yosan_line": strconv.Itoa(n)},
	}
	p.Context = ctx
	p.SetIdempotencyKey(key)
	item, err := s.api.InvoiceItems.New(p)
	if err != nil {
		return fmt.Errorf("stripe: create invoice item for %s %s: %w", inv.Number, what, s.redact(err))
	}
	if st.ItemIDs == nil {
		st.ItemIDs = make(map[int]string)
	}
	st.ItemIDs[n] = item.ID
	if err := save(st.clone()); err != nil {
		return fmt.Errorf("stripe: save invoice item %s of %s %s: %w", item.ID, inv.Number, what, err)
	}
	return nil
}

func (s *Stripe) syncCreditNote(ctx context.Context, inv app.Invoice, st SyncState, save func(SyncState) error) (SyncState, error) {
	if st.CreditNoteID != "" {
		return st, nil
	}
	if st.InvoiceID == "" {
		return st, app.Errorf(app.ECONFLICT, "stripe: credit note %s: the invoice it negates is not in Stripe yet", inv.Number)
	}
	gp := &stripe.InvoiceParams{}
	gp.Context = ctx
	orig, err := s.api.Invoices.Get(st.InvoiceID, gp)
	if err != nil {
		return st, fmt.Errorf("stripe: get invoice %s for credit note %s: %w", st.InvoiceID, inv.Number, s.redact(err))
	}
	// Checked here rather than left to Stripe: Stripe keeps the answer to an idempotency key
	// for 24 hours, so a refusal it sent would be replayed to every retry of that day, even
	// after the invoice got finalized.
	switch orig.Status {
	case stripe.InvoiceStatusDraft:
		return st, app.Errorf(app.ECONFLICT, "stripe: credit note %s: Stripe invoice %s is not finalized yet", inv.Number, st.InvoiceID)
	case stripe.InvoiceStatusVoid:
		return st, app.Errorf(app.ECONFLICT, "stripe: credit note %s: Stripe invoice %s is void", inv.Number, st.InvoiceID)
	}
	p := creditNoteParams(inv, st.InvoiceID, orig.Status)
	p.Context = ctx
	p.SetIdempotencyKey("yosan-cn-" + inv.ID)
	cn, err := s.api.CreditNotes.New(p)
	if err != nil {
		return st, fmt.Errorf("stripe: create credit note %s on invoice %s: %w", inv.Number, st.InvoiceID, s.redact(err))
	}
	st.CreditNoteID = cn.ID
	if err := save(st.clone()); err != nil {
		return st, fmt.Errorf("stripe: save credit note %s of %s: %w", cn.ID, inv.Number, err)
	}
	return st, nil
}

// creditNoteParams builds the credit note for the whole of Stripe invoice invoiceID, whose
// status is status. On an open (or uncollectible) invoice a credit note just lowers what is due.
// On a paid one Stripe wants the credit placed (API 2023-10-16: refund, customer balance or out
// of band adding up to the total); it goes to the customer's balance, which Stripe applies to
// the customer's next invoice: the corrected one that follows a credit note.
func creditNoteParams(inv app.Invoice, invoiceID string, status stripe.InvoiceStatus) *stripe.CreditNoteParams {
	amount := inv.Total
	if amount < 0 { // our credit note may carry the negated amounts
		amount = -amount
	}
	p := &stripe.CreditNoteParams{
		Invoice: stripe.String(invoiceID),
		Amount:  stripe.Int64(amount),
		Reason:  stripe.String(string(stripe.CreditNoteReasonOrderChange)),
		Memo:    stripe.String(inv.Number),
		Metadata: map[string]string{
			"yosan_invoice_id":     inv.ID,
			"yosan_invoice_number": inv.Number,
			"yosan_corrects":       inv.Corrects,
		},
	}
	if status == stripe.InvoiceStatusPaid {
		p.CreditAmount = stripe.Int64(amount)
	}
	return p
}

// daysUntilDue is the invoice's payment term in whole days, rounded up and at least 1 (Stripe
// counts them from finalization).
func daysUntilDue(issued, due time.Time) int64 {
	d := due.Sub(issued)
	days := int64(d / (24 * time.Hour))
	if d%(24*time.Hour) > 0 {
		days++
	}
	return max(days, 1)
}

// lineDescription is the Stripe text of an invoice line: ours, plus the billed tokens of a
// usage line.
func lineDescription(l app.InvoiceLine) string {
	if l.Kind == app.LineUsage && l.Quantity > 0 {
		return fmt.Sprintf("%s (%s tokens)", l.Description, groupDigits(l.Quantity))
	}
	return l.Description
}

// groupDigits formats n with thousands separators: 1234567 -> "1,234,567".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// redact returns err, or when its text holds the secret key (stripe-mock echoes a bad
// Authorization header; Stripe itself masks keys) a copy of the text with the key masked and
// nothing to unwrap, so no layer above can print it.
func (s *Stripe) redact(err error) error {
	if s.key == "" || !strings.Contains(err.Error(), s.key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), s.key, "sk_***"))
}

// StripeUpdate is what a Stripe webhook event says about one of our invoices.
type StripeUpdate struct {
	// EventID is Stripe's event id ("evt_..."), for deduplication: Stripe delivers at least once.
	EventID         string
	StripeInvoiceID string
	// YosanInvoiceID is our invoice id from the Stripe invoice's metadata; "" for an invoice
	// Yosan did not create.
	YosanInvoiceID string
	Status         app.InvoiceStatus
}

// stripeWebhookTolerance is how old a signed event may be: Stripe's default, against replays.
const stripeWebhookTolerance = webhook.DefaultTolerance

// ParseStripeWebhook verifies a Stripe webhook delivery (the request body and its
// Stripe-Signature header, against the endpoint's signing secret) and reads what it says about
// an invoice. handled is false, with a nil error, for event types other than invoice.paid,
// invoice.payment_succeeded (paid), invoice.voided (void) and invoice.marked_uncollectible
// (uncollectible); the update then carries only EventID.
//
// The signature's timestamp must be at most 5 minutes older than now. stripe-go checks that
// against the real clock and takes no clock, so the check is done here (after stripe-go has
// verified the signature, which covers the timestamp) to honour now.
//
// The event's api_version is not compared with stripe-go's (2023-10-16): it is the webhook
// endpoint's version, set in Stripe's dashboard and moving with account upgrades, and only the
// invoice's id and metadata are read, which are the same in every version.
//
// Errors: an *app.Error EUNAUTHORIZED "invalid Stripe signature" when the header is missing or
// malformed or no signature matches, EUNAUTHORIZED "Stripe signature expired" when it is too
// old, and EINVALID when a signed body is not an event or a handled event has no invoice.
func ParseStripeWebhook(payload []byte, sigHeader, secret string, now time.Time) (StripeUpdate, bool, error) {
	ev, err := webhook.ConstructEventWithOptions(payload, sigHeader, secret, webhook.ConstructEventOptions{
		IgnoreTolerance:          true,
		IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		if errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) || errors.Is(err, webhook.ErrNoValidSignature) {
			return StripeUpdate{}, false, fmt.Errorf("stripe webhook: %w", app.WrapError(app.EUNAUTHORIZED, err, "invalid Stripe signature"))
		}
		return StripeUpdate{}, false, fmt.Errorf("stripe webhook: %w", app.WrapError(app.EINVALID, err, "malformed Stripe event"))
	}
	signed, ok := signatureTime(sigHeader)
	if !ok { // unreachable: stripe-go verified the header
		return StripeUpdate{}, false, fmt.Errorf("stripe webhook: %w", app.Errorf(app.EUNAUTHORIZED, "invalid Stripe signature"))
	}
	if age := now.Sub(signed); age > stripeWebhookTolerance {
		return StripeUpdate{}, false, fmt.Errorf("stripe webhook: signed %s ago: %w", age.Round(time.Second), app.Errorf(app.EUNAUTHORIZED, "Stripe signature expired"))
	}

	u := StripeUpdate{EventID: ev.ID}
	switch ev.Type {
	case stripe.EventTypeInvoicePaid, stripe.EventTypeInvoicePaymentSucceeded:
		u.Status = app.InvoicePaid
	case stripe.EventTypeInvoiceVoided:
		u.Status = app.InvoiceVoid
	case stripe.EventTypeInvoiceMarkedUncollectible:
		u.Status = app.InvoiceUncollectible
	default:
		return u, false, nil
	}
	var obj struct {
		ID       string            `json:"id"`
		Object   string            `json:"object"`
		Metadata map[string]string `json:"metadata"`
	}
	if ev.Data != nil {
		if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
			return StripeUpdate{}, false, fmt.Errorf("stripe webhook: event %s: %w", ev.ID, app.WrapError(app.EINVALID, err, "malformed Stripe event"))
		}
	}
	if obj.Object != "invoice" || obj.ID == "" {
		return StripeUpdate{}, false, fmt.Errorf("stripe webhook: event %s: %w", ev.ID, app.Errorf(app.EINVALID, "Stripe event %s has no invoice", ev.Type))
	}
	u.StripeInvoiceID = obj.ID
	u.YosanInvoiceID = obj.Metadata["yosan_invoice_id"]
	return u, true, nil
}

// signatureTime reads the timestamp of a Stripe-Signature header ("t=1700000000,v1=..."); like
// stripe-go, the last t wins.
func signatureTime(header string) (time.Time, bool) {
	var t time.Time
	ok := false
	for _, pair := range strings.Split(header, ",") {
		k, v, found := strings.Cut(pair, "=")
		if !found || k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		t, ok = time.Unix(sec, 0), true
	}
	return t, ok
}
