// Command yosan is the Yosan gateway: an OpenAI-compatible LLM API gateway whose budget caps
// are never overspent.
//
//	yosan serve     run the gateway (migrates the database first)
//	yosan migrate   apply pending migrations and exit
//	yosan billing   close a month (issue invoices), credit an invoice, sync Stripe
//	yosan admin     create console users, set passwords
//	yosan version   print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on YOSAN_PPROF_ADDR
	"os"
	"os/signal"
	"syscall"
	"time"
	_ "time/tzdata" // org periods and provider quota days need the zone database, on any image

	"yosan/app"
	"yosan/billing"
	"yosan/db"
	"yosan/notify"
	"yosan/providers/demo"
	"yosan/providers/tokens"
	"yosan/web"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cmd := "serve"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(log)
	case "migrate":
		err = migrateOnly()
	case "billing":
		err = billingCmd(os.Args[2:], os.Stdout, log)
	case "admin":
		err = adminCmd(os.Args[2:], os.Stdin, os.Stdout)
	case "version", "-v", "--version":
		fmt.Println("yosan", version)
	case "help", "-h", "--help":
		fmt.Println("usage: yosan [serve|migrate|billing|admin|version]\n\nEnvironment: DATABASE_URL, YOSAN_ADDR, YOSAN_ADMIN_TOKEN (or YOSAN_ADMIN_TOKEN_FILE),\nYOSAN_CONFIG, YOSAN_DEMO, YOSAN_DEMO_LATENCY, YOSAN_DEMO_KEY. See README.md.")
	default:
		err = fmt.Errorf("unknown command %q (want serve, migrate, billing, admin or version)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "yosan:", err)
		os.Exit(1)
	}
}

func migrateOnly() error {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is not set")
	}
	return db.Migrate(url)
}

func serve(log *slog.Logger) error {
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("DATABASE_URL is not set (`make run` starts a private PostgreSQL and sets it for you)")
	}
	if cfg.AdminToken == "" {
		log.Warn("YOSAN_ADMIN_TOKEN is not set: the admin API is disabled")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d, err := migrateAndOpen(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()

	counter := tokens.New()
	catalog, err := buildCatalog(ctx, cfg, d, counter)
	if err != nil {
		return err
	}
	ledger := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: cfg.GlobalCurrency, GlobalLocation: cfg.GlobalLocation})
	defer ledger.Close()
	gw := &app.Gateway{
		Keys: d, Ledger: ledger, Catalog: catalog, Counter: counter, Log: log, Now: time.Now,
		RequestTimeout: cfg.RequestTimeout, SettleMargin: cfg.SettleMargin,
		GlobalCurrency: cfg.GlobalCurrency, GlobalLocation: cfg.GlobalLocation, KeyCacheTTL: cfg.KeyCacheTTL,
		AsyncSettle: cfg.SettleAsync, QuotaCooldown: cfg.QuotaCooldown,
	}
	gw.Limiter = app.NewLimiter(cfg.Limits)
	gw.Cache = app.NewResponseCache(cfg.CacheEntries, cfg.CacheBytes, time.Now)
	cooldowns := &db.Cooldowns{DB: d}
	gw.Cooldowns = cooldowns
	gw.Classify = classifier(cfg)
	alerts := newAlertWorker(cfg, d, log)
	bill := newBilling(cfg, d, log)
	pdfFont, ferr := billing.FindJapaneseFont()
	if ferr != nil {
		log.Info("invoice PDFs are off (the HTML invoice works)", "reason", ferr)
	}
	if err := d.SyncOperatorEmails(ctx, cfg.Alerts.OperatorEmails); err != nil {
		return err
	}
	srv := web.New(web.Config{Gateway: gw, DB: d, Ledger: ledger, AdminToken: cfg.AdminToken,
		MaxBodyBytes: cfg.MaxBodyBytes, DefaultCurrency: cfg.DefaultCurr, DefaultTimeZone: cfg.DefaultTZ,
		DefaultUSDJPY: cfg.DefaultUSDJPY, Alerts: alerts, EmailAlerts: cfg.Alerts.SMTP != nil, Billing: bill, PDFFont: pdfFont, Cooldowns: cooldowns,
		TrustProxy: os.Getenv("YOSAN_TRUST_PROXY") == "1", Log: log})

	var demoInfo *demoSeed
	if cfg.Demo && cfg.DemoKey != "" {
		if demoInfo, err = seedDemo(ctx, d, ledger, cfg); err != nil {
			return fmt.Errorf("seed demo: %w", err)
		}
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Echo, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	if addr := os.Getenv("YOSAN_PPROF_ADDR"); addr != "" {
		// Profiling for operators and benchmarks, on its own (loopback) listener only.
		go func() {
			if err := http.ListenAndServe(addr, http.DefaultServeMux); err != nil {
				log.Error("pprof listener", "err", err)
			}
		}()
	}
	go sweep(ctx, d, ledger, cfg, log)
	alertsDone := make(chan struct{})
	go func() {
		defer close(alertsDone)
		if cfg.Alerts.Worker {
			alerts.Run(ctx, cfg.Alerts.PollInterval)
		}
	}()
	billingDone := make(chan struct{})
	go func() {
		defer close(billingDone)
		if cfg.Billing.AutoClose || cfg.Billing.Stripe != nil {
			bill.Run(ctx, cfg.Billing.Interval, cfg.Billing.AutoClose)
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	printBanner(cfg, ln.Addr().String(), demoInfo)

	// Before the pool closes: settlements in flight, then the alert sends in flight.
	finish := func() {
		gw.Drain()
		stop()
		<-alertsDone
		<-billingDone
	}
	select {
	case err := <-errc:
		finish()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: waiting for requests in flight to finish and settle")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout+5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	finish()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// commandEnv is what a one-shot command (billing, admin) works with: the config, the database
// and a context that ends on SIGINT or SIGTERM.
type commandEnv struct {
	ctx  context.Context
	cfg  *Config
	db   *db.DB
	stop context.CancelFunc
}

// openCommand loads the config and opens the database of DATABASE_URL (migrating it first).
func openCommand() (*commandEnv, error) {
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	d, err := migrateAndOpen(ctx, cfg)
	if err != nil {
		stop()
		return nil, err
	}
	return &commandEnv{ctx: ctx, cfg: cfg, db: d, stop: stop}, nil
}

func (e *commandEnv) close() {
	e.db.Close()
	e.stop()
}

// migrateAndOpen applies pending migrations, opens the pool and records the config file's
// FX rates (every gateway process and command does, so the rates apply whoever opens a period).
func migrateAndOpen(ctx context.Context, cfg *Config) (*db.DB, error) {
	if err := db.Migrate(cfg.DatabaseURL); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	d, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := d.SetFXRates(ctx, cfg.Billing.FXRates); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// buildCatalog creates the providers, records models and prices in the database and returns
// the catalog the gateway serves.
func buildCatalog(ctx context.Context, cfg *Config, d *db.DB, counter app.TokenCounter) (*app.Catalog, error) {
	ups := map[string]app.Provider{}
	var models []*app.CatalogModel
	if cfg.Demo {
		ups[demo.Name] = demo.New(demo.Options{Latency: cfg.DemoLatency, Counter: counter})
	}
	for _, p := range cfg.Providers {
		ups[p.Name] = newProvider(p, cfg.ProviderKeys[p.Name])
	}
	local := map[string]bool{}
	maxTokensField := map[string]string{}
	for _, p := range cfg.Providers {
		local[p.Name] = p.Local
		if p.Type == "openai" {
			maxTokensField[p.Name] = "max_completion_tokens" // OpenAI's reasoning models refuse max_tokens
		}
	}
	configured := map[string]bool{}
	var prices []db.ModelPrice
	for _, mc := range cfg.Models {
		configured[mc.Name] = true
		m := &app.CatalogModel{Model: app.Model{Name: mc.Name, Provider: mc.Provider, UpstreamName: mc.UpstreamModel,
			Tier: mc.Tier, Kind: mc.Kind, MaxOutputTokens: mc.MaxOutputTokens, ContextWindow: mc.ContextWindow},
			Upstream: ups[mc.Provider], Local: local[mc.Provider], Quota: cfg.Quotas[mc.Name], MaxTokensField: maxTokensField[mc.Provider]}
		for _, pc := range mc.Prices {
			p, _ := toPrice(pc)           // validated in loadConfig
			from, _ := parseFrom(pc.From) // zero time: in force since always
			m.Prices = append(m.Prices, app.DatedPrice{From: from, Price: p})
		}
		models = append(models, m)
	}
	if cfg.Demo {
		for _, dm := range demo.DefaultModels() {
			if configured[dm.Name] {
				continue
			}
			models = append(models, &app.CatalogModel{Model: dm, Upstream: ups[demo.Name],
				Prices: []app.DatedPrice{{Price: dm.Price}}})
		}
	}
	catalog, err := app.NewCatalog(models)
	if err != nil {
		return nil, fmt.Errorf("build catalog: %w", err)
	}
	if err := catalog.SetRoutes(cfg.Routes); err != nil {
		return nil, fmt.Errorf("routes: %s", app.ErrorMessage(err))
	}
	var plain []app.Model
	for _, m := range catalog.Models() {
		plain = append(plain, m.Model)
		for _, p := range m.Prices {
			prices = append(prices, db.ModelPrice{Model: m.Name, From: p.From, Price: p.Price})
		}
	}
	if err := d.UpsertPlans(ctx, cfg.Plans); err != nil {
		return nil, err
	}
	if err := d.UpsertModels(ctx, plain, prices); err != nil {
		return nil, err
	}
	return catalog, nil
}

// newAlertWorker builds the alert delivery worker from the config.
func newAlertWorker(cfg *Config, d *db.DB, log *slog.Logger) *notify.Worker {
	w := &notify.Worker{DB: d, ConsoleURL: cfg.Alerts.ConsoleURL, RetryFor: cfg.Alerts.RetryFor, Lease: cfg.Alerts.Lease,
		FirstRetry: cfg.Alerts.FirstRetry,
		Webhooks:   &notify.WebhookSender{Client: &http.Client{Timeout: cfg.Alerts.WebhookTimeout}}, Log: log}
	if cfg.Alerts.SMTP != nil {
		w.Mailer = notify.NewMailer(*cfg.Alerts.SMTP)
	}
	return w
}

// sweep settles reservations left pending past their deadline (a crashed process, a database
// outage during settlement) until ctx ends.
func sweep(ctx context.Context, d *db.DB, l *db.Ledger, cfg *Config, log *slog.Logger) {
	mode := db.SweepCharge
	if cfg.SweepRelease {
		mode = db.SweepRelease
	}
	t := time.NewTicker(cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := l.Sweep(ctx, mode, 1000)
		if err != nil && ctx.Err() == nil {
			log.Error("sweep expired reservations", "err", err)
		}
		if n > 0 {
			log.Warn("swept expired reservations", "count", n, "mode", mode)
		}
		// Quota windows that ended two days ago are history (the ledger rows keep it).
		if _, err := d.PruneQuotaWindows(ctx, d.Now().Add(-48*time.Hour)); err != nil && ctx.Err() == nil {
			log.Error("prune quota windows", "err", err)
		}
	}
}
