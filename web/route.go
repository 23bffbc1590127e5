package web

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
)

// headerRoute names the route alias a request asked for; headerAttempts counts the upstream
// calls it took.
const (
	headerRoute      = "x-yosan-route"
	headerAttempts   = "x-yosan-attempts"
	headerDowngraded = "x-yosan-downgraded"
	headerCache      = "x-yosan-cache"
)

// serveRoute answers a request for a route alias, or for a model by name (its implicit
// route): it walks the route's candidates in order (each with its own reservation), skips
// those cooling down, outside the key's plan or with a full provider quota window, retries a
// throttled candidate twice and a failing one once, cools down what the failure calls for,
// and falls back as each candidate's `when` allows. Nothing falls back after the first byte
// of an answer reached the client.
func (s *Server) serveRoute(c echo.Context, p *app.Principal, req *app.ProxyRequest, route app.Route) error {
	g := s.cfg.Gateway
	ctx, cancel := context.WithTimeout(c.Request().Context(), g.RequestTimeout)
	defer cancel()
	id := c.Response().Header().Get(headerRequestID)
	if !route.Implicit {
		c.Response().Header().Set(headerRoute, route.Name)
	}
	if served, err := s.fromCache(c, p, req, route); served {
		return err
	}
	chain := &app.Chain{Route: route}
	var skippedErr error = &app.Error{Code: app.ENOTFOUND, Param: "model",
		Message: "no model of route '" + route.Name + "' can serve this request with your key"}
	attempts := 0
	// Every attempt's call is settled on every path, a panic included (Close is idempotent and
	// charges the reserved amount once the upstream was called).
	var current *app.Call
	defer func() {
		if current != nil {
			current.Close()
		}
	}()
	for cand, ok := chain.Next(); ok; cand, ok = chain.Next() {
		m, found := g.Catalog.Lookup(cand.Model)
		if !found {
			chain.Skip(cand.Model, "not in the catalog")
			continue
		}
		if err := app.Usable(m, p, req.Kind); err != nil {
			chain.Skip(m.Name, app.ErrorMessage(err))
			skippedErr = err
			continue
		}
		if route.Sensitive && !m.Local {
			// The config refuses this at start-up; checked again so no change elsewhere can
			// ever send a sensitive prompt to a cloud provider.
			s.cfg.Log.Error("privacy guard: a sensitive route has a cloud candidate", "route", route.Name, "model", m.Name)
			chain.Skip(m.Name, "not a local backend")
			continue
		}
		if g.Cooldowns != nil {
			// A model asked for by name has no other candidate: a failing backend's short
			// pause (a hint to prefer others) does not stop it from being tried.
			if cd, cooling := g.Cooldowns.Active(m.Provider, m.UpstreamName, g.Now()); cooling &&
				!(route.Implicit && cd.Class == app.ClassBackendError) {
				// A candidate cooling down counts as tried, failing as it did when it started to
				// cool down (article 002: "a skip counts as an attempt"), so the chain's `when`
				// rules route around it.
				chain.Failed(m.Name, app.Classification{Class: cd.Class, Code: cd.Code, ResetAt: cd.ResetAt,
					Message: "cooling down until " + cd.ResetAt.UTC().Format(time.RFC3339)}, nil)
				continue
			}
		}
	tries:
		for try := 0; ; try++ {
			attempts++
			callID := id
			if attempts > 1 {
				callID = id + "." + strconv.Itoa(attempts)
			}
			call, err := g.PrepareModel(ctx, callID, p, req, m)
			if err != nil && app.ErrorCode(err) == app.EBUDGET && route.Downgrade {
				call, m, err = s.downgrade(ctx, c, callID, p, req, route, m, err)
			}
			var full *app.QuotaFull
			if errors.As(err, &full) {
				// The gateway's own window of the provider's quota: nothing was called, nothing
				// cools down (the window frees itself), the chain moves on.
				attempts--
				chain.Failed(m.Name, full.Classification(), err)
				break tries
			}
			if err != nil {
				return err // the budget (or the ledger) says no
			}
			current = call
			c.Response().Header().Set(headerAttempts, strconv.Itoa(attempts))
			setCallHeaders(c, p, call)
			answered, err := s.tryCandidate(ctx, c, call)
			if answered {
				call.Close()
				return err
			}
			if c.Request().Context().Err() != nil {
				// The client went away: not the provider's fault, nothing to cool down.
				call.Release()
				call.Close()
				return nil
			}
			cls := s.classify(m, err)
			// The failed attempt was not billed, except a timeout, which may have been. Its
			// ledger row keeps the failure's class and code.
			var ue *app.UpstreamError
			call.Fail(cls, cls.Class == app.ClassBackendError && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ue) && ue.Timeout))
			call.Close()
			if cls.Class == app.ClassClientError {
				return upstreamError(m.Provider, err)
			}
			if g.Cooldowns != nil && !(route.Implicit && cls.Class == app.ClassBackendError) {
				until := app.CooldownUntil(cls, g.Now(), g.QuotaCooldown)
				if !until.IsZero() && (try >= app.Retries(cls.Class) || cls.Class != app.ClassRateLimited && cls.Class != app.ClassBackendError) {
					if rerr := g.Cooldowns.Record(context.WithoutCancel(ctx), m.Provider, m.UpstreamName, cls, until); rerr != nil {
						s.cfg.Log.Error("record cooldown", "provider", m.Provider, "model", m.UpstreamName, "err", rerr)
					}
				}
			}
			if try < app.Retries(cls.Class) && ctx.Err() == nil {
				select {
				case <-time.After(app.Backoff(cls, try+1, rand.Float64())):
					continue
				case <-ctx.Done():
				}
			}
			chain.Failed(m.Name, cls, err)
			break
		}
	}
	if n := len(chain.Failures); route.Implicit && n > 0 {
		// A model asked for by name answers its provider's failure as the provider gave it:
		// 502 (504 for a timeout), and a too-large request's own 4xx passed back unchanged.
		last := chain.Failures[n-1]
		if m, ok := g.Catalog.Lookup(last.Model); ok && last.Err != nil {
			e := upstreamError(m.Provider, last.Err)
			if isFault(last.Cls.Class) || last.Cls.Class == app.ClassRequestTooLarge && app.ErrorCode(e) == app.EUPSTREAMCLIENT {
				return e
			}
		}
	}
	return chain.Err(g.Now(), skippedErr)
}

// isFault reports whether class cls is the provider's fault (not a limit or the request).
func isFault(cls app.ErrorClass) bool {
	switch cls {
	case app.ClassBackendError, app.ClassSchemaInvalid, app.ClassManualAction:
		return true
	}
	return false
}

// downgrade finds, for a request that does not fit the budget with candidate from, the
// cheapest other candidate of the route that fits: it tries them from the cheapest worst case
// up, each reservation all or nothing, and says which in x-yosan-downgraded. It returns the
// budget error when none fits.
func (s *Server) downgrade(ctx context.Context, c echo.Context, id string, p *app.Principal, req *app.ProxyRequest,
	route app.Route, from *app.CatalogModel, budgetErr error) (*app.Call, *app.CatalogModel, error) {
	g := s.cfg.Gateway
	now := g.Now()
	type option struct {
		m    *app.CatalogModel
		cost int64
	}
	var opts []option
	for _, cand := range route.Candidates {
		m, ok := g.Catalog.Lookup(cand.Model)
		if !ok || m == from || app.Usable(m, p, req.Kind) != nil || (route.Sensitive && !m.Local) {
			continue
		}
		if g.Cooldowns != nil {
			if _, cooling := g.Cooldowns.Active(m.Provider, m.UpstreamName, now); cooling {
				continue
			}
		}
		price := m.PriceAt(now)
		opts = append(opts, option{m, price.InputPerM + price.OutputPerM})
	}
	sort.SliceStable(opts, func(i, j int) bool { return opts[i].cost < opts[j].cost })
	for i, o := range opts {
		call, err := g.PrepareModel(ctx, id+".d"+strconv.Itoa(i+1), p, req, o.m)
		if err == nil {
			c.Response().Header().Set(headerDowngraded, from.Name+" -> "+o.m.Name)
			return call, o.m, nil
		}
		if app.ErrorCode(err) != app.EBUDGET && !errors.As(err, new(*app.QuotaFull)) {
			return nil, from, err
		}
	}
	return nil, from, budgetErr
}

// tryCandidate makes the call to one candidate. answered is true when the request got its
// answer (a complete response, or a stream whose first event arrived): err is then the
// handler's result. Otherwise err is the upstream failure, before anything reached the client.
func (s *Server) tryCandidate(ctx context.Context, c echo.Context, call *app.Call) (answered bool, err error) {
	release, err := s.acquire(call)
	if err != nil {
		return true, err // the gateway's own limit: answered with 429, nothing to fall back from
	}
	defer release()
	up := call.Upstream()
	switch {
	case call.Request.Kind == app.KindEmbedding:
		resp, err := up.Embeddings(ctx, call.UpstreamRequest())
		if err != nil {
			return false, err
		}
		return true, s.respond(c, call, resp)
	case call.Request.Stream:
		st, first, err := openStream(ctx, call)
		if err != nil {
			return false, err
		}
		defer st.Close()
		return true, s.relay(ctx, c, call, st, first)
	default:
		resp, err := up.ChatCompletion(ctx, call.UpstreamRequest())
		if err != nil {
			return false, err
		}
		if key, ok := c.Get(cacheKeyCtx).(string); ok {
			s.cfg.Gateway.Cache.Put(key, app.CachedAnswer{Body: resp.Body, Model: call.Model.Name}, c.Get(cacheTTLCtx).(time.Duration))
		}
		return true, s.respond(c, call, resp)
	}
}

// acquire takes the call's slots of the concurrency limits (per key, org, provider). The
// release must run on every exit path; it is idempotent.
func (s *Server) acquire(call *app.Call) (func(), error) {
	l := s.cfg.Gateway.Limiter
	if l == nil {
		return func() {}, nil
	}
	release, err := l.Acquire(call.Principal.Key.ID, call.Principal.Org.ID, call.Model.Provider)
	if err != nil {
		call.Release()
		return nil, err
	}
	return release, nil
}

// Keys of echo's context for a request that may be cached.
const (
	cacheKeyCtx = "yosan.cache.key"
	cacheTTLCtx = "yosan.cache.ttl"
)

// fromCache answers a request of a caching route from the cache when it can: the key is the
// org, the route and the normalized request (never shared across orgs), and the key's plan
// must allow one of the route's candidates. A cached answer costs nothing and says
// x-yosan-cache: hit. On a miss it leaves the key for tryCandidate to store the answer
// (streamed answers are not stored: a stream is served from a stored complete answer, tool
// calls included, never with them dropped).
func (s *Server) fromCache(c echo.Context, p *app.Principal, req *app.ProxyRequest, route app.Route) (bool, error) {
	g := s.cfg.Gateway
	if g.Cache == nil || route.CacheTTL <= 0 || req.Kind != app.KindChat {
		return false, nil
	}
	allowed := false
	for _, cand := range route.Candidates {
		if m, ok := g.Catalog.Lookup(cand.Model); ok && app.Usable(m, p, req.Kind) == nil {
			allowed = true
			break
		}
	}
	if !allowed {
		return false, nil
	}
	key, ok := g.Cache.Key(p.Org.ID+"/"+route.Name, req.Body)
	if !ok {
		return false, nil
	}
	a, hit := g.Cache.Get(key)
	if !hit {
		c.Response().Header().Set(headerCache, "miss")
		if !req.Stream {
			c.Set(cacheKeyCtx, key)
			c.Set(cacheTTLCtx, route.CacheTTL)
		}
		return false, nil
	}
	h := c.Response().Header()
	h.Set(headerCache, "hit")
	h.Set(headerModel, a.Model)
	h.Set(headerBudgetCurrency, p.Org.Currency)
	if !req.Stream {
		return true, c.Blob(http.StatusOK, echo.MIMEApplicationJSON, a.Body)
	}
	chunks, err := app.StreamFromCompletion(a.Body)
	if err != nil {
		return false, nil // an entry that cannot stream: call upstream as if it missed
	}
	w := c.Response()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for i, ch := range chunks {
		if i == len(chunks)-1 && !req.IncludeUsage {
			break // the usage-only chunk, which the caller did not ask for
		}
		w.Write(sseData)
		w.Write(ch)
		w.Write(sseEnd)
	}
	w.Write(sseDone)
	w.Flush()
	return true, nil
}

// classify reads a failed call with the gateway's classifier (every failure is a backend
// error without one).
func (s *Server) classify(m *app.CatalogModel, err error) app.Classification {
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		ue = &app.UpstreamError{Provider: m.Provider, Err: err, Timeout: errors.Is(err, context.DeadlineExceeded)}
	}
	if s.cfg.Gateway.Classify == nil {
		if ue.ClientFault() {
			return app.Classification{Class: app.ClassClientError}
		}
		return app.Classification{Class: app.ClassBackendError, Message: ue.Error()}
	}
	return s.cfg.Gateway.Classify(m.Provider, ue, s.cfg.Gateway.Now())
}

// statusJSON is one cooldown as GET /status shows it: no secrets, no messages that could
// carry request contents.
type statusJSON struct {
	Provider string    `json:"provider"`
	Model    string    `json:"model,omitempty"`
	Class    string    `json:"class"`
	Code     string    `json:"code,omitempty"`
	ResetAt  time.Time `json:"reset_at"`
	Count    int64     `json:"count"`
	LastSeen time.Time `json:"last_seen"`
}

// quotaJSON is one open provider quota window as GET /status shows it.
type quotaJSON struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Kind     string `json:"kind"`
	// Limit is the provider's limit, Effective what the gateway allows itself of it.
	Limit     int64     `json:"limit"`
	Effective int64     `json:"effective_limit"`
	Used      int64     `json:"used"`
	Reserved  int64     `json:"reserved"`
	ResetsAt  time.Time `json:"resets_at"`
}

// quotaStatus lists the open quota windows of the configured models with their limits.
func (s *Server) quotaStatus(ctx context.Context) ([]quotaJSON, error) {
	out := []quotaJSON{}
	if s.cfg.DB == nil {
		return out, nil
	}
	limits := map[string]*app.Quota{}
	for _, m := range s.cfg.Gateway.Catalog.Models() {
		if m.Quota != nil {
			limits[m.Provider+"\x00"+m.UpstreamName] = m.Quota
		}
	}
	if len(limits) == 0 {
		return out, nil
	}
	ws, err := s.cfg.DB.QuotaWindows(ctx, s.cfg.Gateway.Now())
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		q, ok := limits[w.Provider+"\x00"+w.Model]
		if !ok {
			continue // a window of a model no longer configured with quotas
		}
		limit := map[app.QuotaKind]int64{app.QuotaRPM: q.RPM, app.QuotaRPD: q.RPD, app.QuotaTPM: q.TPM}[w.Kind]
		if limit == 0 {
			continue
		}
		out = append(out, quotaJSON{Provider: w.Provider, Model: w.Model, Kind: string(w.Kind), Limit: limit,
			Effective: q.Effective(limit), Used: w.Used, Reserved: w.Reserved, ResetsAt: w.End})
	}
	return out, nil
}

// status answers GET /status: the gateway is up, which providers or models are cooling down
// and until when, and how full their quota windows are.
func (s *Server) status(c echo.Context) error {
	quotas, err := s.quotaStatus(c.Request().Context())
	if err != nil {
		return err
	}
	out := []statusJSON{}
	if s.cfg.Cooldowns != nil {
		list, err := s.cfg.Cooldowns.List(c.Request().Context(), s.cfg.Gateway.Now())
		if err != nil {
			return err
		}
		for _, cd := range list {
			out = append(out, statusJSON{Provider: cd.Provider, Model: cd.Model, Class: string(cd.Class), Code: cd.Code,
				ResetAt: cd.ResetAt, Count: cd.Count, LastSeen: cd.LastSeen})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ok", "cooldowns": out, "quotas": quotas})
}

// cooldownJSON is a cooldown for admins: with the provider's message.
type cooldownJSON struct {
	statusJSON
	Message   string    `json:"message"`
	FirstSeen time.Time `json:"first_seen"`
}

func (s *Server) listCooldowns(c echo.Context) error {
	out := []cooldownJSON{}
	if s.cfg.Cooldowns != nil {
		list, err := s.cfg.Cooldowns.List(c.Request().Context(), s.cfg.Gateway.Now())
		if err != nil {
			return err
		}
		for _, cd := range list {
			out = append(out, cooldownJSON{statusJSON: statusJSON{Provider: cd.Provider, Model: cd.Model, Class: string(cd.Class),
				Code: cd.Code, ResetAt: cd.ResetAt, Count: cd.Count, LastSeen: cd.LastSeen}, Message: cd.Message, FirstSeen: cd.FirstSeen})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}

// clearCooldown ends a cooldown now: DELETE /admin/v1/cooldowns/:provider (the whole account)
// or /admin/v1/cooldowns/:provider/:model.
func (s *Server) clearCooldown(c echo.Context) error {
	if s.cfg.Cooldowns == nil {
		return app.Errorf(app.ENOTFOUND, "no cooldown is in force")
	}
	if err := s.cfg.Cooldowns.Clear(c.Request().Context(), c.Param("provider"), c.Param("model")); err != nil {
		return err
	}
	s.audit(c, adminActor(), "", "provider.cooldown_clear", "provider", c.Param("provider")+"/"+c.Param("model"), nil)
	return c.NoContent(http.StatusNoContent)
}
