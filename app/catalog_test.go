package app_test

import (
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/providers/demo"
)

func TestPriceAt(t *testing.T) {
	tokyo := mustLocation(t, "Asia/Tokyo")
	p1 := app.Price{InputPerM: 1}
	p2 := app.Price{InputPerM: 2}
	p3 := app.Price{InputPerM: 3}
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, tokyo) // 2026-03-31T15:00Z
	october := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	// Given out of order: NewCatalog sorts them.
	m := &app.CatalogModel{Model: app.Model{Name: "m", Kind: app.KindChat}, Upstream: demo.New(demo.Options{}),
		Prices: []app.DatedPrice{{From: october, Price: p3}, {Price: p1}, {From: april, Price: p2}}}
	if _, err := app.NewCatalog([]*app.CatalogModel{m}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		at   time.Time
		want app.Price
	}{
		{"LongBefore", time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), p1},
		{"ZeroTime", time.Time{}, p1},
		{"NanosecondBeforeSecond", april.Add(-time.Nanosecond), p1},
		{"AtSecond", april, p2},
		{"AtSecondInUTC", time.Date(2026, 3, 31, 15, 0, 0, 0, time.UTC), p2},
		{"UTCMidnightAprilIsAfter", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), p2},
		{"NanosecondBeforeThird", october.Add(-time.Nanosecond), p2},
		{"AtThird", october, p3},
		{"AtThirdInTokyo", october.In(tokyo), p3},
		{"LongAfter", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), p3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.PriceAt(tt.at); got != tt.want {
				t.Errorf("PriceAt(%s) = %+v, want %+v", tt.at, got, tt.want)
			}
		})
	}
	t.Run("FirstPriceAppliesEarlier", func(t *testing.T) {
		only := &app.CatalogModel{Prices: []app.DatedPrice{{From: october, Price: p3}}}
		if got := only.PriceAt(april); got != p3 {
			t.Errorf("PriceAt(before the only price) = %+v, want %+v", got, p3)
		}
	})
}

func TestNewCatalog(t *testing.T) {
	up := demo.New(demo.Options{})
	model := func(name string) *app.CatalogModel {
		return &app.CatalogModel{Model: app.Model{Name: name}, Upstream: up, Prices: []app.DatedPrice{{}}}
	}
	t.Run("OK", func(t *testing.T) {
		c, err := app.NewCatalog([]*app.CatalogModel{model("b"), model("c"), model("a")})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range c.Models() {
			names = append(names, m.Name)
		}
		if got := strings.Join(names, ","); got != "a,b,c" {
			t.Errorf("Models() = %s, want a,b,c", got)
		}
		if m, ok := c.Lookup("b"); !ok || m.Name != "b" {
			t.Errorf("Lookup(b) = %v, %v", m, ok)
		}
		if _, ok := c.Lookup("zzz"); ok {
			t.Error("Lookup(zzz) found a model")
		}
	})
	noPrice := model("p")
	noPrice.Prices = nil
	noUp := model("u")
	noUp.Upstream = nil
	tests := []struct {
		name   string
		models []*app.CatalogModel
		msg    string
	}{
		{"ErrNoPrice", []*app.CatalogModel{noPrice}, `model "p" has no price`},
		{"ErrNoProvider", []*app.CatalogModel{noUp}, `model "u" has no provider`},
		{"ErrDuplicate", []*app.CatalogModel{model("d"), model("d")}, `model "d" is defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := app.NewCatalog(tt.models)
			if app.ErrorCode(err) != app.EINVALID || !strings.Contains(app.ErrorMessage(err), tt.msg) {
				t.Errorf("err = %v, want EINVALID %q", err, tt.msg)
			}
		})
	}
}

func mustLocation(tb testing.TB, name string) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}
