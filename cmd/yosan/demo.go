package main

import (
	"context"

	"fmt"
	"strings"

	"yosan/app"
	"yosan/db"
)

type demoSeed struct {
	OrgID string
	Key   string
}

// seedDemo creates, once, the demo org, team, member and the key YOSAN_DEMO_KEY with a
// 1,000 JPY monthly cap on the org. Later starts find the key and change nothing.
func seedDemo(ctx context.Context, d *db.DB, l *db.Ledger, cfg *Config) (*demoSeed, error) {
	if !strings.HasPrefix(cfg.DemoKey, app.KeyPrefix) || len(cfg.DemoKey) < 20 {
		return nil, fmt.Errorf("YOSAN_DEMO_KEY must start with %q and be at least 20 characters", app.KeyPrefix)
	}
	p, err := d.PrincipalByHash(ctx, db.HashKey(cfg.DemoKey))
	if err == nil {
		return &demoSeed{OrgID: p.Org.ID, Key: cfg.DemoKey}, nil
	}
	if app.ErrorCode(err) != app.ENOTFOUND {
		return nil, err
	}
	org, err := d.CreateOrg(ctx, app.Org{Name: "Demo Co", Currency: cfg.DefaultCurr, TimeZone: cfg.DefaultTZ, USDJPY: cfg.DefaultUSDJPY})
	if err != nil {
		return nil, err
	}
	team, err := d.CreateTeam(ctx, org.ID, "Research")
	if err != nil {
		return nil, err
	}
	member, err := d.CreateMember(ctx, org.ID, team.ID, "demo@example.com")
	if err != nil {
		return nil, err
	}
	if _, err := d.CreateKey(ctx, app.APIKey{OrgID: org.ID, TeamID: team.ID, MemberID: member.ID, Name: "demo", Plan: "enterprise"}, cfg.DemoKey); err != nil {
		return nil, err
	}
	capAmount := int64(1000) * app.Micro
	if _, err := l.SetCap(ctx, app.Node{Kind: app.NodeOrg, ID: org.ID}, &capAmount); err != nil {
		return nil, err
	}
	return &demoSeed{OrgID: org.ID, Key: cfg.DemoKey}, nil
}

func printBanner(cfg *Config, addr string, seed *demoSeed) {
	base := "http://" + addr
	fmt.Printf("\nYosan %s listening on %s\n", version, base)
	fmt.Printf("  OpenAI base URL: %s/v1\n", base)
	fmt.Printf("  console:         %s/console (the first visit creates the first account)\n", base)
	if cfg.AdminToken != "" {
		fmt.Printf("  admin token:     %s\n", cfg.AdminToken)
	}
	if seed == nil {
		fmt.Println()
		return
	}
	fmt.Printf("  demo key:        %s\n", seed.Key)
	fmt.Printf("  demo org:        %s (cap 1000 %s a month)\n\n", seed.OrgID, cfg.DefaultCurr)
	fmt.Printf("Try it:\n  curl -s %s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n"+
		"    -d '{\"model\":\"demo-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":32}'\n", base, seed.Key)
	if cfg.AdminToken != "" {
		fmt.Printf("Budget:\n  curl -s %s/admin/v1/budgets/org/%s -H 'Authorization: Bearer %s'\n\n", base, seed.OrgID, cfg.AdminToken)
	}
}
