package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"yosan/app"
	"yosan/billing"
	"yosan/db"
	"yosan/notify"
)

// fileConfig is the YAML config file (YOSAN_CONFIG). Every field is optional; unknown fields
// are an error, so a typo never silently falls back to a default.
type fileConfig struct {
	DefaultCurrency string         `yaml:"default_currency"`
	DefaultTimeZone string         `yaml:"default_timezone"`
	DefaultUSDJPY   string         `yaml:"default_usd_jpy"`
	Global          globalConfig   `yaml:"global"`
	RequestTimeout  string         `yaml:"request_timeout"`
	SettleMargin    string         `yaml:"settle_margin"`
	MaxBodyBytes    int64          `yaml:"max_body_bytes"`
	KeyCacheTTL     string         `yaml:"key_cache_ttl"`
	SettleAsync     bool           `yaml:"settle_async"`
	Sweeper         sweeperConfig  `yaml:"sweeper"`
	Alerts          alertsConfig   `yaml:"alerts"`
	Billing         billingConf    `yaml:"billing"`
	Providers       []providerConf `yaml:"providers"`
	Models          []modelConf    `yaml:"models"`
	Plans           []planConf     `yaml:"plans"`
	Routes          []routeConf    `yaml:"routes"`
	QuotaCooldown   string         `yaml:"quota_cooldown"`
	Limits          limitsConf     `yaml:"limits"`
	ResponseCache   cacheConf      `yaml:"response_cache"`
}

type limitsConf struct {
	PerKey      int            `yaml:"per_key"`
	PerOrg      int            `yaml:"per_org"`
	PerProvider map[string]int `yaml:"per_provider"`
}

type cacheConf struct {
	MaxEntries int   `yaml:"max_entries"`
	MaxBytes   int64 `yaml:"max_bytes"`
}

type routeConf struct {
	Name       string          `yaml:"name"`
	Candidates []candidateConf `yaml:"candidates"`
	// Privacy "sensitive" restricts the route to local backends.
	Privacy   string `yaml:"privacy"`
	Downgrade bool   `yaml:"downgrade"`
	// Cache, when set, caches the route's complete answers: {ttl: 10m}.
	Cache *struct {
		TTL string `yaml:"ttl"`
	} `yaml:"cache"`
}

type candidateConf struct {
	Model string   `yaml:"model"`
	When  []string `yaml:"when"`
}

type globalConfig struct {
	Currency string `yaml:"currency"`
	TimeZone string `yaml:"timezone"`
}

type sweeperConfig struct {
	Interval string `yaml:"interval"`
	Mode     string `yaml:"mode"`
}

type alertsConfig struct {
	// Worker: false runs no delivery worker in this process (another process delivers).
	Worker         *bool     `yaml:"worker"`
	ConsoleURL     string    `yaml:"console_url"`
	OperatorEmails []string  `yaml:"operator_emails"`
	PollInterval   string    `yaml:"poll_interval"`
	RetryFor       string    `yaml:"retry_for"`
	FirstRetry     string    `yaml:"first_retry"`
	Lease          string    `yaml:"lease"`
	WebhookTimeout string    `yaml:"webhook_timeout"`
	SMTP           *smtpConf `yaml:"smtp"`
}

type smtpConf struct {
	Host        string `yaml:"host"`
	Port        int    `yaml:"port"`
	Username    string `yaml:"username"`
	PasswordEnv string `yaml:"password_env"`
	From        string `yaml:"from"`
	TLS         string `yaml:"tls"`
	Timeout     string `yaml:"timeout"`
}

type billingConf struct {
	Issuer           issuerConf   `yaml:"issuer"`
	InvoicePrefix    string       `yaml:"invoice_prefix"`
	CreditNotePrefix string       `yaml:"credit_note_prefix"`
	TaxRounding      string       `yaml:"tax_rounding"`
	MarkupPercent    string       `yaml:"markup_percent"`
	DueDays          *int         `yaml:"due_days"`
	AutoClose        *bool        `yaml:"auto_close"`
	CloseDelay       string       `yaml:"close_delay"`
	Interval         string       `yaml:"interval"`
	FXRates          []fxRateConf `yaml:"fx_rates"`
	Stripe           *stripeConf  `yaml:"stripe"`
}

type issuerConf struct {
	Name               string `yaml:"name"`
	RegistrationNumber string `yaml:"registration_number"`
	Address            string `yaml:"address"`
	Phone              string `yaml:"phone"`
	Email              string `yaml:"email"`
	PaymentTerms       string `yaml:"payment_terms"`
	BankAccount        string `yaml:"bank_account"`
}

type fxRateConf struct {
	Period string `yaml:"period"`
	USDJPY string `yaml:"usd_jpy"`
	Source string `yaml:"source"`
}

type stripeConf struct {
	SecretKeyEnv     string `yaml:"secret_key_env"`
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
	APIURL           string `yaml:"api_url"`
}

type providerConf struct {
	Name      string `yaml:"name"`
	Type      string `yaml:"type"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	// Local marks a backend on the operator's premises (the allowlist privacy: sensitive
	// routes are restricted to); anything not marked is cloud.
	Local bool `yaml:"local"`
	// Quota says how the gateway keeps this account's rate windows (models list the limits).
	Quota *providerQuotaConf `yaml:"quota"`
}

type providerQuotaConf struct {
	// ReserveRatio is the share of every limit left unused (default 0).
	ReserveRatio *float64 `yaml:"reserve_ratio"`
	// TimeZone is where the provider's day (RPD) starts: America/Los_Angeles for Gemini,
	// UTC for the others, unless set.
	TimeZone string `yaml:"timezone"`
}

type quotaConf struct {
	RPM int64 `yaml:"rpm"`
	RPD int64 `yaml:"rpd"`
	TPM int64 `yaml:"tpm"`
}

type priceConf struct {
	From        string `yaml:"from"`
	Input       string `yaml:"input"`
	Output      string `yaml:"output"`
	CachedInput string `yaml:"cached_input"`
	CacheWrite  string `yaml:"cache_write"`
	// CacheWrite1h prices cache writes kept for an hour (Anthropic's 2x), else cache_write.
	CacheWrite1h string `yaml:"cache_write_1h"`
}

type modelConf struct {
	Name            string      `yaml:"name"`
	Provider        string      `yaml:"provider"`
	UpstreamModel   string      `yaml:"upstream_model"`
	Tier            string      `yaml:"tier"`
	Kind            string      `yaml:"kind"`
	MaxOutputTokens int64       `yaml:"max_output_tokens"`
	ContextWindow   int64       `yaml:"context_window"`
	Price           *priceConf  `yaml:"price"`
	Prices          []priceConf `yaml:"prices"`
	Quota           *quotaConf  `yaml:"quota"`
}

type planConf struct {
	Name  string   `yaml:"name"`
	Tiers []string `yaml:"tiers"`
	// ClampMaxTokens lets the gateway lower max_tokens to fit the budget instead of refusing.
	ClampMaxTokens bool `yaml:"clamp_max_tokens"`
}

// Config is the validated configuration.
type Config struct {
	Addr           string
	DatabaseURL    string
	AdminToken     string
	DefaultCurr    string
	DefaultTZ      string
	DefaultUSDJPY  int64
	GlobalCurrency string
	GlobalLocation *time.Location
	RequestTimeout time.Duration
	SettleMargin   time.Duration
	MaxBodyBytes   int64
	KeyCacheTTL    time.Duration
	SettleAsync    bool
	SweepInterval  time.Duration
	SweepRelease   bool
	Alerts         AlertsConfig
	Billing        BillingConfig
	Demo           bool
	DemoLatency    time.Duration
	DemoKey        string
	Providers      []providerConf
	// ProviderKeys holds each provider's secret, read from its api_key_env variable.
	ProviderKeys map[string]string
	Models       []modelConf
	Plans        []app.Plan
	// Routes are the model aliases with their candidate chains.
	Routes []app.Route
	// Quotas are the provider quota windows of the models that declare them, by model name.
	Quotas map[string]*app.Quota
	// QuotaCooldown is how long an exhausted quota without a reset time cools down.
	QuotaCooldown time.Duration
	// Limits bound the upstream calls in flight (per gateway process).
	Limits app.Limits
	// CacheEntries and CacheBytes bound the response cache of routes that opt in.
	CacheEntries int
	CacheBytes   int64
}

// AlertsConfig is the validated alerts section.
type AlertsConfig struct {
	Worker         bool
	ConsoleURL     string
	OperatorEmails []string
	PollInterval   time.Duration
	RetryFor       time.Duration
	FirstRetry     time.Duration
	Lease          time.Duration
	WebhookTimeout time.Duration
	// SMTP is nil when no mail server is configured (email channels are refused).
	SMTP *notify.SMTPConfig
}

// BillingConfig is the validated billing section.
type BillingConfig struct {
	// Enabled is true when an issuer is configured: invoices can be issued.
	Enabled          bool
	Invoice          billing.Config
	InvoicePrefix    string
	CreditNotePrefix string
	AutoClose        bool
	CloseDelay       time.Duration
	Interval         time.Duration
	FXRates          []db.FXRate
	// Stripe is nil when invoices are not mirrored in Stripe.
	Stripe *StripeConfig
}

// StripeConfig says how to reach Stripe.
type StripeConfig struct {
	SecretKey     string
	WebhookSecret string
	APIURL        string
}

var prefixRE = regexp.MustCompile(`^[A-Z0-9]{1,10}$`)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`)

// defaultPlans are the plans out of the box; a config file may redefine or add plans.
var defaultPlans = []app.Plan{
	{Name: "free", Tiers: []string{"free"}},
	{Name: "pro", Tiers: []string{"free", "pro"}},
	{Name: "enterprise", Tiers: []string{"free", "pro", "enterprise"}},
}

// loadConfig reads the environment and the optional config file and validates everything,
// returning one error that lists every problem.
func loadConfig(getenv func(string) string) (*Config, error) {
	var fc fileConfig
	if path := getenv("YOSAN_CONFIG"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config file: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	cfg := &Config{
		Addr:         or(getenv("YOSAN_ADDR"), "127.0.0.1:8080"),
		DatabaseURL:  getenv("DATABASE_URL"),
		DefaultCurr:  or(strings.ToUpper(fc.DefaultCurrency), app.JPY),
		DefaultTZ:    or(fc.DefaultTimeZone, "Asia/Tokyo"),
		MaxBodyBytes: fc.MaxBodyBytes,
		SettleAsync:  fc.SettleAsync,
		Demo:         getenv("YOSAN_DEMO") == "1" || getenv("YOSAN_DEMO") == "true",
		DemoKey:      getenv("YOSAN_DEMO_KEY"),
		ProviderKeys: map[string]string{},
		Models:       fc.Models,
		Providers:    fc.Providers,
	}
	tok, err := secretFromEnv(getenv, "YOSAN_ADMIN_TOKEN")
	if err != nil {
		bad("%v", err)
	}
	cfg.AdminToken = tok
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxBodyBytes < 1024 {
		bad("max_body_bytes must be at least 1024, got %d", cfg.MaxBodyBytes)
	}
	if !app.ValidCurrency(cfg.DefaultCurr) {
		bad("default_currency must be JPY or USD, got %q", fc.DefaultCurrency)
	}
	if _, err := time.LoadLocation(cfg.DefaultTZ); err != nil || cfg.DefaultTZ == "Local" {
		bad("default_timezone %q is not an IANA time zone", cfg.DefaultTZ)
	}
	cfg.DefaultUSDJPY = 150 * app.Micro
	if fc.DefaultUSDJPY != "" {
		if v, err := app.ParseMoney(fc.DefaultUSDJPY); err != nil || v == 0 {
			bad("default_usd_jpy must be a positive decimal string such as \"150\", got %q", fc.DefaultUSDJPY)
		} else {
			cfg.DefaultUSDJPY = v
		}
	}
	cfg.GlobalCurrency = or(strings.ToUpper(fc.Global.Currency), app.JPY)
	if !app.ValidCurrency(cfg.GlobalCurrency) {
		bad("global.currency must be JPY or USD, got %q", fc.Global.Currency)
	}
	if cfg.GlobalLocation, err = time.LoadLocation(or(fc.Global.TimeZone, "Asia/Tokyo")); err != nil || fc.Global.TimeZone == "Local" {
		bad("global.timezone %q is not an IANA time zone", fc.Global.TimeZone)
	}
	cfg.RequestTimeout = duration(bad, "request_timeout", fc.RequestTimeout, 5*time.Minute, time.Second)
	cfg.SettleMargin = duration(bad, "settle_margin", fc.SettleMargin, time.Minute, 0)
	cfg.KeyCacheTTL = duration(bad, "key_cache_ttl", fc.KeyCacheTTL, 2*time.Second, 0)
	cfg.SweepInterval = duration(bad, "sweeper.interval", fc.Sweeper.Interval, 30*time.Second, 100*time.Millisecond)
	switch fc.Sweeper.Mode {
	case "", "charge":
	case "release":
		cfg.SweepRelease = true
	default:
		bad("sweeper.mode must be charge or release, got %q", fc.Sweeper.Mode)
	}
	cfg.Alerts = loadAlerts(bad, getenv, fc.Alerts)
	cfg.Billing = loadBilling(bad, getenv, fc.Billing)
	cfg.DemoLatency = duration(bad, "YOSAN_DEMO_LATENCY", getenv("YOSAN_DEMO_LATENCY"), 0, 0)

	provs := map[string]bool{}
	if cfg.Demo {
		provs["demo"] = true
	}
	for i, p := range fc.Providers {
		where := fmt.Sprintf("providers[%d] (%s)", i, p.Name)
		switch {
		case !nameRE.MatchString(p.Name):
			bad("providers[%d]: name %q must be letters, digits and ._:/-", i, p.Name)
			continue
		case provs[p.Name]:
			bad("%s: provider name is used twice (\"demo\" is taken by YOSAN_DEMO=1)", where)
			continue
		}
		provs[p.Name] = true
		switch p.Type {
		case "openai", "openai-compatible", "ollama", "anthropic", "gemini", "zhipu":
		default:
			bad("%s: type must be openai, openai-compatible, ollama, anthropic, gemini or zhipu, got %q", where, p.Type)
		}
		// The native APIs have a well-known default base URL; the OpenAI-style ones need one.
		defaultURL := p.Type == "anthropic" || p.Type == "gemini" || p.Type == "zhipu"
		if (p.BaseURL != "" || !defaultURL) && !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
			bad("%s: base_url must be an http(s) URL such as https://api.openai.com/v1, got %q", where, p.BaseURL)
		}
		if p.APIKeyEnv != "" {
			key := getenv(p.APIKeyEnv)
			if key == "" {
				bad("%s: api_key_env names %s, which is not set", where, p.APIKeyEnv)
			}
			cfg.ProviderKeys[p.Name] = key
		} else if p.Type == "openai" || defaultURL {
			bad("%s: type %s needs api_key_env (the environment variable holding the key)", where, p.Type)
		}
	}

	plans := map[string]app.Plan{}
	for _, p := range defaultPlans {
		plans[p.Name] = p
	}
	for i, p := range fc.Plans {
		if !nameRE.MatchString(p.Name) {
			bad("plans[%d]: name %q must be letters, digits and ._:/-", i, p.Name)
			continue
		}
		if len(p.Tiers) == 0 {
			bad("plans[%d] (%s): tiers must list at least one tier", i, p.Name)
		}
		plans[p.Name] = app.Plan{Name: p.Name, Tiers: p.Tiers, ClampMaxTokens: p.ClampMaxTokens}
	}
	for _, p := range plans {
		cfg.Plans = append(cfg.Plans, p)
	}

	names := map[string]bool{}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		where := fmt.Sprintf("models[%d] (%s)", i, m.Name)
		if !nameRE.MatchString(m.Name) {
			bad("models[%d]: name %q must be letters, digits and ._:/-", i, m.Name)
		}
		if names[m.Name] {
			bad("%s: model name is used twice", where)
		}
		names[m.Name] = true
		if !provs[m.Provider] {
			bad("%s: provider %q is not defined under providers", where, m.Provider)
		}
		if m.UpstreamModel == "" {
			m.UpstreamModel = m.Name
		}
		if m.Tier == "" {
			bad("%s: tier is required", where)
		}
		if m.Kind == "" {
			m.Kind = app.KindChat
		}
		if m.Kind != app.KindChat && m.Kind != app.KindEmbedding {
			bad("%s: kind must be chat or embedding, got %q", where, m.Kind)
		}
		if m.Kind == app.KindChat && m.MaxOutputTokens <= 0 {
			bad("%s: max_output_tokens must be positive (it bounds the worst case of requests without max_tokens)", where)
		}
		if m.Price == nil && len(m.Prices) == 0 {
			bad("%s: price is required (USD per 1M tokens: input, output, cached_input)", where)
		}
		// price is in force from the start; each of prices from its own moment on.
		froms := map[time.Time]bool{}
		check := func(label string, p priceConf, needFrom bool) {
			if _, err := toPrice(p); err != nil {
				bad("%s: %s: %v", where, label, err)
			}
			if p.From == "" && needFrom {
				bad("%s: %s: from is required (RFC 3339 time or YYYY-MM-DD)", where, label)
				return
			}
			from, err := parseFrom(p.From)
			if err != nil {
				bad("%s: %s: from %q is not an RFC 3339 time or YYYY-MM-DD", where, label, p.From)
				return
			}
			if froms[from] {
				bad("%s: %s: another price already starts at %s", where, label, or(p.From, "the start"))
			}
			froms[from] = true
		}
		if m.Price != nil {
			check("price", *m.Price, false)
		}
		for j, p := range m.Prices {
			check(fmt.Sprintf("prices[%d]", j), p, m.Price != nil || j > 0)
		}
		if m.Price != nil {
			m.Prices = append([]priceConf{*m.Price}, m.Prices...)
		}
	}
	cfg.Quotas = loadQuotas(bad, fc.Providers, cfg.Models)
	cfg.QuotaCooldown = duration(bad, "quota_cooldown", fc.QuotaCooldown, time.Hour, time.Second)
	cfg.Routes = loadRoutes(bad, fc.Routes, names)
	cfg.Limits = app.Limits{PerKey: fc.Limits.PerKey, PerOrg: fc.Limits.PerOrg, PerProvider: fc.Limits.PerProvider}
	if fc.Limits.PerKey < 0 || fc.Limits.PerOrg < 0 {
		bad("limits.per_key and limits.per_org must be 0 (unlimited) or more")
	}
	for name, n := range fc.Limits.PerProvider {
		if !provs[name] {
			bad("limits.per_provider: provider %q is not defined under providers", name)
		}
		if n < 0 {
			bad("limits.per_provider.%s must be 0 (unlimited) or more", name)
		}
	}
	cfg.CacheEntries, cfg.CacheBytes = fc.ResponseCache.MaxEntries, fc.ResponseCache.MaxBytes
	if cfg.CacheEntries == 0 {
		cfg.CacheEntries = 10_000
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.CacheEntries < 0 || cfg.CacheBytes < 0 {
		bad("response_cache.max_entries and max_bytes must be positive")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration:\n  - %s", strings.Join(errs, "\n  - "))
	}
	return cfg, nil
}

// loadQuotas validates the models' quota windows with their providers' reserve ratio and
// time zone. Models that call the same upstream model of the same account share its windows,
// so they must declare the same limits.
func loadQuotas(bad func(string, ...any), provs []providerConf, models []modelConf) map[string]*app.Quota {
	type account struct {
		ratio float64
		loc   *time.Location
	}
	accounts := map[string]account{}
	for i, p := range provs {
		a := account{loc: time.UTC}
		if p.Type == "gemini" {
			a.loc, _ = time.LoadLocation("America/Los_Angeles")
		}
		if p.Quota != nil {
			if r := p.Quota.ReserveRatio; r != nil {
				if *r < 0 || *r >= 1 {
					bad("providers[%d] (%s): quota.reserve_ratio must be at least 0 and below 1, got %v", i, p.Name, *r)
				} else {
					a.ratio = *r
				}
			}
			if tz := p.Quota.TimeZone; tz != "" {
				if loc, err := time.LoadLocation(tz); err != nil || tz == "Local" {
					bad("providers[%d] (%s): quota.timezone %q is not an IANA time zone", i, p.Name, tz)
				} else {
					a.loc = loc
				}
			}
		}
		accounts[p.Name] = a
	}
	out := map[string]*app.Quota{}
	shared := map[string]string{} // provider + upstream model -> first model name
	declared := map[string]quotaConf{}
	for i, m := range models {
		key := m.Provider + "\x00" + m.UpstreamModel
		var qc quotaConf
		if m.Quota != nil {
			qc = *m.Quota
		}
		if first, ok := shared[key]; ok {
			if declared[key] != qc {
				bad("models[%d] (%s): it calls %s/%s like %s, so it shares that model's quota windows and must declare the same quota",
					i, m.Name, m.Provider, m.UpstreamModel, first)
			}
		} else {
			shared[key], declared[key] = m.Name, qc
		}
		if m.Quota == nil {
			continue
		}
		if qc.RPM < 0 || qc.RPD < 0 || qc.TPM < 0 || qc.RPM+qc.RPD+qc.TPM == 0 {
			bad("models[%d] (%s): quota needs at least one of rpm, rpd, tpm, each positive", i, m.Name)
			continue
		}
		a, ok := accounts[m.Provider]
		if !ok {
			a = account{loc: time.UTC}
		}
		q := &app.Quota{RPM: qc.RPM, RPD: qc.RPD, TPM: qc.TPM, ReserveRatio: a.ratio, Location: a.loc}
		for _, w := range []struct {
			name string
			v    int64
		}{{"rpm", qc.RPM}, {"rpd", qc.RPD}, {"tpm", qc.TPM}} {
			if w.v > 0 && q.Effective(w.v) < 1 {
				bad("models[%d] (%s): quota.%s of %d leaves no room once the provider's reserve_ratio of %v is kept",
					i, m.Name, w.name, w.v, a.ratio)
			}
		}
		out[m.Name] = q
	}
	return out
}

// loadRoutes validates the routes against the configured model names (demo models are
// checked when the catalog is built).
func loadRoutes(bad func(string, ...any), rs []routeConf, models map[string]bool) []app.Route {
	classes := map[string]bool{}
	for _, c := range []app.ErrorClass{app.ClassRateLimited, app.ClassQuotaExhausted, app.ClassManualAction,
		app.ClassBackendError, app.ClassSchemaInvalid, app.ClassRequestTooLarge} {
		classes[string(c)] = true
	}
	seen := map[string]bool{}
	var out []app.Route
	for i, r := range rs {
		where := fmt.Sprintf("routes[%d] (%s)", i, r.Name)
		switch {
		case !nameRE.MatchString(r.Name):
			bad("routes[%d]: name %q must be letters, digits and ._:/-", i, r.Name)
			continue
		case seen[r.Name]:
			bad("%s: route name is used twice", where)
		case models[r.Name]:
			bad("%s: a model has this name already", where)
		case len(r.Candidates) == 0:
			bad("%s: candidates must list at least one model", where)
		}
		seen[r.Name] = true
		route := app.Route{Name: r.Name, Sensitive: r.Privacy == "sensitive", Downgrade: r.Downgrade}
		if r.Cache != nil {
			route.CacheTTL = duration(bad, where+": cache.ttl", r.Cache.TTL, 0, time.Second)
			if route.CacheTTL == 0 {
				bad("%s: cache.ttl is required, such as 10m", where)
			}
		}
		if r.Privacy != "" && r.Privacy != "sensitive" {
			bad("%s: privacy must be sensitive (or absent), got %q", where, r.Privacy)
		}
		for j, c := range r.Candidates {
			cand := app.Candidate{Model: c.Model}
			if c.Model == "" {
				bad("%s: candidates[%d]: model is required", where, j)
			}
			for _, w := range c.When {
				if !classes[w] {
					bad("%s: candidates[%d]: when %q is not an error class (rate_limited, quota_exhausted, manual_action, backend_error, schema_invalid, request_too_large)", where, j, w)
				}
				cand.When = append(cand.When, app.ErrorClass(w))
			}
			route.Candidates = append(route.Candidates, cand)
		}
		out = append(out, route)
	}
	return out
}

// loadAlerts validates the alerts section, reporting problems through bad.
func loadAlerts(bad func(string, ...any), getenv func(string) string, ac alertsConfig) AlertsConfig {
	out := AlertsConfig{Worker: ac.Worker == nil || *ac.Worker, ConsoleURL: strings.TrimRight(ac.ConsoleURL, "/")}
	if out.ConsoleURL != "" {
		if u, err := url.Parse(out.ConsoleURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("alerts.console_url must be an absolute http(s) URL such as https://yosan.example.com, got %q", ac.ConsoleURL)
		}
	}
	for i, e := range ac.OperatorEmails {
		a, err := mail.ParseAddress(e)
		if err != nil || a.Name != "" {
			bad("alerts.operator_emails[%d]: %q is not an email address such as ops@example.com", i, e)
			continue
		}
		out.OperatorEmails = append(out.OperatorEmails, a.Address)
	}
	out.PollInterval = duration(bad, "alerts.poll_interval", ac.PollInterval, 2*time.Second, 100*time.Millisecond)
	out.RetryFor = duration(bad, "alerts.retry_for", ac.RetryFor, notify.DefaultRetryFor, time.Minute)
	out.FirstRetry = duration(bad, "alerts.first_retry", ac.FirstRetry, notify.DefaultFirstRetry, 100*time.Millisecond)
	out.WebhookTimeout = duration(bad, "alerts.webhook_timeout", ac.WebhookTimeout, 10*time.Second, 100*time.Millisecond)
	out.Lease = duration(bad, "alerts.lease", ac.Lease, notify.DefaultLease, time.Second)
	if ac.SMTP != nil {
		sc := notify.SMTPConfig{Host: ac.SMTP.Host, Port: ac.SMTP.Port, Username: ac.SMTP.Username, From: ac.SMTP.From,
			TLS: ac.SMTP.TLS}
		if sc.Port == 0 {
			sc.Port = 587
		}
		sc.Timeout = duration(bad, "alerts.smtp.timeout", ac.SMTP.Timeout, notify.DefaultSMTPTimeout, time.Second)
		if ac.SMTP.PasswordEnv != "" {
			sc.Password = getenv(ac.SMTP.PasswordEnv)
			if sc.Password == "" {
				bad("alerts.smtp.password_env names %s, which is not set", ac.SMTP.PasswordEnv)
			}
		}
		if err := sc.Validate(); err != nil {
			bad("alerts.smtp: %v", err)
		}
		out.SMTP = &sc
		// A send must end well inside the lease, or a second worker would take it over.
		if sc.Timeout*2 > out.Lease {
			bad("alerts.lease (%s) must be at least twice alerts.smtp.timeout (%s)", out.Lease, sc.Timeout)
		}
	} else if len(out.OperatorEmails) > 0 {
		bad("alerts.operator_emails needs alerts.smtp (the mail server to send through)")
	}
	if out.WebhookTimeout*2 > out.Lease {
		bad("alerts.lease (%s) must be at least twice alerts.webhook_timeout (%s)", out.Lease, out.WebhookTimeout)
	}
	return out
}

// loadBilling validates the billing section, reporting problems through bad.
func loadBilling(bad func(string, ...any), getenv func(string) string, bc billingConf) BillingConfig {
	out := BillingConfig{InvoicePrefix: or(bc.InvoicePrefix, "INV"), CreditNotePrefix: or(bc.CreditNotePrefix, "CN")}
	is := bc.Issuer
	out.Invoice = billing.Config{Issuer: app.Issuer{Name: strings.TrimSpace(is.Name), RegistrationNumber: strings.TrimSpace(is.RegistrationNumber),
		Address: is.Address, Phone: is.Phone, Email: is.Email, PaymentTerms: is.PaymentTerms, BankAccount: is.BankAccount},
		Rounding: app.TaxRounding(or(bc.TaxRounding, string(app.RoundFloor))), DueDays: 30}
	if bc.DueDays != nil {
		out.Invoice.DueDays = *bc.DueDays
	}
	if bc.MarkupPercent != "" {
		bp, err := billing.ParsePercent(bc.MarkupPercent)
		if err != nil {
			bad("billing.markup_percent: %s", app.ErrorMessage(err))
		}
		out.Invoice.MarkupBP = bp
	}
	out.Enabled = is != (issuerConf{})
	if out.Enabled {
		if err := out.Invoice.Validate(); err != nil {
			bad("billing: %s", app.ErrorMessage(err))
		}
	} else if bc.Stripe != nil || bc.AutoClose != nil && *bc.AutoClose {
		bad("billing.issuer (name and registration_number) is required to issue invoices")
	}
	if !prefixRE.MatchString(out.InvoicePrefix) || !prefixRE.MatchString(out.CreditNotePrefix) || out.InvoicePrefix == out.CreditNotePrefix {
		bad("billing.invoice_prefix and credit_note_prefix must differ and be 1 to 10 capital letters or digits, got %q and %q", out.InvoicePrefix, out.CreditNotePrefix)
	}
	out.AutoClose = out.Enabled && (bc.AutoClose == nil || *bc.AutoClose)
	out.CloseDelay = duration(bad, "billing.close_delay", bc.CloseDelay, time.Hour, 0)
	out.Interval = duration(bad, "billing.interval", bc.Interval, time.Minute, 100*time.Millisecond)
	seen := map[string]bool{}
	for i, r := range bc.FXRates {
		rate, err := app.ParseMoney(r.USDJPY)
		switch {
		case !db.ValidPeriod(r.Period):
			bad("billing.fx_rates[%d]: period %q must be a month such as 2026-12", i, r.Period)
		case seen[r.Period]:
			bad("billing.fx_rates[%d]: period %s is listed twice", i, r.Period)
		case err != nil || rate <= 0:
			bad("billing.fx_rates[%d]: usd_jpy must be a positive decimal string such as \"151.20\", got %q", i, r.USDJPY)
		case strings.TrimSpace(r.Source) == "":
			bad("billing.fx_rates[%d]: source is required (it is printed on the invoice, e.g. \"MUFG TTM 2026-11-30\")", i)
		default:
			out.FXRates = append(out.FXRates, db.FXRate{Period: r.Period, USDJPY: rate, Source: strings.TrimSpace(r.Source)})
		}
		seen[r.Period] = true
	}
	if sc := bc.Stripe; sc != nil {
		out.Stripe = &StripeConfig{APIURL: strings.TrimRight(sc.APIURL, "/")}
		if sc.SecretKeyEnv == "" || getenv(sc.SecretKeyEnv) == "" {
			bad("billing.stripe.secret_key_env must name a set environment variable holding the Stripe secret key (sk_...)")
		} else {
			out.Stripe.SecretKey = getenv(sc.SecretKeyEnv)
		}
		if sc.WebhookSecretEnv != "" {
			if out.Stripe.WebhookSecret = getenv(sc.WebhookSecretEnv); out.Stripe.WebhookSecret == "" {
				bad("billing.stripe.webhook_secret_env names %s, which is not set", sc.WebhookSecretEnv)
			}
		}
		if out.Stripe.APIURL != "" {
			if u, err := url.Parse(out.Stripe.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("billing.stripe.api_url must be an http(s) URL such as http://127.0.0.1:12111 (stripe-mock), got %q", sc.APIURL)
			}
		}
	}
	return out
}

func toPrice(p priceConf) (app.Price, error) {
	var out app.Price
	var err error
	if out.InputPerM, err = app.ParseMoney(p.Input); err != nil {
		return out, fmt.Errorf("input: %s", app.ErrorMessage(err))
	}
	if p.Output == "" {
		p.Output = "0"
	}
	if out.OutputPerM, err = app.ParseMoney(p.Output); err != nil {
		return out, fmt.Errorf("output: %s", app.ErrorMessage(err))
	}
	if p.CachedInput != "" {
		if out.CachedPerM, err = app.ParseMoney(p.CachedInput); err != nil {
			return out, fmt.Errorf("cached_input: %s", app.ErrorMessage(err))
		}
	}
	if p.CacheWrite != "" {
		if out.CacheWritePerM, err = app.ParseMoney(p.CacheWrite); err != nil {
			return out, fmt.Errorf("cache_write: %s", app.ErrorMessage(err))
		}
	}
	if p.CacheWrite1h != "" {
		if out.CacheWrite1hPerM, err = app.ParseMoney(p.CacheWrite1h); err != nil {
			return out, fmt.Errorf("cache_write_1h: %s", app.ErrorMessage(err))
		}
	}
	return out, nil
}

func parseFrom(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", s)
}

// duration parses a setting of at least minimum, reporting anything else through bad.
func duration(bad func(string, ...any), name, s string, def, minimum time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < minimum {
		atLeast := ""
		if minimum > 0 {
			atLeast = " of at least " + minimum.String()
		}
		bad("%s must be a duration%s such as 30s or 5m, got %q", name, atLeast, s)
		return def
	}
	return d
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// secretFromEnv reads NAME, or the file named by NAME_FILE (trailing newline trimmed).
func secretFromEnv(getenv func(string) string, name string) (string, error) {
	if v := getenv(name); v != "" {
		return v, nil
	}
	if f := getenv(name + "_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read %s_FILE: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}
