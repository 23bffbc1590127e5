-- Billing (DESIGN.md section 9): FX per org-period with its source, monthly qualified invoices
-- in yen (immutable once issued), their Stripe mirror, and the reconciliation's index.

-- Who an org is on its invoices and in Stripe.
ALTER TABLE orgs
    ADD COLUMN billing_name       text,
    ADD COLUMN billing_email      text,
    -- the org's own qualified invoice issuer number (T + 13 digits), when it has one
    ADD COLUMN tax_id             text,
    ADD COLUMN stripe_customer_id text;

-- The source of each period's rate is printed on the invoice; closed_at marks a closed month.
-- An admin may fix a period's rate before it opens: the row then exists with opened_at NULL.
ALTER TABLE org_periods
    ADD COLUMN fx_source text NOT NULL DEFAULT 'org default rate',
    ADD COLUMN closed_at timestamptz,
    ALTER COLUMN opened_at DROP NOT NULL;

-- Rates set in advance (config file), applied to every org's period when it opens.
CREATE TABLE fx_rates (
    period     text PRIMARY KEY CHECK (period ~ '^\d{4}-\d{2}$'),
    usd_jpy    bigint NOT NULL CHECK (usd_jpy > 0),
    source     text NOT NULL CHECK (source <> ''),
    updated_at timestamptz NOT NULL
);

-- The month close sums a period's ledger rows of one org.
CREATE INDEX reservations_org_period ON reservations (org_id, period, status);

-- Invoice numbers are sequential per issuer (registration number), without gaps: the counter
-- row is locked by the transaction that issues.
CREATE TABLE invoice_sequences (
    issuer text PRIMARY KEY,
    last   bigint NOT NULL
);

CREATE TABLE invoices (
    id            uuid PRIMARY KEY,
    number        text NOT NULL UNIQUE,
    issuer_number text NOT NULL,
    seq           bigint NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('invoice', 'credit_note')),
    corrects      uuid REFERENCES invoices (id),
    org_id        uuid NOT NULL REFERENCES orgs (id),
    period        text NOT NULL,
    period_start  timestamptz NOT NULL,
    period_end    timestamptz NOT NULL,
    recipient     text NOT NULL,
    issuer        jsonb NOT NULL,
    currency      text NOT NULL,
    usd_jpy       bigint NOT NULL,
    fx_source     text NOT NULL,
    subtotal      bigint NOT NULL,
    tax_rate      int NOT NULL,
    tax           bigint NOT NULL,
    total         bigint NOT NULL CHECK (total = subtotal + tax),
    rounding      text NOT NULL CHECK (rounding IN ('floor', 'ceil', 'half_up')),
    markup_bp     bigint NOT NULL,
    ledger_micro  bigint NOT NULL,
    issued_at     timestamptz NOT NULL,
    due_at        timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    -- Mutable after issue: the payment status, which document replaced this one, and the
    -- Stripe mirror's progress.
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'void', 'uncollectible')),
    status_at     timestamptz,
    superseded_by uuid REFERENCES invoices (id),
    stripe_state  jsonb NOT NULL DEFAULT '{}',
    stripe_synced boolean NOT NULL DEFAULT false,
    stripe_invoice_id text,
    stripe_error  text,
    stripe_attempts int NOT NULL DEFAULT 0,
    stripe_next_at  timestamptz,
    stripe_locked_until timestamptz,
    UNIQUE (issuer_number, seq)
);
-- One standing invoice per org and period; a credited one is superseded and a new one issued.
CREATE UNIQUE INDEX invoices_one_per_period ON invoices (org_id, period)
    WHERE kind = 'invoice' AND superseded_by IS NULL;
CREATE UNIQUE INDEX invoices_one_credit ON invoices (corrects) WHERE kind = 'credit_note';
CREATE INDEX invoices_stripe_due ON invoices (stripe_next_at) WHERE NOT stripe_synced;
CREATE UNIQUE INDEX invoices_stripe_invoice ON invoices (stripe_invoice_id) WHERE stripe_invoice_id IS NOT NULL;

CREATE TABLE invoice_lines (
    invoice_id    uuid NOT NULL REFERENCES invoices (id),
    n             int NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('usage', 'adjustment')),
    provider      text NOT NULL,
    model         text NOT NULL,
    price_from    timestamptz,
    input_per_m   bigint NOT NULL,
    cached_per_m  bigint NOT NULL,
    output_per_m  bigint NOT NULL,
    description   text NOT NULL,
    requests      bigint NOT NULL,
    input_tokens  bigint NOT NULL,
    cached_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    quantity      bigint NOT NULL,
    ledger_micro  bigint NOT NULL,
    amount        bigint NOT NULL,
    tax_rate      int NOT NULL,
    PRIMARY KEY (invoice_id, n)
);

-- An issued document is immutable: only its status, supersession and Stripe progress change.
-- A correction is a credit note plus a new invoice, both referencing the original.
CREATE FUNCTION invoice_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'invoice % is issued and cannot be deleted', OLD.number USING ERRCODE = 'check_violation';
    END IF;
    IF (OLD.id, OLD.number, OLD.issuer_number, OLD.seq, OLD.kind, OLD.corrects, OLD.org_id, OLD.period,
        OLD.period_start, OLD.period_end, OLD.recipient, OLD.issuer, OLD.currency, OLD.usd_jpy, OLD.fx_source,
        OLD.subtotal, OLD.tax_rate, OLD.tax, OLD.total, OLD.rounding, OLD.markup_bp, OLD.ledger_micro,
        OLD.issued_at, OLD.due_at, OLD.created_at)
       IS DISTINCT FROM
       (NEW.id, NEW.number, NEW.issuer_number, NEW.seq, NEW.kind, NEW.corrects, NEW.org_id, NEW.period,
        NEW.period_start, NEW.period_end, NEW.recipient, NEW.issuer, NEW.currency, NEW.usd_jpy, NEW.fx_source,
        NEW.subtotal, NEW.tax_rate, NEW.tax, NEW.total, NEW.rounding, NEW.markup_bp, NEW.ledger_micro,
        NEW.issued_at, NEW.due_at, NEW.created_at) THEN
        RAISE EXCEPTION 'invoice % is issued and immutable: issue a credit note instead', OLD.number
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER invoices_frozen BEFORE UPDATE OR DELETE ON invoices
    FOR EACH ROW EXECUTE FUNCTION invoice_frozen();

CREATE FUNCTION invoice_line_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'invoice lines are immutable once issued' USING ERRCODE = 'check_violation';
END;
$$;
CREATE TRIGGER invoice_lines_frozen BEFORE UPDATE OR DELETE ON invoice_lines
    FOR EACH ROW EXECUTE FUNCTION invoice_line_frozen();
