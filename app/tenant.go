package app

import "time"

// Org is a customer company: it owns teams, members and keys, and is billed in Currency.
type Org struct {
	ID       string
	Name     string
	Currency string
	// TimeZone is an IANA name; budget periods are calendar months in it.
	TimeZone string
	// USDJPY is the default USD->JPY rate (micro-JPY per USD) fixed on each new period.
	USDJPY    int64
	CreatedAt time.Time
}

// Team is a group of members inside an org.
type Team struct {
	ID        string
	OrgID     string
	Name      string
	CreatedAt time.Time
}

// Member is a person in a team.
type Member struct {
	ID        string
	OrgID     string
	TeamID    string
	Email     string
	CreatedAt time.Time
}

// APIKey is a team's key (optionally bound to one member). Only its hash is stored; the secret
// exists once, in the answer that created it.
type APIKey struct {
	ID        string
	OrgID     string
	TeamID    string
	MemberID  string // "" when the key is not bound to a member
	Name      string
	Plan      string
	Prefix    string // the first characters of the secret, for recognising it in lists
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	// SensitiveOnly restricts the key to routes marked privacy: sensitive (local backends only).
	SensitiveOnly bool
}

// KeyPrefix starts every key secret, so a leaked key is recognisable.
const KeyPrefix = "ysk-"

// Principal is an authenticated key with everything the pipeline needs about its owner.
type Principal struct {
	Key APIKey
	Org Org
	// Tiers are the model tiers the key's plan allows.
	Tiers []string
	// KeyHash is the stored sha256 of the key's secret.
	KeyHash []byte
	// ClampMaxTokens is the plan's Plan.ClampMaxTokens.
	ClampMaxTokens bool
}

// Allows reports whether the principal's plan includes tier.
func (p *Principal) Allows(tier string) bool {
	for _, t := range p.Tiers {
		if t == tier {
			return true
		}
	}
	return false
}

// Plan maps a name to the model tiers it may call.
type Plan struct {
	Name  string
	Tiers []string
	// ClampMaxTokens lets the gateway lower a chat request's max_tokens to what the budget
	// still holds instead of refusing it (x-yosan-max-tokens-clamped says so).
	ClampMaxTokens bool
}

// Model is a model the gateway offers: which provider serves it, under which upstream name,
// its tier, limits and current price.
type Model struct {
	Name         string
	Provider     string
	UpstreamName string
	Tier         string
	// Kind is "chat" or "embedding".
	Kind string
	// MaxOutputTokens bounds the worst case when a request names no max_tokens.
	MaxOutputTokens int64
	// ContextWindow is the input limit, 0 when unknown.
	ContextWindow int64
	Price         Price
}
