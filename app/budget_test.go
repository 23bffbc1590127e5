package app_test

import (
	"testing"
	"time"

	"yosan/app"
)

func TestPeriod(t *testing.T) {
	tests := []struct {
		name string
		at   string
		loc  string
		want string
	}{
		{"TokyoAlreadyDecember", "2026-11-30T16:00:00Z", "Asia/Tokyo", "2026-12"},
		{"UTCStillNovember", "2026-11-30T16:00:00Z", "UTC", "2026-11"},
		{"TokyoLastSecondOfNovember", "2026-11-30T14:59:59Z", "Asia/Tokyo", "2026-11"},
		{"TokyoFirstSecondOfDecember", "2026-11-30T15:00:00Z", "Asia/Tokyo", "2026-12"},
		{"TokyoNewYear", "2026-12-31T15:00:00Z", "Asia/Tokyo", "2027-01"},
		{"UTCNewYearsEve", "2026-12-31T15:00:00Z", "UTC", "2026-12"},
		{"LosAngelesStillNovember", "2026-12-01T07:59:59Z", "America/Los_Angeles", "2026-11"},
		{"LosAngelesDecember", "2026-12-01T08:00:00Z", "America/Los_Angeles", "2026-12"},
		// PDT (UTC-7) in early November before the switch back on Nov 1, 2026 at 09:00Z.
		{"LosAngelesOctoberDST", "2026-11-01T06:59:59Z", "America/Los_Angeles", "2026-10"},
		{"LosAngelesNovemberDST", "2026-11-01T07:00:00Z", "America/Los_Angeles", "2026-11"},
		{"KolkataHalfHour", "2026-02-28T18:29:59Z", "Asia/Kolkata", "2026-02"},
		{"KolkataMarch", "2026-02-28T18:30:00Z", "Asia/Kolkata", "2026-03"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, err := time.Parse(time.RFC3339, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := app.Period(at, mustLocation(t, tt.loc)); got != tt.want {
				t.Errorf("Period(%s, %s) = %s, want %s", tt.at, tt.loc, got, tt.want)
			}
		})
	}
}

func TestNodeString(t *testing.T) {
	tests := []struct {
		name string
		node app.Node
		want string
	}{
		{"Global", app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, "global"},
		{"Org", app.Node{Kind: app.NodeOrg, ID: "o1"}, "org:o1"},
		{"Key", app.Node{Kind: app.NodeKey, ID: "k1"}, "key:k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.node.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidNodeKind(t *testing.T) {
	for _, k := range []app.NodeKind{app.NodeGlobal, app.NodeOrg, app.NodeTeam, app.NodeMember, app.NodeKey} {
		if !app.ValidNodeKind(k) {
			t.Errorf("ValidNodeKind(%q) = false", k)
		}
	}
	for _, k := range []app.NodeKind{"", "Org", "user", "teams"} {
		if app.ValidNodeKind(k) {
			t.Errorf("ValidNodeKind(%q) = true", k)
		}
	}
}

func TestBudgetRemaining(t *testing.T) {
	capped := int64(1000)
	tests := []struct {
		name   string
		budget app.Budget
		want   int64
		ok     bool
	}{
		{"Uncapped", app.Budget{Reserved: 5, Spent: 5}, -1, false},
		{"Room", app.Budget{Cap: &capped, Reserved: 100, Spent: 200}, 700, true},
		{"Full", app.Budget{Cap: &capped, Reserved: 400, Spent: 600}, 0, true},
		{"Overrun", app.Budget{Cap: &capped, Spent: 1200}, -200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.budget.Remaining()
			if got != tt.want || ok != tt.ok {
				t.Errorf("Remaining() = %d, %v, want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
