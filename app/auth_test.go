package app_test

import (
	"fmt"
	"strings"
	"testing"

	"yosan/app"
)

const (
	orgA   = "00000000-0000-0000-0000-00000000000a"
	orgB   = "00000000-0000-0000-0000-00000000000b"
	team1  = "00000000-0000-0000-0000-0000000000a1" // the team_admin's own team, in org A
	team2  = "00000000-0000-0000-0000-0000000000a2" // another team of org A
	userID = "00000000-0000-0000-0000-0000000000ff"
)

var allActions = []app.Action{app.ActView, app.ActManageOrgs, app.ActManageTeams, app.ActManageMembers,
	app.ActManageUsers, app.ActEditCap, app.ActManageKeys, app.ActManageAlerts, app.ActManageBilling, app.ActViewAudit,
	app.ActManageProviders}

// matrixTargets are the columns of the expected table, all in org A.
var matrixTargets = []struct {
	name string
	t    app.Target
}{
	{"org", app.Target{OrgID: orgA, Node: app.NodeOrg}},
	{"own/team", app.Target{OrgID: orgA, TeamID: team1, Node: app.NodeTeam}},
	{"own/member", app.Target{OrgID: orgA, TeamID: team1, Node: app.NodeMember}},
	{"own/key", app.Target{OrgID: orgA, TeamID: team1, Node: app.NodeKey}},
	{"other/team", app.Target{OrgID: orgA, TeamID: team2, Node: app.NodeTeam}},
	{"other/member", app.Target{OrgID: orgA, TeamID: team2, Node: app.NodeMember}},
	{"other/key", app.Target{OrgID: orgA, TeamID: team2, Node: app.NodeKey}},
}

func user(operator bool, ms ...app.Membership) app.Actor {
	return app.Actor{User: app.User{ID: userID, Email: "u@example.com", Operator: operator}, Memberships: ms}
}

// matrixActors are the rows of the expected table. "stranger" has a role only in org B.
var matrixActors = []struct {
	name string
	p    app.Actor
}{
	{"operator", user(true)},
	{"admin_token", app.Actor{AdminToken: true}},
	{"owner", user(false, app.Membership{UserID: userID, OrgID: orgA, Role: app.RoleOwner})},
	{"finance_admin", user(false, app.Membership{UserID: userID, OrgID: orgA, Role: app.RoleFinance})},
	{"team_admin", user(false, app.Membership{UserID: userID, OrgID: orgA, Role: app.RoleTeamAdmin, TeamID: team1})},
	{"viewer", user(false, app.Membership{UserID: userID, OrgID: orgA, Role: app.RoleViewer})},
	{"stranger", user(false, app.Membership{UserID: userID, OrgID: orgB, Role: app.RoleOwner})},
}

// wantMatrix is the permission matrix, written out by hand: for each action and actor, one
// letter per column of matrixTargets (org, own/team, own/member, own/key, other/team,
// other/member, other/key): y = allowed, F = EFORBIDDEN, N = ENOTFOUND.
var wantMatrix = map[app.Action]map[string]string{
	app.ActView: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "yyyyyyy", "viewer": "yyyyyyy", "stranger": "NNNNNNN",
	},
	app.ActManageOrgs: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "FFFFFFF", "finance_admin": "FFFFFFF",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageProviders: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "FFFFFFF", "finance_admin": "FFFFFFF",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageTeams: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "FFFFFFF",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageMembers: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "FFFFFFF",
		"team_admin": "FyyyFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageUsers: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "FFFFFFF",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActEditCap: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "FFyyFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageKeys: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "FyyyFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageAlerts: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActManageBilling: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
	app.ActViewAudit: {
		"operator": "yyyyyyy", "admin_token": "yyyyyyy", "owner": "yyyyyyy", "finance_admin": "yyyyyyy",
		"team_admin": "FFFFFFF", "viewer": "FFFFFFF", "stranger": "NNNNNNN",
	},
}

// outcome turns Authorize's answer into a matrix letter.
func outcome(err error) string {
	switch app.ErrorCode(err) {
	case "":
		return "y"
	case app.EFORBIDDEN:
		return "F"
	case app.ENOTFOUND:
		return "N"
	}
	return "?" + app.ErrorCode(err)
}

func TestAuthorizeMatrix(t *testing.T) {
	if len(wantMatrix) != len(allActions) {
		t.Fatalf("the expected table covers %d actions, there are %d", len(wantMatrix), len(allActions))
	}
	for _, a := range allActions {
		for _, actor := range matrixActors {
			want, ok := wantMatrix[a][actor.name]
			if !ok || len(want) != len(matrixTargets) {
				t.Fatalf("no full expected row for %s / %s", a, actor.name)
			}
			for i, tg := range matrixTargets {
				t.Run(fmt.Sprintf("%s/%s/%s", a, actor.name, tg.name), func(t *testing.T) {
					err := actor.p.Authorize(a, tg.t)
					if got := outcome(err); got != want[i:i+1] {
						t.Fatalf("got %s (%v), want %s", got, err, want[i:i+1])
					}
					if can := actor.p.Can(a, tg.t); can != (err == nil) {
						t.Errorf("Can = %v but Authorize = %v", can, err)
					}
					if err == nil {
						return
					}
					msg := app.ErrorMessage(err)
					switch app.ErrorCode(err) {
					case app.ENOTFOUND:
						if msg != fmt.Sprintf("org %q not found", orgA) {
							t.Errorf("not-found message %q", msg)
						}
					case app.EFORBIDDEN:
						if !strings.HasPrefix(msg, actor.name+" may not ") {
							t.Errorf("forbidden message %q does not start with %q", msg, actor.name+" may not ")
						}
					}
				})
			}
		}
	}
}

func TestAuthorizeGatewayWide(t *testing.T) {
	gateway := []app.Target{
		{},                                  // the org list, operator alert channels
		{Node: app.NodeGlobal},              // the global cap
		{OrgID: orgA, Node: app.NodeGlobal}, // the global cap named from inside an org
	}
	for _, actor := range matrixActors {
		for _, a := range allActions {
			for _, tg := range gateway {
				if (a == app.ActEditCap) != (tg.Node == app.NodeGlobal) {
					continue // a cap is set on a node; the global node has nothing but a cap
				}
				err := actor.p.Authorize(a, tg)
				op := actor.name == "operator" || actor.name == "admin_token"
				switch {
				case op && err != nil:
					t.Errorf("%s %s %+v: %v", actor.name, a, tg, err)
				case !op && tg.OrgID == "" && app.ErrorCode(err) != app.EFORBIDDEN:
					t.Errorf("%s %s %+v: got %v, want forbidden", actor.name, a, tg, err)
				case !op && tg.OrgID != "" && err == nil:
					t.Errorf("%s %s %+v: allowed", actor.name, a, tg)
				case !op && err != nil && app.ErrorCode(err) == app.EFORBIDDEN && !strings.Contains(app.ErrorMessage(err), "operator"):
					t.Errorf("%s %s %+v: message %q does not say operators only", actor.name, a, tg, app.ErrorMessage(err))
				}
			}
		}
	}
}

func TestAuthorizeDenyByDefault(t *testing.T) {
	owner := app.Membership{UserID: userID, OrgID: orgA, Role: app.RoleOwner}
	tests := []struct {
		name string
		p    app.Actor
		a    app.Action
		t    app.Target
		code string
	}{
		{"UnknownAction", user(true), app.Action("drop_tables"), app.Target{OrgID: orgA}, app.EFORBIDDEN},
		{"UnknownRole", user(false, app.Membership{OrgID: orgA, Role: "superuser"}), app.ActView, app.Target{OrgID: orgA}, app.EFORBIDDEN},
		{"CapWithoutNode", user(false, owner), app.ActEditCap, app.Target{OrgID: orgA}, app.EFORBIDDEN},
		{"CapOfUnknownNode", user(true), app.ActEditCap, app.Target{OrgID: orgA, Node: "planet"}, app.EFORBIDDEN},
		// The database forbids a team_admin without a team; if one slipped through, its ""
		// must not match org-wide targets.
		{"TeamAdminWithoutTeamKeys", user(false, app.Membership{OrgID: orgA, Role: app.RoleTeamAdmin}), app.ActManageKeys, app.Target{OrgID: orgA}, app.EFORBIDDEN},
		{"TeamAdminWithoutTeamCap", user(false, app.Membership{OrgID: orgA, Role: app.RoleTeamAdmin}), app.ActEditCap, app.Target{OrgID: orgA, Node: app.NodeKey}, app.EFORBIDDEN},
		{"NoMemberships", user(false), app.ActView, app.Target{OrgID: orgA}, app.ENOTFOUND},
		{"OwnerOfOtherOrgCap", user(false, app.Membership{OrgID: orgB, Role: app.RoleOwner}), app.ActEditCap, app.Target{OrgID: orgA, Node: app.NodeOrg}, app.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Authorize(tt.a, tt.t)
			if app.ErrorCode(err) != tt.code {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if tt.p.Can(tt.a, tt.t) {
				t.Error("Can = true")
			}
		})
	}
}

func TestAuthorizeMessages(t *testing.T) {
	ta := user(false, app.Membership{OrgID: orgA, Role: app.RoleTeamAdmin, TeamID: team1})
	fin := user(false, app.Membership{OrgID: orgA, Role: app.RoleFinance})
	tests := []struct {
		name string
		p    app.Actor
		a    app.Action
		t    app.Target
		want string
	}{
		{"OtherTeam", ta, app.ActManageKeys, app.Target{OrgID: orgA, TeamID: team2}, "team_admin may not manage API keys outside its own team"},
		{"OwnTeamCap", ta, app.ActEditCap, app.Target{OrgID: orgA, TeamID: team1, Node: app.NodeTeam}, "team_admin may not set the cap of this team"},
		{"FinanceTeams", fin, app.ActManageTeams, app.Target{OrgID: orgA}, "finance_admin may not manage teams"},
		{"GlobalCap", fin, app.ActEditCap, app.Target{OrgID: orgA, Node: app.NodeGlobal}, "only an operator may set the gateway-wide cap"},
		{"OrgList", fin, app.ActView, app.Target{}, "only an operator may view gateway-wide settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := app.ErrorMessage(tt.p.Authorize(tt.a, tt.t)); got != tt.want {
				t.Errorf("message %q, want %q", got, tt.want)
			}
		})
	}
}

func TestActor(t *testing.T) {
	p := user(false, app.Membership{OrgID: orgA, Role: app.RoleViewer}, app.Membership{OrgID: orgB, Role: app.RoleOwner})
	if m, ok := p.Role(orgB); !ok || m.Role != app.RoleOwner {
		t.Errorf("Role(orgB) = %+v, %v", m, ok)
	}
	if _, ok := p.Role(""); ok {
		t.Error("Role(\"\") found a membership")
	}
	if p.Operator() || p.Label() != "u@example.com" {
		t.Errorf("user: operator %v, label %q", p.Operator(), p.Label())
	}
	tok := app.Actor{AdminToken: true}
	if !tok.Operator() || tok.Label() != "admin token" {
		t.Errorf("admin token: operator %v, label %q", tok.Operator(), tok.Label())
	}
	for _, r := range []app.Role{app.RoleOwner, app.RoleFinance, app.RoleTeamAdmin, app.RoleViewer} {
		if !app.ValidRole(r) {
			t.Errorf("ValidRole(%q) = false", r)
		}
	}
	for _, r := range []app.Role{"", "Owner", "admin", "operator"} {
		if app.ValidRole(r) {
			t.Errorf("ValidRole(%q) = true", r)
		}
	}
}

func TestValidPassword(t *testing.T) {
	tests := []struct {
		name string
		pw   string
		ok   bool
	}{
		{"OK", "correct horse battery", true},
		{"Exactly12", "abcdefghijkl", true},
		{"Japanese", "日本語のパスワード", true},
		{"Empty", "", false},
		{"Short", "abcdefghijk", false},
		{"Repeated", strings.Repeat("a", 20), false},
		{"RepeatedMultibyte", strings.Repeat("あ", 10), false},
		{"Max", strings.Repeat("ab", app.MaxPasswordBytes/2), true},
		{"TooLong", strings.Repeat("ab", app.MaxPasswordBytes/2) + "c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := app.ValidPassword(tt.pw)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidPassword: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (app.ErrorCode(err) != app.EINVALID || !strings.Contains(app.ErrorMessage(err), "password")) {
				t.Errorf("error %v: want EINVALID about the password", err)
			}
		})
	}
}
