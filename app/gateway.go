package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KeyStore finds keys by the hash of their secret (db implements it).
type KeyStore interface {
	// PrincipalByHash returns ENOTFOUND when no key has that hash.
	PrincipalByHash(ctx context.Context, hash []byte) (Principal, error)
	// PeriodRate returns the USD->JPY rate fixed for the org's period, fixing it if new.
	PeriodRate(ctx context.Context, org Org, period string) (int64, error)
}

// Ledger holds and settles reservations (db implements it).
type Ledger interface {
	Reserve(ctx context.Context, req ReserveRequest) (ReserveResult, error)
	Settle(ctx context.Context, s Settlement) (SettleOutcome, error)
}

// RoomReader is a Ledger that can say how much room a request's budget nodes have left: the
// least of its capped org-currency nodes, and its global node (math.MaxInt64 when uncapped).
type RoomReader interface {
	Room(ctx context.Context, req ReserveRequest) (room, globalRoom int64, err error)
}

// Gateway is the proxy pipeline of DESIGN.md section 6: authenticate, resolve the model,
// estimate the worst case, reserve it on every budget node, and settle after the upstream
// call whatever happens.
type Gateway struct {
	Keys    KeyStore
	Ledger  Ledger
	Catalog *Catalog
	Counter TokenCounter
	Log     *slog.Logger
	Now     func() time.Time

	// RequestTimeout bounds one upstream call; a reservation's deadline is RequestTimeout
	// plus SettleMargin, after which the sweeper settles it.
	RequestTimeout time.Duration
	SettleMargin   time.Duration
	// GlobalCurrency and GlobalLocation define the gateway-wide budget node.
	GlobalCurrency string
	GlobalLocation *time.Location
	// AsyncSettle settles after the answer is sent instead of before its last byte: the
	// client saves one ledger transaction of latency, but may read its budget a moment before
	// the settlement lands. Off by default: a finished answer is a settled answer.
	AsyncSettle bool
	// Cooldowns remembers providers and models that must not be called for a while; Classify
	// reads a failed upstream call of a provider (both nil: route aliases still fall back, but
	// every failure counts as a backend error and nothing cools down).
	Cooldowns CooldownStore
	Classify  func(provider string, e *UpstreamError, now time.Time) Classification
	// QuotaCooldown is how long an exhausted quota without a reset time cools down.
	QuotaCooldown time.Duration
	// Limiter bounds the upstream calls in flight per key, org and provider (nil: no limits).
	Limiter *Limiter
	// Cache holds the answers of routes that opted into caching (nil: no cache).
	Cache *ResponseCache
	// KeyCacheTTL is how long an authenticated key is trusted without a database look-up.
	// Revocation through this process takes effect at once (ForgetKey); through another
	// process within the TTL.
	KeyCacheTTL time.Duration

	settling sync.WaitGroup
	keys     sync.Map // [32]byte -> keyEntry
	locs     sync.Map // string -> *time.Location
	rates    sync.Map // orgID + "/" + period -> int64
}

type keyEntry struct {
	p       Principal
	expires time.Time
}

// Authenticate returns the principal of a bearer secret. It returns EUNAUTHORIZED for a
// missing, unknown, revoked or expired key and EUNAVAILABLE when the database is down.
func (g *Gateway) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if secret == "" {
		return nil, Errorf(EUNAUTHORIZED, "missing API key: send it as 'Authorization: Bearer <key>'")
	}
	hash := sha256.Sum256([]byte(secret))
	now := g.Now()
	if v, ok := g.keys.Load(hash); ok {
		e := v.(*keyEntry)
		if now.Before(e.expires) {
			return g.checkKey(&e.p, now)
		}
	}
	p, err := g.Keys.PrincipalByHash(ctx, hash[:])
	if ErrorCode(err) == ENOTFOUND {
		return nil, Errorf(EUNAUTHORIZED, "invalid API key")
	}
	if err != nil {
		return nil, err
	}
	e := &keyEntry{p: p, expires: now.Add(g.KeyCacheTTL)}
	// The database found the row by an index on the hash; compare the stored hash again in
	// constant time, so nothing but an exact match ever authenticates.
	if subtle.ConstantTimeCompare(p.KeyHash, hash[:]) != 1 {
		return nil, Errorf(EUNAUTHORIZED, "invalid API key")
	}
	if g.KeyCacheTTL > 0 {
		g.keys.Store(hash, e)
	}
	return g.checkKey(&e.p, now)
}

func (g *Gateway) checkKey(p *Principal, now time.Time) (*Principal, error) {
	if p.Key.RevokedAt != nil {
		return nil, Errorf(EUNAUTHORIZED, "this API key has been revoked")
	}
	if p.Key.ExpiresAt != nil && !now.Before(*p.Key.ExpiresAt) {
		return nil, Errorf(EUNAUTHORIZED, "this API key has expired")
	}
	return p, nil
}

// ForgetKey drops a key from the authentication cache (after a revocation).
func (g *Gateway) ForgetKey(keyID string) {
	g.keys.Range(func(k, v any) bool {
		if v.(*keyEntry).p.Key.ID == keyID {
			g.keys.Delete(k)
		}
		return true
	})
}

// AllowedModels returns the models the principal's plan may call.
func (g *Gateway) AllowedModels(p *Principal) []*CatalogModel {
	var out []*CatalogModel
	for _, m := range g.Catalog.Models() {
		if p.Allows(m.Tier) {
			out = append(out, m)
		}
	}
	return out
}

// Call is one admitted request: its reservation is held until Commit, Release or Close.
type Call struct {
	ID        string
	Principal *Principal
	Model     *CatalogModel
	Request   *ProxyRequest
	Price     Price
	// Rate and GlobalRate convert USD into the org's and the global node's currency.
	Rate, GlobalRate int64
	EstInput         int64
	// MaxOutput is the worst case of output tokens (PerChoiceMax for each of n choices).
	MaxOutput    int64
	PerChoiceMax int64
	// ClampedFrom is the max_tokens the request asked for (or the model's maximum) when the
	// plan let the gateway lower it to PerChoiceMax to fit the budget; 0 when not clamped.
	ClampedFrom int64
	Reservation Reservation
	// Remaining is the room left on the tightest capped node after the reservation.
	Remaining    int64
	HasRemaining bool
	Deadline     time.Time

	g       *Gateway
	mu      sync.Mutex
	settled bool
	called  bool
}

// MaxReservation bounds one request's worst case (one billion units of a currency), so no
// budget arithmetic can overflow.
const MaxReservation = 1_000_000_000 * Micro

// NewRequestID returns a fresh request id ("req_" + 24 hex characters).
func NewRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("read random: " + err.Error()) // crypto/rand never fails on Linux
	}
	return "req_" + hex.EncodeToString(b[:])
}

// Prepare resolves the model, estimates the worst case and reserves it on every budget node of
// the principal's key. Errors: ENOTFOUND for an unknown model, EINVALID when the model does not
// serve this endpoint, EFORBIDDEN when the plan does not include the model's tier, EBUDGET
// naming the full node, EUNAVAILABLE when the ledger is unreachable. On success the caller must
// settle the Call (defer Close).
func (g *Gateway) Prepare(ctx context.Context, requestID string, p *Principal, req *ProxyRequest) (*Call, error) {
	m, ok := g.Catalog.Lookup(req.Model)
	if !ok {
		return nil, &Error{Code: ENOTFOUND, Param: "model", Message: "the model '" + req.Model + "' does not exist; GET /v1/models lists the models your key may use"}
	}
	if err := Usable(m, p, req.Kind); err != nil {
		return nil, err
	}
	return g.PrepareModel(ctx, requestID, p, req, m)
}

// Usable says why model m cannot serve a request of kind for principal p (EINVALID for the
// wrong endpoint, EFORBIDDEN for a tier the key's plan lacks), or nil.
func Usable(m *CatalogModel, p *Principal, kind string) error {
	if m.Kind != kind {
		return &Error{Code: EINVALID, Param: "model", Message: "the model '" + m.Name + "' is a " + m.Kind + " model and cannot serve this endpoint"}
	}
	if !p.Allows(m.Tier) {
		return &Error{Code: EFORBIDDEN, Param: "model", Message: "the model '" + m.Name + "' is in tier '" + m.Tier +
			"', which your key's plan '" + p.Key.Plan + "' does not include (allowed tiers: " + strings.Join(p.Tiers, ", ") + ")"}
	}
	return nil
}

// PrepareModel is Prepare for a model already chosen (a route's candidate) and checked with
// Usable.
func (g *Gateway) PrepareModel(ctx context.Context, requestID string, p *Principal, req *ProxyRequest, m *CatalogModel) (*Call, error) {
	now := g.Now()
	loc, err := g.location(p.Org.TimeZone)
	if err != nil {
		return nil, err
	}
	period := Period(now, loc)
	usdJPY, err := g.rate(ctx, p.Org, period)
	if err != nil {
		return nil, err
	}
	c := &Call{ID: requestID, Principal: p, Model: m, Request: req, Price: m.PriceAt(now), g: g}
	c.Rate = RateFor(p.Org.Currency, usdJPY)
	c.GlobalRate = RateFor(g.GlobalCurrency, usdJPY)
	c.EstInput = g.Counter.CountText(m.UpstreamName, req.Text) + req.ExtraInputTokens
	choices := max(req.Choices, 1)
	if req.Kind == KindChat {
		c.PerChoiceMax = req.MaxTokens
		if c.PerChoiceMax == 0 {
			c.PerChoiceMax = m.MaxOutputTokens
		}
		c.MaxOutput = c.PerChoiceMax * choices
	}
	c.Deadline = now.Add(g.RequestTimeout + g.SettleMargin)
	nodes := make([]Node, 0, 4)
	nodes = append(nodes, Node{NodeOrg, p.Org.ID}, Node{NodeTeam, p.Key.TeamID})
	if p.Key.MemberID != "" {
		nodes = append(nodes, Node{NodeMember, p.Key.MemberID})
	}
	nodes = append(nodes, Node{NodeKey, p.Key.ID})
	rr := ReserveRequest{
		RequestID: requestID, OrgID: p.Org.ID, KeyID: p.Key.ID, Period: period, Currency: p.Org.Currency,
		Nodes:        nodes,
		GlobalPeriod: Period(now, g.GlobalLocation), GlobalCurrency: g.GlobalCurrency,
		Model: m.Name, Provider: m.Provider, UpstreamModel: m.UpstreamName, USDJPY: usdJPY,
		EstInputTokens: c.EstInput, Deadline: c.Deadline,
	}
	res, err := g.reserve(ctx, c, &rr, now)
	if ErrorCode(err) == EBUDGET && p.ClampMaxTokens && req.Kind == KindChat {
		// The plan lets the gateway lower max_tokens to what the budget still holds rather
		// than refuse; a budget that moved meanwhile refuses as usual.
		if per, ok := g.clampedMax(ctx, c, rr, choices); ok {
			c.ClampedFrom, c.PerChoiceMax, c.MaxOutput = c.PerChoiceMax, per, per*choices
			res, err = g.reserve(ctx, c, &rr, now)
		}
	}
	if err != nil {
		return nil, err
	}
	c.Reservation = res.Reservation
	c.Remaining, c.HasRemaining = res.Remaining, res.HasRemaining
	return c, nil
}

// reserve holds c's worst case (c.MaxOutput) on the budgets and the model's quota windows,
// filling rr's amounts. Errors: EBUDGET naming the full node, a quota window's 429 or
// request_too_large, EINVALID for an impossible worst case, EUNAVAILABLE from the ledger.
func (g *Gateway) reserve(ctx context.Context, c *Call, rr *ReserveRequest, now time.Time) (ReserveResult, error) {
	m, p := c.Model, c.Principal
	rr.Amount = c.Price.WorstCost(c.EstInput, c.MaxOutput, c.Rate)
	rr.GlobalAmount = c.Price.WorstCost(c.EstInput, c.MaxOutput, c.GlobalRate)
	rr.MaxOutputTokens = c.MaxOutput
	rr.Quotas = m.Quota.Claims(m.Provider, m.UpstreamName, now, c.EstInput+c.MaxOutput)
	for _, q := range rr.Quotas {
		if q.Amount > q.Limit {
			return ReserveResult{}, quotaError(&QuotaFull{Claim: q, TooLarge: true}, m.Name, now)
		}
	}
	if rr.Amount > MaxReservation || rr.GlobalAmount > MaxReservation {
		return ReserveResult{}, &Error{Code: EINVALID, Param: "max_tokens", Message: "this request's worst-case cost (" + FormatMoney(rr.Amount) + " " +
			p.Org.Currency + ") is larger than any budget can hold; lower max_tokens"}
	}
	res, err := g.Ledger.Reserve(ctx, *rr)
	if err != nil {
		// The batch may have committed before the connection failed: release whatever exists
		// under this id, so nothing stays pending for want of a settlement.
		g.settleAsync(Settlement{RequestID: rr.RequestID, Status: StatusReleased, UsageSource: "reserve-failed"})
		return ReserveResult{}, err
	}
	if !res.Admitted || res.Duplicate {
		if res.Duplicate {
			return ReserveResult{}, Errorf(ECONFLICT, "request id %s was already used", rr.RequestID)
		}
		if res.FullQuota != nil {
			return ReserveResult{}, quotaError(&QuotaFull{Claim: *res.FullQuota}, m.Name, now)
		}
		return ReserveResult{}, &Error{Code: EBUDGET, Node: res.FullNode.String(), Message: "budget exceeded: the " + string(res.FullNode.Kind) +
			" budget (" + res.FullNode.String() + ") has no room for this request's worst-case cost of " +
			FormatMoney(rr.Amount) + " " + p.Org.Currency + "; lower max_tokens or ask an admin to raise the cap"}
	}
	return res, nil
}

// MinClampedTokens is the smallest max_tokens the gateway clamps a request to: below it the
// answer would be cut off before it said anything useful, and the request is refused instead.
const MinClampedTokens = 16

// clampedMax returns the largest max_tokens (per choice) whose worst case fits the room the
// request's budget nodes have left, when it is at least MinClampedTokens and below the one
// asked for.
func (g *Gateway) clampedMax(ctx context.Context, c *Call, rr ReserveRequest, choices int64) (int64, bool) {
	rd, ok := g.Ledger.(RoomReader)
	if !ok {
		return 0, false
	}
	room, groom, err := rd.Room(ctx, rr)
	if err != nil {
		return 0, false
	}
	fits := func(per int64) bool {
		out := per * choices
		return c.Price.WorstCost(c.EstInput, out, c.Rate) <= room && c.Price.WorstCost(c.EstInput, out, c.GlobalRate) <= groom
	}
	lo, hi := int64(0), c.PerChoiceMax-1 // the largest per-choice value that fits, in [lo, hi]
	if !fits(lo) {
		return 0, false
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, lo >= MinClampedTokens
}

func (g *Gateway) location(tz string) (*time.Location, error) {
	if v, ok := g.locs.Load(tz); ok {
		return v.(*time.Location), nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, WrapError(EINTERNAL, err, "the org's time zone is invalid")
	}
	g.locs.Store(tz, loc)
	return loc, nil
}

func (g *Gateway) rate(ctx context.Context, org Org, period string) (int64, error) {
	key := org.ID + "/" + period
	if v, ok := g.rates.Load(key); ok {
		return v.(int64), nil
	}
	r, err := g.Keys.PeriodRate(ctx, org, period)
	if err != nil {
		return 0, err
	}
	g.rates.Store(key, r)
	return r, nil
}

// Upstream returns the model's provider and marks the call as sent upstream: from now on an
// unsettled call is charged, not released, because the provider may have billed it.
func (c *Call) Upstream() Provider {
	c.mu.Lock()
	c.called = true
	c.mu.Unlock()
	return c.Model.Upstream
}

// UpstreamRequest builds the provider request: the caller's body with the upstream model
// name and, for streams, include_usage forced on.
func (c *Call) UpstreamRequest() *ProviderRequest {
	body := make(map[string]json.RawMessage, len(c.Request.Body)+1)
	for k, v := range c.Request.Body {
		body[k] = v
	}
	name, _ := json.Marshal(c.Model.UpstreamName)
	body["model"] = name
	if c.ClampedFrom > 0 {
		limit := json.RawMessage(strconv.FormatInt(c.PerChoiceMax, 10))
		set := false
		for _, f := range []string{"max_tokens", "max_completion_tokens"} {
			if raw, ok := body[f]; ok && !isNull(raw) {
				body[f], set = limit, true
			}
		}
		if !set {
			f := c.Model.MaxTokensField
			if f == "" {
				f = "max_tokens"
			}
			body[f] = limit
		}
	}
	if c.Request.Stream {
		so := map[string]json.RawMessage{}
		if raw, ok := body["stream_options"]; ok && !isNull(raw) {
			_ = json.Unmarshal(raw, &so) // validated in ParseChatRequest
		}
		so["include_usage"] = json.RawMessage("true")
		body["stream_options"] = rawObject(so)
	}
	return &ProviderRequest{Model: c.Model.UpstreamName, Body: body, Stream: c.Request.Stream, MaxTokens: c.PerChoiceMax}
}

// Cost returns the actual cost of usage in the org currency and the global currency. An absurd
// usage (a broken upstream) is recorded at MaxReservation, so it still blocks the node as an
// overrun but cannot overflow a budget counter.
func (c *Call) Cost(u Usage) (org, global int64) {
	return min(c.Price.CostOf(u, c.Rate), MaxReservation), min(c.Price.CostOf(u, c.GlobalRate), MaxReservation)
}

// CountOutput estimates the tokens of generated text (to settle a broken stream).
func (c *Call) CountOutput(text string) int64 {
	if text == "" {
		return 0
	}
	return c.g.Counter.CountText(c.Model.UpstreamName, text)
}

// Commit settles the call at the cost of usage. source says where usage came from
// ("upstream", "relayed", "reserved"). Only the first settlement of a Call counts.
func (c *Call) Commit(u Usage, source string) {
	org, global := c.Cost(u)
	c.finish(Settlement{RequestID: c.ID, Status: StatusCommitted, Actual: org, GlobalActual: global, Usage: u, UsageSource: source})
}

// CommitReserved settles the call at its full reserved amount: for an upstream answer whose
// usage is unknown, so the ledger never under-counts.
func (c *Call) CommitReserved(source string) {
	c.finish(c.reserved(source))
}

// reserved is the settlement that charges the call its full reserved amount.
func (c *Call) reserved(source string) Settlement {
	return Settlement{RequestID: c.ID, Status: StatusCommitted, Actual: c.Reservation.Amount,
		GlobalActual: c.Reservation.GlobalAmount, UsageSource: source,
		Usage: Usage{PromptTokens: c.EstInput, CompletionTokens: c.MaxOutput}}
}

// Fail settles a call whose upstream failed, recording the failure's class and code: at zero,
// or at the reserved amount when billed (a timeout the provider may have billed).
func (c *Call) Fail(cls Classification, billed bool) {
	code := cls.Code
	if len(code) > 64 {
		code = code[:64]
	}
	s := Settlement{RequestID: c.ID, Status: StatusReleased}
	if billed {
		s = c.reserved("timeout")
	}
	s.ErrorClass, s.ErrorCode = cls.Class, code
	c.finish(s)
}

// Release settles the call at zero: the upstream did not bill it (it refused or was never
// called).
func (c *Call) Release() {
	c.finish(Settlement{RequestID: c.ID, Status: StatusReleased})
}

// Close is the safety net every caller defers: if nothing settled the call (an early return,
// a panic), it is released when no upstream call was made and charged the reserved amount
// otherwise.
func (c *Call) Close() {
	c.mu.Lock()
	settled, called := c.settled, c.called
	c.mu.Unlock()
	if settled {
		return
	}
	if called {
		c.CommitReserved("unsettled")
		return
	}
	c.Release()
}

func (c *Call) finish(s Settlement) {
	c.mu.Lock()
	if c.settled {
		c.mu.Unlock()
		return
	}
	c.settled = true
	c.mu.Unlock()
	s.LockIDs = c.Reservation.LockIDs()
	s.QuotaIDs = c.Reservation.QuotaIDs
	if c.g.AsyncSettle {
		c.g.settleAsync(s)
		return
	}
	c.g.settle(s.RequestID, s)
}

// settleAsync settles in the background (the reservation already holds the worst case, so
// nothing can overspend meanwhile). Drain waits for every settlement started.
func (g *Gateway) settleAsync(s Settlement) {
	g.settling.Add(1)
	go func() {
		defer g.settling.Done()
		g.settle(s.RequestID, s)
	}()
}

// Drain waits until every settlement started so far has finished: call it on shutdown after
// the HTTP server stopped, before closing the ledger.
func (g *Gateway) Drain() { g.settling.Wait() }

// settle runs a settlement on a context of its own, so a client that went away or a request
// context that ended cannot stop the accounting. A settlement that still fails (the database is
// down) is left to the sweeper, which charges the reserved amount after the deadline.
func (g *Gateway) settle(requestID string, s Settlement) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var out SettleOutcome
		if out, err = g.Ledger.Settle(ctx, s); err == nil {
			if out.Overrun && g.Log != nil {
				g.Log.Warn("overrun: the true cost exceeded the reserved worst case; the node refuses new requests until its cap is raised or the period ends",
					"request_id", requestID, "actual", FormatMoney(s.Actual))
			}
			return
		}
		if ErrorCode(err) != EUNAVAILABLE {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	if g.Log != nil && !errors.Is(err, context.Canceled) {
		g.Log.Error("settle reservation; the sweeper will settle it after its deadline", "request_id", requestID, "status", s.Status, "err", err)
	}
}

// rawObject encodes members as a JSON object with each value's bytes unchanged (json.Marshal
// would compact them and escape HTML characters), keys sorted.
func rawObject(members map[string]json.RawMessage) json.RawMessage {
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteByte(':')
		b.Write(members[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}
