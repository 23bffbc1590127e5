package app

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Console users, their roles in orgs, and the one permission matrix both admin surfaces (the
// console and /admin/v1) check. The rule is deny by default: an unknown role, action or
// malformed target is refused, and a principal learns nothing about orgs it has no role in.

// Role is what a console user may do in one org.
type Role string

// Roles, from the most to the least powerful.
const (
	// RoleOwner may do everything in its org except create or delete orgs.
	RoleOwner Role = "owner"
	// RoleFinance sets caps, keys, alerts and billing of its org; it does not manage people.
	RoleFinance Role = "finance_admin"
	// RoleTeamAdmin manages the members, keys and their caps of one team of its org.
	RoleTeamAdmin Role = "team_admin"
	// RoleViewer only reads.
	RoleViewer Role = "viewer"
)

// ValidRole reports whether r is one of the four roles.
func ValidRole(r Role) bool {
	switch r {
	case RoleOwner, RoleFinance, RoleTeamAdmin, RoleViewer:
		return true
	}
	return false
}

// User is a person who signs in to the console. Operators run the gateway: they may do
// everything in every org. The password hash is never part of this type.
type User struct {
	ID                string
	Email             string
	Name              string
	Operator          bool
	CreatedAt         time.Time
	PasswordChangedAt time.Time
}

// Membership gives a user a role in an org.
type Membership struct {
	UserID string
	OrgID  string
	Role   Role
	// TeamID is the team a team_admin administers; "" for every other role.
	TeamID string
}

// Action is something a principal asks to do.
type Action string

// Actions, each checked against a Target by Actor.Can.
const (
	ActView          Action = "view"           // read the org's pages and data
	ActManageOrgs    Action = "manage_orgs"    // create, rename or delete orgs (operators only)
	ActManageTeams   Action = "manage_teams"   // create, rename or delete teams
	ActManageMembers Action = "manage_members" // add or remove budget members of a team
	ActManageUsers   Action = "manage_users"   // give console users roles in the org
	ActEditCap       Action = "edit_cap"       // set the cap of the budget node Target.Node
	ActManageKeys    Action = "manage_keys"    // create and revoke API keys
	ActManageAlerts  Action = "manage_alerts"  // alert channels and thresholds
	ActManageBilling Action = "manage_billing" // close months, credit invoices, FX rates
	ActViewAudit     Action = "view_audit"     // read the audit log
	// ActManageProviders clears provider cooldowns: the provider accounts serve every org,
	// so only operators may.
	ActManageProviders Action = "manage_providers"
)

// actionText is how an error message names an action ("<role> may not <text>").
var actionText = map[Action]string{
	ActView:            "view this org",
	ActManageOrgs:      "manage orgs",
	ActManageTeams:     "manage teams",
	ActManageMembers:   "manage members",
	ActManageUsers:     "manage console users",
	ActEditCap:         "set caps",
	ActManageKeys:      "manage API keys",
	ActManageAlerts:    "manage alerts",
	ActManageBilling:   "manage billing",
	ActViewAudit:       "view the audit log",
	ActManageProviders: "clear provider cooldowns",
}

// Target is what an action is about.
type Target struct {
	// OrgID is the org acted on; "" means the gateway as a whole (the global budget node, the
	// operators' alert channels, the list of orgs), which only operators may touch.
	OrgID string
	// TeamID narrows the target to one team of the org; "" means org-wide. Callers fill it
	// from the database record acted on (the key's or member's team), never from the request.
	TeamID string
	// Node is the kind of budget node whose cap ActEditCap sets; the node lies in TeamID when
	// it is a team, member or key node.
	Node NodeKind
}

// Actor is who acts on an admin surface: a console user with their memberships, or the admin
// token of /admin/v1. (Principal, in this package, is an authenticated API key.)
type Actor struct {
	User        User
	Memberships []Membership
	// AdminToken is true for a request authenticated with the operator's admin token.
	AdminToken bool
}

// Operator reports whether the actor may do everything everywhere: the admin token, or a user
// flagged operator.
func (p Actor) Operator() bool { return p.AdminToken || p.User.Operator }

// Role returns the actor's membership in org orgID, if any.
func (p Actor) Role(orgID string) (Membership, bool) {
	if orgID == "" {
		return Membership{}, false
	}
	for _, m := range p.Memberships {
		if m.OrgID == orgID {
			return m, true
		}
	}
	return Membership{}, false
}

// Label names the actor in the audit log: "admin token", or the user's email.
func (p Actor) Label() string {
	if p.AdminToken {
		return "admin token"
	}
	return p.User.Email
}

// Can reports whether the actor may do a on t. See Authorize for the reason when it may not.
func (p Actor) Can(a Action, t Target) bool { return p.Authorize(a, t) == nil }

// Authorize returns nil when the actor may do a on t. Otherwise it returns EFORBIDDEN
// "<role> may not <action>" when the actor has a role in t.OrgID, and ENOTFOUND "org not found"
// when it has none, so a user cannot learn that another org exists.
func (p Actor) Authorize(a Action, t Target) error {
	what, known := actionText[a]
	if !known {
		return Errorf(EFORBIDDEN, "unknown action %q", a)
	}
	if a == ActEditCap && !ValidNodeKind(t.Node) {
		return Errorf(EFORBIDDEN, "no budget node named for the cap")
	}
	if p.Operator() {
		return nil
	}
	if t.OrgID == "" {
		return Errorf(EFORBIDDEN, "only an operator may %s", gatewayText(a, t, what))
	}
	m, ok := p.Role(t.OrgID)
	if !ok {
		return Errorf(ENOTFOUND, "org %q not found", t.OrgID)
	}
	if allowed(m, a, t) {
		return nil
	}
	switch {
	case a == ActEditCap && t.Node == NodeGlobal:
		return Errorf(EFORBIDDEN, "only an operator may set the gateway-wide cap")
	case m.Role == RoleTeamAdmin && m.TeamID != "" && t.TeamID != m.TeamID && teamAdminAction(a):
		return Errorf(EFORBIDDEN, "%s may not %s outside its own team", m.Role, what)
	case a == ActEditCap:
		return Errorf(EFORBIDDEN, "%s may not set the cap of this %s", roleText(m.Role), t.Node)
	}
	return Errorf(EFORBIDDEN, "%s may not %s", roleText(m.Role), what)
}

// allowed is the matrix for a user with membership m in t.OrgID (not an operator).
func allowed(m Membership, a Action, t Target) bool {
	if a == ActEditCap && t.Node == NodeGlobal {
		return false
	}
	switch m.Role {
	case RoleOwner:
		return a != ActManageOrgs && a != ActManageProviders
	case RoleFinance:
		switch a {
		case ActView, ActEditCap, ActManageKeys, ActManageAlerts, ActManageBilling, ActViewAudit:
			return true
		}
	case RoleTeamAdmin:
		if a == ActView {
			return true
		}
		// A team_admin without a team (the database forbids it) gets nothing more: its ""
		// would otherwise match every org-wide target.
		if m.TeamID == "" || t.TeamID != m.TeamID || !teamAdminAction(a) {
			return false
		}
		if a == ActEditCap {
			// Its members' and keys' caps, never its own team's cap (that is its ceiling).
			return t.Node == NodeMember || t.Node == NodeKey
		}
		return true
	case RoleViewer:
		return a == ActView
	}
	return false
}

// teamAdminAction reports whether a team_admin may ever do a (in its own team).
func teamAdminAction(a Action) bool {
	return a == ActManageMembers || a == ActManageKeys || a == ActEditCap
}

func roleText(r Role) string {
	if ValidRole(r) {
		return string(r)
	}
	return "this role"
}

// gatewayText names an action on the gateway as a whole (Target.OrgID "").
func gatewayText(a Action, t Target, what string) string {
	switch {
	case a == ActManageOrgs || a == ActManageProviders:
		return what
	case a == ActEditCap:
		return "set the gateway-wide cap"
	case a == ActView:
		return "view gateway-wide settings"
	}
	return fmt.Sprintf("%s gateway-wide", what)
}

// Password length bounds, in bytes. The upper bound keeps hashing cheap to refuse.
const (
	MinPasswordBytes = 12
	MaxPasswordBytes = 256
)

// ValidPassword returns EINVALID with a message for the user when pw is too short, too long, or
// one character repeated.
func ValidPassword(pw string) error {
	if len(pw) < MinPasswordBytes {
		return Errorf(EINVALID, "the password is too short: use at least %d characters", MinPasswordBytes)
	}
	if len(pw) > MaxPasswordBytes {
		return Errorf(EINVALID, "the password is too long: use at most %d bytes", MaxPasswordBytes)
	}
	repeated := true
	first, _ := utf8.DecodeRuneInString(pw)
	for _, r := range pw {
		if r != first {
			repeated = false
			break
		}
	}
	if repeated {
		return Errorf(EINVALID, "the password is one character repeated: choose a real password")
	}
	return nil
}
