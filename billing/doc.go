// Package billing will hold periods, FX, consumption tax, qualified-invoice assembly and the
// Stripe sync. In this first version the FX part lives in the ledger: each org-period fixes its
// USD->JPY rate when it opens (db.PeriodRate) and every cost of the period uses it.
package billing
