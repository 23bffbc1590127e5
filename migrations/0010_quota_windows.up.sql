-- Provider quota windows (RPM, RPD, TPM per provider account and model), held in the same
-- transaction as the budgets: a reservation takes its share of every window of its candidate
-- or nothing at all, and its settlement gives back what it did not use.
--
-- One row per provider account, model, kind and window; reserved holds the worst cases of the
-- pending reservations, used what settled ones consumed (one request each for rpm and rpd,
-- input plus output tokens for tpm). The effective limit is not stored: each reserve passes
-- the one in force in its process's configuration.
CREATE TABLE quota_windows (
    id           bigserial PRIMARY KEY,
    provider     text NOT NULL,
    model        text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('rpm', 'rpd', 'tpm')),
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL CHECK (window_end > window_start),
    reserved     bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    used         bigint NOT NULL DEFAULT 0 CHECK (used >= 0),
    UNIQUE (provider, model, kind, window_start)
);
CREATE INDEX quota_windows_end ON quota_windows (window_end);

-- The quota rows a reservation holds, and how much of each (parallel arrays).
ALTER TABLE reservations
    ADD COLUMN quota_ids bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN quota_amounts bigint[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT reservations_quota_arrays CHECK (cardinality(quota_ids) = cardinality(quota_amounts));

DROP FUNCTION reserve_batch;
-- reserve_batch as in 0002, plus quota windows. The lock order is every budget row by id,
-- then every quota row by id (settlements lock the same way). A request is admitted only if
-- every budget node and then every quota window it claims has room; a full window answers
-- outcome 'quota' with full_bid naming the window row.
--
-- p_qids lists every quota row of the batch in ascending order; p_qrow, p_qamt and p_qcap hold,
-- per request, its quota row ids, the amount it claims of each and each one's effective limit,
-- as array literals ('{}' for none).
CREATE FUNCTION reserve_batch(
    p_ids bigint[], p_rid text[], p_org uuid[], p_key uuid[], p_period text[], p_cur text[], p_amt bigint[],
    p_bids text[], p_gid bigint[], p_gamt bigint[], p_model text[], p_prov text[], p_um text[],
    p_fx bigint[], p_eit bigint[], p_mot bigint[], p_dl timestamptz[], p_now timestamptz,
    p_qids bigint[], p_qrow text[], p_qamt text[], p_qcap text[])
RETURNS TABLE (idx int, outcome text, full_bid bigint, remaining bigint, capped boolean, status text)
LANGUAGE plpgsql AS $$
DECLARE
    n        int := coalesce(array_length(p_rid, 1), 0);
    ids      bigint[] := p_ids;
    caps     bigint[] := '{}';
    rsv      bigint[] := '{}';
    spt      bigint[] := '{}';
    qids     bigint[] := p_qids;
    qrsv     bigint[] := '{}';
    qused    bigint[] := '{}';
    qn       bigint[];
    qa       bigint[];
    qc       bigint[];
    ex_rid   text[];
    ex_st    text[];
    o_out    text[] := array_fill(NULL::text, ARRAY[n]);
    o_full   bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    o_rem    bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    o_cap    boolean[] := array_fill(false, ARRAY[n]);
    o_st     text[] := array_fill(NULL::text, ARRAY[n]);
    adm      boolean[] := array_fill(false, ARRAY[n]);
    nodes    bigint[];
    ins_rid  text[];
    r        record;
    i        int;
    k        int;
    pos      int;
    bid      bigint;
    amt      bigint;
    fullb    bigint;
    room     bigint;
    best     bigint;
    -- uncapped rows still refuse an amount that could overflow the counters
    unlimited CONSTANT bigint := 4611686018427387903;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR r IN SELECT b.id, b.cap, b.reserved, b.spent FROM budgets b WHERE b.id = ANY (ids) ORDER BY b.id FOR UPDATE LOOP
        caps := array_append(caps, r.cap);
        rsv := array_append(rsv, r.reserved);
        spt := array_append(spt, r.spent);
    END LOOP;
    IF coalesce(array_length(rsv, 1), 0) <> array_length(ids, 1) THEN
        RAISE EXCEPTION 'reserve_batch: % of % budget rows found', coalesce(array_length(rsv, 1), 0), array_length(ids, 1);
    END IF;
    FOR r IN SELECT w.id, w.reserved, w.used FROM quota_windows w WHERE w.id = ANY (qids) ORDER BY w.id FOR UPDATE LOOP
        qrsv := array_append(qrsv, r.reserved);
        qused := array_append(qused, r.used);
    END LOOP;
    IF coalesce(array_length(qrsv, 1), 0) <> coalesce(array_length(qids, 1), 0) THEN
        RAISE EXCEPTION 'reserve_batch: % of % quota rows found', coalesce(array_length(qrsv, 1), 0), coalesce(array_length(qids, 1), 0);
    END IF;
    -- A request id that already exists (a retried reserve) is found by the INSERT below; until
    -- then it is admitted like any other, which only ever makes later requests of the batch
    -- see less room, never more.
    FOR i IN 1..n LOOP
        nodes := p_bids[i]::bigint[];
        fullb := NULL;
        FOR k IN 1..coalesce(array_length(nodes, 1), 0) + 1 LOOP
            IF k <= coalesce(array_length(nodes, 1), 0) THEN
                bid := nodes[k];
                amt := p_amt[i];
            ELSIF p_gid[i] <> 0 THEN
                bid := p_gid[i];
                amt := p_gamt[i];
            ELSE
                EXIT;
            END IF;
            pos := array_position(ids, bid);
            IF amt > coalesce(caps[pos], unlimited) - rsv[pos] - spt[pos] THEN
                fullb := bid;
                EXIT;
            END IF;
        END LOOP;
        IF fullb IS NOT NULL THEN
            o_out[i] := 'full';
            o_full[i] := fullb;
            CONTINUE;
        END IF;
        qn := p_qrow[i]::bigint[];
        qa := p_qamt[i]::bigint[];
        qc := p_qcap[i]::bigint[];
        FOR k IN 1..coalesce(array_length(qn, 1), 0) LOOP
            pos := array_position(qids, qn[k]);
            IF pos IS NULL THEN
                RAISE EXCEPTION 'reserve_batch: quota row % is not in p_qids', qn[k];
            END IF;
            IF qa[k] > qc[k] - qrsv[pos] - qused[pos] THEN
                fullb := qn[k];
                EXIT;
            END IF;
        END LOOP;
        IF fullb IS NOT NULL THEN
            o_out[i] := 'quota';
            o_full[i] := fullb;
            CONTINUE;
        END IF;
        FOR k IN 1..coalesce(array_length(qn, 1), 0) LOOP
            pos := array_position(qids, qn[k]);
            qrsv[pos] := qrsv[pos] + qa[k];
        END LOOP;
        best := NULL;
        FOREACH bid IN ARRAY nodes LOOP
            pos := array_position(ids, bid);
            rsv[pos] := rsv[pos] + p_amt[i];
            IF caps[pos] IS NOT NULL THEN
                room := caps[pos] - rsv[pos] - spt[pos];
                IF best IS NULL OR room < best THEN
                    best := room;
                END IF;
            END IF;
        END LOOP;
        IF p_gid[i] <> 0 THEN
            pos := array_position(ids, p_gid[i]);
            rsv[pos] := rsv[pos] + p_gamt[i];
        END IF;
        adm[i] := true;
        o_out[i] := 'admitted';
        o_rem[i] := best;
        o_cap[i] := best IS NOT NULL;
    END LOOP;

    WITH ins AS (
        INSERT INTO reservations (request_id, org_id, key_id, period, status, currency, amount,
            budget_ids, global_budget_id, global_amount, apply_nonce, model, provider, upstream_model,
            usd_jpy, est_input_tokens, max_output_tokens, deadline, created_at, quota_ids, quota_amounts)
        SELECT u.r, u.o, u.k, u.p, 'pending', u.cur, u.amt, u.bids::bigint[], nullif(u.gid, 0), u.gamt,
            gen_random_uuid(), u.m, u.prov, u.um, u.fx, u.eit, u.mot, u.dl, p_now, u.qr::bigint[], u.qa::bigint[]
        FROM unnest(p_rid, p_org, p_key, p_period, p_cur, p_amt, p_bids, p_gid, p_gamt, p_model, p_prov,
            p_um, p_fx, p_eit, p_mot, p_dl, adm, p_qrow, p_qamt)
            AS u(r, o, k, p, cur, amt, bids, gid, gamt, m, prov, um, fx, eit, mot, dl, a, qr, qa)
        WHERE u.a
        ON CONFLICT (request_id) DO NOTHING
        RETURNING reservations.request_id, reservations.budget_ids, reservations.amount,
            reservations.global_budget_id, reservations.global_amount, reservations.quota_ids,
            reservations.quota_amounts),
    mv AS (
        SELECT x.bid, sum(x.amt) AS amt FROM (
            SELECT unnest(ins.budget_ids) AS bid, ins.amount AS amt FROM ins
            UNION ALL
            SELECT ins.global_budget_id, ins.global_amount FROM ins WHERE ins.global_budget_id IS NOT NULL) x
        GROUP BY x.bid),
    upd AS (
        UPDATE budgets b SET reserved = b.reserved + mv.amt FROM mv WHERE b.id = mv.bid RETURNING b.id),
    qmv AS (
        SELECT q.qid, sum(q.amt) AS amt FROM ins, unnest(ins.quota_ids, ins.quota_amounts) AS q(qid, amt)
        GROUP BY q.qid),
    qupd AS (
        UPDATE quota_windows w SET reserved = w.reserved + qmv.amt FROM qmv WHERE w.id = qmv.qid RETURNING w.id)
    SELECT array_agg(ins.request_id) INTO ins_rid FROM ins;

    IF coalesce(array_length(ins_rid, 1), 0) < (SELECT count(*) FROM unnest(adm) AS a WHERE a) THEN
        -- Some admitted ids existed already (or a concurrent reserve in another process won the
        -- insert): they are duplicates, answered with the existing row's status.
        SELECT array_agg(x.request_id), array_agg(x.status) INTO ex_rid, ex_st
            FROM reservations x WHERE x.request_id = ANY (p_rid);
        FOR i IN 1..n LOOP
            IF adm[i] AND (ins_rid IS NULL OR array_position(ins_rid, p_rid[i]) IS NULL) THEN
                o_out[i] := 'duplicate';
                o_st[i] := ex_st[array_position(ex_rid, p_rid[i])];
                o_rem[i] := NULL;
                o_cap[i] := false;
            END IF;
        END LOOP;
    END IF;
    RETURN QUERY SELECT t.i::int, t.o, t.f, t.r, t.c, t.s
        FROM unnest(o_out, o_full, o_rem, o_cap, o_st) WITH ORDINALITY AS t(o, f, r, c, s, i);
END;
$$;
