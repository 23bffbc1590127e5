package main

import (
	"context"
	"strings"
	"testing"

	"yosan/app"
	"yosan/db/dbtest"
	"yosan/providers/tokens"
)

func TestBuildCatalog(t *testing.T) {
	ctx := context.Background()
	d := dbtest.New(t)
	cfg := mustLoad(t, `
plans:
  - {name: pro, tiers: [free, pro, beta]}
models:
  - name: demo-mini
    provider: demo
    tier: pro
    max_output_tokens: 64
    price: {input: "1", output: "2"}
    prices:
      - {from: "2026-04-01", input: "0.5", output: "1"}
`, env{"YOSAN_DEMO": "1"})
	cat, err := buildCatalog(ctx, cfg, d, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range cat.Models() {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "demo-embed,demo-max,demo-mini" {
		t.Errorf("models %s", got)
	}
	mini, _ := cat.Lookup("demo-mini")
	if mini.Tier != "pro" || mini.MaxOutputTokens != 64 || len(mini.Prices) != 2 || mini.Upstream == nil {
		t.Errorf("configured demo-mini %+v: want it to replace the built-in one", mini.Model)
	}
	if p := mini.Prices[1].Price; p != (app.Price{InputPerM: 500_000, OutputPerM: app.Micro}) {
		t.Errorf("dated price %+v", p)
	}
	var prices, models int
	if err := d.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM model_prices), (SELECT count(*) FROM models)`).Scan(&prices, &models); err != nil {
		t.Fatal(err)
	}
	if prices != 4 || models != 3 {
		t.Errorf("%d prices and %d models stored, want 4 and 3", prices, models)
	}
	var tiers []string
	if err := d.Pool.QueryRow(ctx, `SELECT tiers FROM plans WHERE name = 'pro'`).Scan(&tiers); err != nil {
		t.Fatal(err)
	}
	if strings.Join(tiers, ",") != "free,pro,beta" {
		t.Errorf("pro tiers %v", tiers)
	}
	// A second start with the same config changes nothing and fails on nothing.
	if _, err := buildCatalog(ctx, cfg, d, tokens.New()); err != nil {
		t.Fatalf("second start: %v", err)
	}
}
