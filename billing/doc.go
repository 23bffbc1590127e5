// Package billing turns the ledger into money owed: the month close (Service.ClosePeriod and
// the scheduler), the yen amounts of the lines (AllocateYen), the consumption tax computed once
// per invoice (Tax), the issuer registration number check, the Stripe mirror (Stripe.Sync, and
// ParseStripeWebhook for Stripe's events) and the reconciliation of invoices with the ledger.
// Each org-period's USD->JPY rate is fixed when the period opens (db.PeriodRate), so every
// cost of the period, its budget and its invoice use the same rate.
package billing
