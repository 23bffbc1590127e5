package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"yosan/app"
)

// env is a fake environment for loadConfig.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// mustConfigFile writes yaml to a file in a temporary directory and returns its path.
func mustConfigFile(tb testing.TB, yaml string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "yosan.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// load runs loadConfig with yaml as the config file ("" for none) on top of e.
func load(tb testing.TB, yaml string, e env) (*Config, error) {
	tb.Helper()
	if e == nil {
		e = env{}
	}
	if yaml != "" {
		e["YOSAN_CONFIG"] = mustConfigFile(tb, yaml)
	}
	return loadConfig(e.get)
}

func mustLoad(tb testing.TB, yaml string, e env) *Config {
	tb.Helper()
	cfg, err := load(tb, yaml, e)
	if err != nil {
		tb.Fatalf("loadConfig: %v", err)
	}
	return cfg
}

func planNames(cfg *Config) string {
	var names []string
	for _, p := range cfg.Plans {
		names = append(names, p.Name+"="+strings.Join(p.Tiers, "+"))
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func TestLoadConfigDefaults(t *testing.T) {
	check := func(t *testing.T, cfg *Config) {
		t.Helper()
		if cfg.Addr != "127.0.0.1:8080" || cfg.DatabaseURL != "" || cfg.AdminToken != "" {
			t.Errorf("addr %q database %q admin token %q", cfg.Addr, cfg.DatabaseURL, cfg.AdminToken)
		}
		if cfg.DefaultCurr != app.JPY || cfg.DefaultTZ != "Asia/Tokyo" || cfg.DefaultUSDJPY != 150*app.Micro {
			t.Errorf("org defaults %s %s %d", cfg.DefaultCurr, cfg.DefaultTZ, cfg.DefaultUSDJPY)
		}
		if cfg.GlobalCurrency != app.JPY || cfg.GlobalLocation.String() != "Asia/Tokyo" {
			t.Errorf("global %s %s", cfg.GlobalCurrency, cfg.GlobalLocation)
		}
		if cfg.RequestTimeout != 5*time.Minute || cfg.SettleMargin != time.Minute || cfg.KeyCacheTTL != 2*time.Second ||
			cfg.SweepInterval != 30*time.Second || cfg.SweepRelease || cfg.DemoLatency != 0 {
			t.Errorf("durations %+v", cfg)
		}
		if cfg.MaxBodyBytes != 4<<20 {
			t.Errorf("MaxBodyBytes = %d", cfg.MaxBodyBytes)
		}
		if cfg.Demo || cfg.DemoKey != "" || len(cfg.Providers) != 0 || len(cfg.Models) != 0 || len(cfg.ProviderKeys) != 0 {
			t.Errorf("demo %v providers %v models %v", cfg.Demo, cfg.Providers, cfg.Models)
		}
		if got := planNames(cfg); got != "enterprise=free+pro+enterprise free=free pro=free+pro" {
			t.Errorf("plans %s", got)
		}
	}
	t.Run("NoFile", func(t *testing.T) { check(t, mustLoad(t, "", nil)) })
	t.Run("EmptyFile", func(t *testing.T) { check(t, mustLoad(t, "\n", nil)) })
	t.Run("CommentsOnly", func(t *testing.T) { check(t, mustLoad(t, "# nothing here\n", nil)) })
}

func TestLoadConfigEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   env
		check func(*Config) bool
	}{
		{"Addr", env{"YOSAN_ADDR": ":9090"}, func(c *Config) bool { return c.Addr == ":9090" }},
		{"DatabaseURL", env{"DATABASE_URL": "postgres://x/y"}, func(c *Config) bool { return c.DatabaseURL == "postgres://x/y" }},
		{"AdminToken", env{"YOSAN_ADMIN_TOKEN": "tok"}, func(c *Config) bool { return c.AdminToken == "tok" }},
		{"Demo1", env{"YOSAN_DEMO": "1"}, func(c *Config) bool { return c.Demo }},
		{"DemoTrue", env{"YOSAN_DEMO": "true"}, func(c *Config) bool { return c.Demo }},
		{"DemoYesIsOff", env{"YOSAN_DEMO": "yes"}, func(c *Config) bool { return !c.Demo }},
		{"DemoKey", env{"YOSAN_DEMO_KEY": "ysk-demo-0123456789abcdef"}, func(c *Config) bool { return c.DemoKey == "ysk-demo-0123456789abcdef" }},
		{"DemoLatency", env{"YOSAN_DEMO_LATENCY": "250ms"}, func(c *Config) bool { return c.DemoLatency == 250*time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if cfg := mustLoad(t, "", tt.env); !tt.check(cfg) {
				t.Errorf("config %+v", cfg)
			}
		})
	}
}

func TestLoadConfigAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		cfg := mustLoad(t, "", env{"YOSAN_ADMIN_TOKEN_FILE": file})
		if cfg.AdminToken != "s3cret-from-file" {
			t.Errorf("AdminToken = %q", cfg.AdminToken)
		}
	})
	t.Run("VariableWins", func(t *testing.T) {
		cfg := mustLoad(t, "", env{"YOSAN_ADMIN_TOKEN": "from-env", "YOSAN_ADMIN_TOKEN_FILE": file})
		if cfg.AdminToken != "from-env" {
			t.Errorf("AdminToken = %q", cfg.AdminToken)
		}
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		_, err := load(t, "", env{"YOSAN_ADMIN_TOKEN_FILE": filepath.Join(dir, "nope")})
		if err == nil || !strings.Contains(err.Error(), "read YOSAN_ADMIN_TOKEN_FILE") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestLoadConfigFile(t *testing.T) {
	cfg := mustLoad(t, `
default_currency: usd
default_timezone: UTC
default_usd_jpy: "151.25"
global:
  currency: USD
  timezone: America/New_York
request_timeout: 90s
settle_margin: 2m
max_body_bytes: 2048
key_cache_ttl: 0s
sweeper:
  interval: 1m
  mode: release
providers:
  - name: openai
    type: openai
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
  - name: local
    type: ollama
    base_url: http://127.0.0.1:11434/v1
plans:
  - name: pro
    tiers: [free, pro, beta]
  - name: team
    tiers: [free]
models:
  - name: gpt-4o
    provider: openai
    upstream_model: gpt-4o-2024-08-06
    tier: pro
    max_output_tokens: 16384
    context_window: 128000
    price: {input: "2.50", output: "10", cached_input: "1.25"}
    prices:
      - {from: "2026-04-01", input: "2", output: "8"}
      - {from: "2026-10-01T00:00:00+09:00", input: "1.5", output: "6"}
  - name: embed
    provider: local
    tier: free
    kind: embedding
    prices:
      - {input: "0.02"}
`, env{"OPENAI_API_KEY": "sk-test"})
	if cfg.DefaultCurr != app.USD || cfg.DefaultTZ != "UTC" || cfg.DefaultUSDJPY != 151_250_000 {
		t.Errorf("org defaults %s %s %d", cfg.DefaultCurr, cfg.DefaultTZ, cfg.DefaultUSDJPY)
	}
	if cfg.GlobalCurrency != app.USD || cfg.GlobalLocation.String() != "America/New_York" {
		t.Errorf("global %s %s", cfg.GlobalCurrency, cfg.GlobalLocation)
	}
	if cfg.RequestTimeout != 90*time.Second || cfg.SettleMargin != 2*time.Minute || cfg.KeyCacheTTL != 0 ||
		cfg.SweepInterval != time.Minute || !cfg.SweepRelease || cfg.MaxBodyBytes != 2048 {
		t.Errorf("config %+v", cfg)
	}
	if cfg.ProviderKeys["openai"] != "sk-test" || len(cfg.ProviderKeys) != 1 || len(cfg.Providers) != 2 {
		t.Errorf("providers %+v keys %v", cfg.Providers, cfg.ProviderKeys)
	}
	if got := planNames(cfg); got != "enterprise=free+pro+enterprise free=free pro=free+pro+beta team=free" {
		t.Errorf("plans %s", got)
	}
	if len(cfg.Models) != 2 {
		t.Fatalf("models %+v", cfg.Models)
	}
	gpt := cfg.Models[0]
	if gpt.UpstreamModel != "gpt-4o-2024-08-06" || gpt.Kind != app.KindChat || len(gpt.Prices) != 3 || gpt.Prices[0].From != "" {
		t.Errorf("gpt-4o %+v", gpt)
	}
	p, err := toPrice(gpt.Prices[0])
	if err != nil || p != (app.Price{InputPerM: 2_500_000, OutputPerM: 10_000_000, CachedPerM: 1_250_000}) {
		t.Errorf("first price %+v %v", p, err)
	}
	from, err := parseFrom(gpt.Prices[2].From)
	if err != nil || !from.Equal(time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)) {
		t.Errorf("from %s %v", from, err)
	}
	from, err = parseFrom(gpt.Prices[1].From)
	if err != nil || !from.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("from %s %v", from, err)
	}
	embed := cfg.Models[1]
	if embed.UpstreamModel != "embed" || embed.Kind != app.KindEmbedding || embed.MaxOutputTokens != 0 {
		t.Errorf("embed %+v", embed)
	}
	if p, err := toPrice(embed.Prices[0]); err != nil || p != (app.Price{InputPerM: 20_000}) {
		t.Errorf("embed price %+v %v", p, err)
	}
}

// A model on the local provider, valid unless a test changes it.
const local = `
providers:
  - {name: p, type: openai-compatible, base_url: "http://127.0.0.1:11434/v1"}
`

func TestLoadConfigErrors(t *testing.T) {
	model := func(fields string) string {
		return local + "models:\n  - {name: m, provider: p, tier: free, max_output_tokens: 100, " + fields + "}\n"
	}
	price := `price: {input: "1", output: "2"}`
	tests := []struct {
		name string
		yaml string
		env  env
		msg  string
	}{
		{"ErrUnknownField", "request_timout: 30s\n", nil, "field request_timout not found"},
		{"ErrUnknownNestedField", model(price + `, prize: 3`), nil, "field prize not found"},
		{"ErrUnknownProviderField", "providers:\n  - {name: p, type: ollama, base_url: 'http://x', apikey: k}\n", nil, "field apikey not found"},
		{"ErrMalformedYAML", "providers: [\n", nil, "config file"},
		{"ErrWrongType", "max_body_bytes: lots\n", nil, "config file"},
		{"ErrMaxBodyBytes", "max_body_bytes: 100\n", nil, "max_body_bytes must be at least 1024, got 100"},
		{"ErrMaxBodyBytesNegative", "max_body_bytes: -1\n", nil, "max_body_bytes must be at least 1024, got -1"},
		{"ErrDefaultCurrency", "default_currency: EUR\n", nil, `default_currency must be JPY or USD, got "EUR"`},
		{"ErrDefaultTimeZone", "default_timezone: Mars/Base\n", nil, `default_timezone "Mars/Base" is not an IANA time zone`},
		{"ErrDefaultUSDJPY", "default_usd_jpy: abc\n", nil, `default_usd_jpy must be a positive decimal string such as "150", got "abc"`},
		{"ErrDefaultUSDJPYZero", "default_usd_jpy: '0'\n", nil, `default_usd_jpy must be a positive decimal string such as "150", got "0"`},
		{"ErrGlobalCurrency", "global: {currency: GBP}\n", nil, `global.currency must be JPY or USD, got "GBP"`},
		{"ErrGlobalTimeZone", "global: {timezone: Nowhere/Place}\n", nil, `global.timezone "Nowhere/Place" is not an IANA time zone`},
		{"ErrRequestTimeout", "request_timeout: 5 minutes\n", nil, `request_timeout must be a duration of at least 1s such as 30s or 5m, got "5 minutes"`},
		{"ErrRequestTimeoutNegative", "request_timeout: -1s\n", nil, `request_timeout must be a duration of at least 1s such as 30s or 5m, got "-1s"`},
		{"ErrSettleMargin", "settle_margin: 1\n", nil, `settle_margin must be a duration such as 30s or 5m, got "1"`},
		{"ErrKeyCacheTTL", "key_cache_ttl: forever\n", nil, `key_cache_ttl must be a duration such as 30s or 5m, got "forever"`},
		{"ErrSweeperInterval", "sweeper: {interval: often}\n", nil, `sweeper.interval must be a duration of at least 100ms such as 30s or 5m, got "often"`},
		{"ErrSweeperMode", "sweeper: {mode: delete}\n", nil, `sweeper.mode must be charge or release, got "delete"`},
		{"ErrDemoLatency", "", env{"YOSAN_DEMO_LATENCY": "fast"}, `YOSAN_DEMO_LATENCY must be a duration such as 30s or 5m, got "fast"`},
		{"ErrProviderName", "providers:\n  - {name: my provider, type: ollama, base_url: 'http://x'}\n", nil, `providers[0]: name "my provider" must be letters, digits and ._:/-`},
		{"ErrProviderNameEmpty", "providers:\n  - {type: ollama, base_url: 'http://x'}\n", nil, `providers[0]: name "" must be letters, digits and ._:/-`},
		{"ErrProviderDuplicate", "providers:\n  - {name: p, type: ollama, base_url: 'http://x'}\n  - {name: p, type: ollama, base_url: 'http://y'}\n", nil,
			`providers[1] (p): provider name is used twice`},
		{"ErrProviderDemoTaken", "providers:\n  - {name: demo, type: ollama, base_url: 'http://x'}\n", env{"YOSAN_DEMO": "1"},
			`providers[0] (demo): provider name is used twice ("demo" is taken by YOSAN_DEMO=1)`},
		{"ErrProviderType", "providers:\n  - {name: p, type: bedrock, base_url: 'https://x'}\n", nil, `providers[0] (p): type must be openai, openai-compatible, ollama, anthropic, gemini or zhipu, got "bedrock"`},
		{"ErrNativeNeedsKey", "providers:\n  - {name: p, type: anthropic}\n", nil, `providers[0] (p): type anthropic needs api_key_env`},
		{"ErrProviderBaseURL", "providers:\n  - {name: p, type: ollama, base_url: api.openai.com}\n", nil,
			`providers[0] (p): base_url must be an http(s) URL such as https://api.openai.com/v1, got "api.openai.com"`},
		{"ErrAPIKeyEnvUnset", "providers:\n  - {name: openai, type: openai, base_url: 'https://api.openai.com/v1', api_key_env: OPENAI_API_KEY}\n", nil,
			`providers[0] (openai): api_key_env names OPENAI_API_KEY, which is not set`},
		{"ErrAPIKeyEnvEmpty", "providers:\n  - {name: openai, type: openai, base_url: 'https://api.openai.com/v1', api_key_env: OPENAI_API_KEY}\n", env{"OPENAI_API_KEY": ""},
			`providers[0] (openai): api_key_env names OPENAI_API_KEY, which is not set`},
		{"ErrOpenAINeedsKey", "providers:\n  - {name: openai, type: openai, base_url: 'https://api.openai.com/v1'}\n", nil,
			`providers[0] (openai): type openai needs api_key_env`},
		{"ErrPlanName", "plans:\n  - {name: '', tiers: [free]}\n", nil, `plans[0]: name "" must be letters, digits and ._:/-`},
		{"ErrPlanTiers", "plans:\n  - {name: gold}\n", nil, `plans[0] (gold): tiers must list at least one tier`},
		{"ErrModelName", local + "models:\n  - {name: bad name, provider: p, tier: free, max_output_tokens: 1, " + price + "}\n", nil, `models[0]: name "bad name" must be letters, digits and ._:/-`},
		{"ErrModelDuplicate", local + "models:\n  - {name: m, provider: p, tier: free, max_output_tokens: 1, " + price + "}\n  - {name: m, provider: p, tier: free, max_output_tokens: 1, " + price + "}\n", nil,
			`models[1] (m): model name is used twice`},
		{"ErrModelProvider", "models:\n  - {name: m, provider: nope, tier: free, max_output_tokens: 1, " + price + "}\n", nil, `models[0] (m): provider "nope" is not defined under providers`},
		{"ErrModelDemoProviderWithoutDemo", "models:\n  - {name: m, provider: demo, tier: free, max_output_tokens: 1, " + price + "}\n", nil, `models[0] (m): provider "demo" is not defined under providers`},
		{"ErrModelTier", local + "models:\n  - {name: m, provider: p, max_output_tokens: 1, " + price + "}\n", nil, `models[0] (m): tier is required`},
		{"ErrModelKind", model(price + `, kind: image`), nil, `models[0] (m): kind must be chat or embedding, got "image"`},
		{"ErrModelMaxOutput", local + "models:\n  - {name: m, provider: p, tier: free, " + price + "}\n", nil, `models[0] (m): max_output_tokens must be positive`},
		{"ErrModelPrice", model(``), nil, `models[0] (m): price is required (USD per 1M tokens: input, output, cached_input)`},
		{"ErrPriceInput", model(`price: {input: "x"}`), nil, `models[0] (m): price: input: amount "x" is not a non-negative decimal number`},
		{"ErrPriceInputMissing", model(`price: {output: "1"}`), nil, `models[0] (m): price: input: amount is empty`},
		{"ErrPriceOutput", model(`price: {input: "1", output: "-2"}`), nil, `models[0] (m): price: output: amount "-2" is not a non-negative decimal number`},
		{"ErrPriceCached", model(`price: {input: "1", cached_input: "0.1234567"}`), nil, `models[0] (m): price: cached_input: amount "0.1234567" has more than 6 decimal places`},
		{"ErrPriceFromMissing", model(`prices: [{input: "1"}, {input: "2"}]`), nil, `models[0] (m): prices[1]: from is required (RFC 3339 time or YYYY-MM-DD)`},
		{"ErrPriceFrom", model(`prices: [{from: yesterday, input: "1"}]`), nil, `models[0] (m): prices[0]: from "yesterday" is not an RFC 3339 time or YYYY-MM-DD`},
		// The index names the entry of the user's prices list, not of price + prices merged.
		{"ErrPriceFromMissingAfterPrice", model(price + `, prices: [{input: "2"}]`), nil, `models[0] (m): prices[0]: from is required`},
		// A zero interval makes time.NewTicker panic in the sweeper.
		{"ErrSweeperIntervalZero", "sweeper: {interval: 0s}\n", nil, `sweeper.interval must be`},
		// A zero request timeout times out (and charges) every request.
		{"ErrRequestTimeoutZero", "request_timeout: 0s\n", nil, `request_timeout must be`},
		// Admin org creation rejects "Local", so it cannot be the default either.
		{"ErrDefaultTimeZoneLocal", "default_timezone: Local\n", nil, `default_timezone "Local" is not an IANA time zone`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, tt.yaml, tt.env)
			if err == nil {
				t.Fatalf("loaded %+v, want an error containing %q", cfg, tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
	t.Run("ErrMissingFile", func(t *testing.T) {
		_, err := loadConfig(env{"YOSAN_CONFIG": filepath.Join(t.TempDir(), "nope.yaml")}.get)
		if err == nil || !strings.Contains(err.Error(), "read config file") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("ErrEveryProblemListed", func(t *testing.T) {
		_, err := load(t, "default_currency: EUR\nsweeper: {mode: x}\nmax_body_bytes: 1\n", nil)
		if err == nil {
			t.Fatal("loaded")
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "invalid configuration:\n  - ") || strings.Count(msg, "\n  - ") != 3 {
			t.Errorf("error %q: want the three problems listed", msg)
		}
	})
}

func TestLoadConfigModels(t *testing.T) {
	t.Run("DemoProvider", func(t *testing.T) {
		cfg := mustLoad(t, "models:\n  - {name: demo-mini, provider: demo, tier: pro, max_output_tokens: 10, price: {input: '0.1'}}\n", env{"YOSAN_DEMO": "1"})
		if len(cfg.Models) != 1 || cfg.Models[0].Provider != "demo" || cfg.Models[0].UpstreamModel != "demo-mini" {
			t.Errorf("models %+v", cfg.Models)
		}
	})
	t.Run("OutputDefaultsToZero", func(t *testing.T) {
		p, err := toPrice(priceConf{Input: "1"})
		if err != nil || p != (app.Price{InputPerM: app.Micro}) {
			t.Errorf("price %+v %v", p, err)
		}
	})
	t.Run("SingleDatedPrice", func(t *testing.T) {
		cfg := mustLoad(t, local+"models:\n  - {name: m, provider: p, tier: free, max_output_tokens: 1, prices: [{from: '2026-01-01', input: '1'}]}\n", nil)
		if len(cfg.Models[0].Prices) != 1 || cfg.Models[0].Prices[0].From != "2026-01-01" {
			t.Errorf("prices %+v", cfg.Models[0].Prices)
		}
	})
}

func TestLoadConfigAlerts(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		a := mustLoad(t, "", nil).Alerts
		if !a.Worker || a.SMTP != nil || a.ConsoleURL != "" || a.PollInterval != 2*time.Second ||
			a.RetryFor != 26*time.Hour || a.FirstRetry != 30*time.Second || a.Lease != 2*time.Minute || a.WebhookTimeout != 10*time.Second {
			t.Errorf("defaults %+v", a)
		}
	})
	t.Run("Full", func(t *testing.T) {
		a := mustLoad(t, `alerts:
  worker: false
  console_url: https://yosan.example.com/
  operator_emails: [ops@example.com]
  poll_interval: 5s
  retry_for: 48h
  first_retry: 1m
  lease: 3m
  webhook_timeout: 20s
  smtp: {host: smtp.example.com, port: 465, username: alerts, password_env: SMTP_PW, from: "Yosan <alerts@example.com>", tls: tls, timeout: 45s}
`, env{"SMTP_PW": "s3cret"}).Alerts
		if a.Worker || a.ConsoleURL != "https://yosan.example.com" || len(a.OperatorEmails) != 1 || a.RetryFor != 48*time.Hour ||
			a.FirstRetry != time.Minute || a.Lease != 3*time.Minute || a.WebhookTimeout != 20*time.Second {
			t.Errorf("alerts %+v", a)
		}
		if s := a.SMTP; s == nil || s.Host != "smtp.example.com" || s.Port != 465 || s.Password != "s3cret" || s.TLS != "tls" || s.Timeout != 45*time.Second {
			t.Errorf("smtp %+v", a.SMTP)
		}
	})
	t.Run("SMTPPortDefault", func(t *testing.T) {
		a := mustLoad(t, "alerts:\n  smtp: {host: localhost, from: a@example.com}\n", nil).Alerts
		if a.SMTP == nil || a.SMTP.Port != 587 {
			t.Errorf("smtp %+v", a.SMTP)
		}
	})
	for _, tt := range []struct {
		name, yaml string
		env        env
		msg        string
	}{
		{"ErrOperatorWithoutSMTP", "alerts:\n  operator_emails: [ops@example.com]\n", nil, "alerts.operator_emails needs alerts.smtp"},
		{"ErrOperatorEmail", "alerts:\n  operator_emails: [not-an-address]\n", nil, `alerts.operator_emails[0]: "not-an-address" is not an email address`},
		{"ErrConsoleURL", "alerts:\n  console_url: yosan.example.com\n", nil, "alerts.console_url must be an absolute http(s) URL"},
		{"ErrPoll", "alerts:\n  poll_interval: 1ms\n", nil, "alerts.poll_interval must be a duration of at least 100ms"},
		{"ErrRetryFor", "alerts:\n  retry_for: soon\n", nil, "alerts.retry_for must be a duration"},
		{"ErrLeaseShort", "alerts:\n  lease: 5s\n", nil, "alerts.lease (5s) must be at least twice alerts.webhook_timeout (10s)"},
		{"ErrSMTPHost", "alerts:\n  smtp: {from: a@example.com}\n", nil, "alerts.smtp:"},
		{"ErrSMTPFrom", "alerts:\n  smtp: {host: localhost, from: nobody}\n", nil, "alerts.smtp:"},
		{"ErrSMTPTLS", "alerts:\n  smtp: {host: localhost, from: a@example.com, tls: maybe}\n", nil, "alerts.smtp:"},
		{"ErrSMTPPasswordEnv", "alerts:\n  smtp: {host: localhost, from: a@example.com, username: u, password_env: NOPE}\n", nil, "alerts.smtp.password_env names NOPE, which is not set"},
		{"ErrSMTPClearPassword", "alerts:\n  smtp: {host: smtp.example.com, from: a@example.com, username: u, password_env: PW, tls: none}\n", env{"PW": "x"}, "alerts.smtp:"},
		{"ErrUnknownField", "alerts:\n  smtp_host: x\n", nil, "field smtp_host not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to contain %q", err, tt.msg)
			}
		})
	}
}

func TestLoadConfigBilling(t *testing.T) {
	t.Run("Off", func(t *testing.T) {
		b := mustLoad(t, "", nil).Billing
		if b.Enabled || b.AutoClose || b.Stripe != nil || b.InvoicePrefix != "INV" || b.CreditNotePrefix != "CN" {
			t.Errorf("defaults %+v", b)
		}
	})
	t.Run("Full", func(t *testing.T) {
		b := mustLoad(t, `billing:
  issuer: {name: Yosan 株式会社, registration_number: T7123456789012, address: Tokyo, payment_terms: 30 days}
  invoice_prefix: YSN
  credit_note_prefix: YCN
  tax_rounding: half_up
  markup_percent: "-2.5"
  due_days: 14
  close_delay: 2h
  interval: 5m
  fx_rates:
    - {period: "2026-12", usd_jpy: "151.20", source: "MUFG TTM 2026-11-30"}
  stripe: {secret_key_env: SK, webhook_secret_env: WH, api_url: "http://127.0.0.1:12111/"}
`, env{"SK": "sk_test_x", "WH": "whsec_x"}).Billing
		if !b.Enabled || !b.AutoClose || b.InvoicePrefix != "YSN" || b.Invoice.Rounding != "half_up" || b.Invoice.MarkupBP != -250 ||
			b.Invoice.DueDays != 14 || b.CloseDelay != 2*time.Hour || b.Interval != 5*time.Minute {
			t.Errorf("billing %+v", b)
		}
		if len(b.FXRates) != 1 || b.FXRates[0].USDJPY != 151_200_000 || b.FXRates[0].Source != "MUFG TTM 2026-11-30" {
			t.Errorf("fx %+v", b.FXRates)
		}
		if b.Stripe == nil || b.Stripe.SecretKey != "sk_test_x" || b.Stripe.WebhookSecret != "whsec_x" || b.Stripe.APIURL != "http://127.0.0.1:12111" {
			t.Errorf("stripe %+v", b.Stripe)
		}
	})
	for _, tt := range []struct {
		name, yaml string
		env        env
		msg        string
	}{
		{"ErrRegistration", "billing:\n  issuer: {name: X, registration_number: T1234567890123}\n", nil, "billing: registration number"},
		{"ErrIssuerName", "billing:\n  issuer: {registration_number: T7123456789012}\n", nil, "issuer's name is required"},
		{"ErrRounding", "billing:\n  issuer: {name: X, registration_number: T7123456789012}\n  tax_rounding: bankers\n", nil, "tax rounding must be floor, ceil or half_up"},
		{"ErrMarkup", "billing:\n  markup_percent: lots\n", nil, "billing.markup_percent"},
		{"ErrStripeWithoutIssuer", "billing:\n  stripe: {secret_key_env: SK}\n", env{"SK": "x"}, "billing.issuer (name and registration_number) is required"},
		{"ErrStripeKey", "billing:\n  issuer: {name: X, registration_number: T7123456789012}\n  stripe: {secret_key_env: NOPE}\n", nil, "billing.stripe.secret_key_env must name a set environment variable"},
		{"ErrStripeURL", "billing:\n  issuer: {name: X, registration_number: T7123456789012}\n  stripe: {secret_key_env: SK, api_url: stripe}\n", env{"SK": "x"}, "billing.stripe.api_url must be an http(s) URL"},
		{"ErrFXPeriod", "billing:\n  fx_rates: [{period: 2026-13, usd_jpy: '150', source: x}]\n", nil, "billing.fx_rates[0]: period"},
		{"ErrFXRate", "billing:\n  fx_rates: [{period: 2026-12, usd_jpy: '-1', source: x}]\n", nil, "usd_jpy must be a positive decimal"},
		{"ErrFXSource", "billing:\n  fx_rates: [{period: 2026-12, usd_jpy: '150'}]\n", nil, "source is required"},
		{"ErrFXTwice", "billing:\n  fx_rates: [{period: 2026-12, usd_jpy: '150', source: a}, {period: 2026-12, usd_jpy: '151', source: b}]\n", nil, "listed twice"},
		{"ErrPrefix", "billing:\n  invoice_prefix: inv-\n", nil, "billing.invoice_prefix and credit_note_prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to contain %q", err, tt.msg)
			}
		})
	}
}

func TestLoadConfigRoutes(t *testing.T) {
	base := "providers:\n  - {name: p, type: openai-compatible, base_url: 'http://127.0.0.1:1/v1'}\nmodels:\n" +
		"  - {name: a, provider: p, tier: free, max_output_tokens: 100, price: {input: '1', output: '2'}}\n" +
		"  - {name: b, provider: p, tier: free, max_output_tokens: 100, price: {input: '1', output: '2'}}\n"
	t.Run("OK", func(t *testing.T) {
		cfg := mustLoad(t, base+"quota_cooldown: 2h\nroutes:\n  - name: auto\n    downgrade: true\n    privacy: sensitive\n    candidates:\n      - model: a\n      - {model: b, when: [rate_limited, quota_exhausted]}\n", nil)
		if !cfg.Routes[0].Sensitive || !cfg.Routes[0].Downgrade {
			t.Errorf("route flags %+v", cfg.Routes[0])
		}
		if len(cfg.Routes) != 1 || cfg.Routes[0].Name != "auto" || len(cfg.Routes[0].Candidates) != 2 ||
			len(cfg.Routes[0].Candidates[1].When) != 2 || cfg.QuotaCooldown != 2*time.Hour {
			t.Errorf("routes %+v cooldown %s", cfg.Routes, cfg.QuotaCooldown)
		}
	})
	for _, tt := range []struct{ name, yaml, msg string }{
		{"ErrClass", "routes:\n  - {name: auto, candidates: [{model: a, when: [sometimes]}]}\n", `when "sometimes" is not an error class`},
		{"ErrNoCandidates", "routes:\n  - {name: auto, candidates: []}\n", "candidates must list at least one model"},
		{"ErrModelName", "routes:\n  - {name: a, candidates: [{model: b}]}\n", "a model has this name already"},
		{"ErrTwice", "routes:\n  - {name: x, candidates: [{model: a}]}\n  - {name: x, candidates: [{model: b}]}\n", "route name is used twice"},
		{"ErrClientErrorNotAWhen", "routes:\n  - {name: auto, candidates: [{model: a, when: [client_error]}]}\n", "is not an error class"},
		{"ErrPrivacy", "routes:\n  - {name: auto, privacy: secret, candidates: [{model: a}]}\n", `privacy must be sensitive (or absent), got "secret"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, base+tt.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want %q", err, tt.msg)
			}
		})
	}
}

func TestLoadConfigQuotas(t *testing.T) {
	provs := "providers:\n  - {name: g, type: gemini, api_key_env: GK, quota: {reserve_ratio: 0.1}}\n" +
		"  - {name: p, type: openai-compatible, base_url: 'http://127.0.0.1:1/v1', quota: {timezone: Asia/Tokyo}}\n"
	model := func(name, prov, upstream, quota string) string {
		return "  - {name: " + name + ", provider: " + prov + ", upstream_model: " + upstream +
			", tier: free, max_output_tokens: 100, price: {input: '1', output: '2'}" + quota + "}\n"
	}
	e := func() env { return env{"GK": "k"} }
	t.Run("OK", func(t *testing.T) {
		cfg := mustLoad(t, provs+"models:\n"+model("flash", "g", "gemini-2.5-flash", ", quota: {rpm: 10, rpd: 250, tpm: 250000}")+
			model("flash-too", "g", "gemini-2.5-flash", ", quota: {rpm: 10, rpd: 250, tpm: 250000}")+
			model("local", "p", "llama", ", quota: {rpd: 100}")+model("free", "p", "other", ""), e())
		q := cfg.Quotas["flash"]
		if q == nil || q.RPM != 10 || q.RPD != 250 || q.TPM != 250000 || q.ReserveRatio != 0.1 || q.Location.String() != "America/Los_Angeles" {
			t.Fatalf("flash quota %+v", q)
		}
		if q.Effective(250) != 225 {
			t.Errorf("effective rpd %d, want 225", q.Effective(250))
		}
		if l := cfg.Quotas["local"]; l == nil || l.Location.String() != "Asia/Tokyo" || l.ReserveRatio != 0 {
			t.Errorf("local quota %+v", l)
		}
		if _, ok := cfg.Quotas["free"]; ok {
			t.Error("a model without quota got one")
		}
	})
	for _, tt := range []struct{ name, yaml, msg string }{
		{"ErrRatio", strings.Replace(provs, "0.1", "1", 1) + "models:\n" + model("a", "g", "x", ""), "quota.reserve_ratio must be at least 0 and below 1"},
		{"ErrTimeZone", strings.Replace(provs, "Asia/Tokyo", "Mars/Olympus", 1) + "models:\n" + model("a", "p", "x", ""), `quota.timezone "Mars/Olympus" is not an IANA time zone`},
		{"ErrEmpty", provs + "models:\n" + model("a", "p", "x", ", quota: {}"), "quota needs at least one of rpm, rpd, tpm"},
		{"ErrNegative", provs + "models:\n" + model("a", "p", "x", ", quota: {rpm: -1}"), "quota needs at least one of rpm, rpd, tpm"},
		{"ErrNoRoom", provs + "models:\n" + model("a", "g", "x", ", quota: {rpm: 1}"), "quota.rpm of 1 leaves no room"},
		{"ErrShared", provs + "models:\n" + model("a", "g", "x", ", quota: {rpm: 10}") + model("b", "g", "x", ""), "shares that model's quota windows and must declare the same quota"},
		{"ErrUnknownField", provs + "models:\n" + model("a", "g", "x", ", quota: {rph: 10}"), "field rph not found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, e())
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want %q", err, tt.msg)
			}
		})
	}
}

func TestLoadConfigPlanClamp(t *testing.T) {
	cfg := mustLoad(t, "plans:\n  - {name: lean, tiers: [free], clamp_max_tokens: true}\n", nil)
	for _, p := range cfg.Plans {
		if p.ClampMaxTokens != (p.Name == "lean") {
			t.Errorf("plan %s clamp_max_tokens = %v", p.Name, p.ClampMaxTokens)
		}
	}
}

func TestLoadConfigCacheWritePrices(t *testing.T) {
	cfg := mustLoad(t, "providers:\n  - {name: c, type: anthropic, api_key_env: AK}\nmodels:\n"+
		"  - {name: claude, provider: c, tier: free, max_output_tokens: 100, price: {input: '3', output: '15', cached_input: '0.30', cache_write: '3.75', cache_write_1h: '6'}}\n",
		env{"AK": "k"})
	p, err := toPrice(*cfg.Models[0].Price)
	if err != nil || p.CacheWritePerM != 3_750_000 || p.CacheWrite1hPerM != 6_000_000 || p.CachedPerM != 300_000 {
		t.Fatalf("price %+v %v", p, err)
	}
	if _, err := load(t, "providers:\n  - {name: c, type: anthropic, api_key_env: AK}\nmodels:\n"+
		"  - {name: claude, provider: c, tier: free, max_output_tokens: 100, price: {input: '3', output: '15', cache_write_1h: 'two'}}\n",
		env{"AK": "k"}); err == nil || !strings.Contains(err.Error(), "cache_write_1h") {
		t.Errorf("bad cache_write_1h: %v", err)
	}
}
