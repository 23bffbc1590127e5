package app

import (
	"time"
)

// NodeKind is a level of the budget hierarchy.
type NodeKind string

// Budget node kinds, in the order a request's nodes are listed (not the lock order: rows are
// locked by budget row id, one fixed global order).
const (
	NodeGlobal NodeKind = "global"
	NodeOrg    NodeKind = "org"
	NodeTeam   NodeKind = "team"
	NodeMember NodeKind = "member"
	NodeKey    NodeKind = "key"
)

// GlobalNodeID is the node id of the single gateway-wide node.
const GlobalNodeID = "00000000-0000-0000-0000-000000000000"

// ValidNodeKind reports whether k is a known node kind.
func ValidNodeKind(k NodeKind) bool {
	switch k {
	case NodeGlobal, NodeOrg, NodeTeam, NodeMember, NodeKey:
		return true
	}
	return false
}

// Node names one budget node.
type Node struct {
	Kind NodeKind
	ID   string
}

// String renders the node as "kind:id" (the global node as "global").
func (n Node) String() string {
	if n.Kind == NodeGlobal {
		return "global"
	}
	return string(n.Kind) + ":" + n.ID
}

// Budget is one node's money for one period, in micro-units of Currency.
type Budget struct {
	ID       int64
	Node     Node
	Period   string
	Currency string
	// Cap is nil when the node has no cap (unlimited, still metered).
	Cap      *int64
	Reserved int64
	Spent    int64
	// Thresholds are the node's alert thresholds (percent of the cap) for this period, and
	// LastAlert the highest one already alerted in it (0 when none).
	Thresholds []int
	LastAlert  int
}

// Remaining returns cap - reserved - spent (negative after an overrun), or -1 with ok=false
// when the node has no cap.
func (b Budget) Remaining() (int64, bool) {
	if b.Cap == nil {
		return -1, false
	}
	return *b.Cap - b.Reserved - b.Spent, true
}

// Period returns the budget period ("2006-01") that t falls in, in loc.
func Period(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01")
}

// ReservationStatus is the state of a ledger row.
type ReservationStatus string

// Reservation states: pending -> committed | released | expired.
const (
	StatusPending   ReservationStatus = "pending"
	StatusCommitted ReservationStatus = "committed"
	StatusReleased  ReservationStatus = "released"
	StatusExpired   ReservationStatus = "expired"
)

// ReserveRequest asks the ledger to hold the worst-case cost of one request on every node of
// its key's path.
type ReserveRequest struct {
	RequestID string
	OrgID     string
	KeyID     string
	Period    string
	Currency  string
	// Nodes are the org-currency nodes to charge (org, team, member, key).
	Nodes []Node
	// Amount is the worst case in micro-units of Currency.
	Amount int64
	// GlobalPeriod and GlobalAmount charge the gateway-wide node in the global currency.
	GlobalPeriod   string
	GlobalCurrency string
	GlobalAmount   int64

	Model           string
	Provider        string
	UpstreamModel   string
	USDJPY          int64
	EstInputTokens  int64
	MaxOutputTokens int64
	Deadline        time.Time
	// Quotas are the provider quota windows the request takes, admitted in the same
	// transaction as the money (all or nothing).
	Quotas []QuotaClaim
}

// Reservation is a ledger row.
type Reservation struct {
	RequestID       string            `json:"request_id"`
	OrgID           string            `json:"org_id"`
	KeyID           string            `json:"key_id"`
	Period          string            `json:"period"`
	Status          ReservationStatus `json:"status"`
	Currency        string            `json:"currency"`
	Amount          int64             `json:"-"`
	Actual          *int64            `json:"-"`
	BudgetIDs       []int64           `json:"budget_ids"`
	GlobalBudgetID  *int64            `json:"global_budget_id"`
	GlobalAmount    int64             `json:"-"`
	GlobalActual    *int64            `json:"-"`
	Overrun         bool              `json:"overrun"`
	Model           string            `json:"model"`
	Provider        string            `json:"provider"`
	UpstreamModel   string            `json:"upstream_model"`
	USDJPY          int64             `json:"-"`
	EstInputTokens  int64             `json:"est_input_tokens"`
	MaxOutputTokens int64             `json:"max_output_tokens"`
	InputTokens     *int64            `json:"input_tokens"`
	CachedTokens    *int64            `json:"cached_tokens"`
	OutputTokens    *int64            `json:"output_tokens"`
	UsageSource     *string           `json:"usage_source"`
	Deadline        time.Time         `json:"deadline"`
	CreatedAt       time.Time         `json:"created_at"`
	SettledAt       *time.Time        `json:"settled_at"`
	// QuotaIDs are the provider quota window rows the reservation holds.
	QuotaIDs []int64 `json:"quota_ids"`
	// ErrorClass and ErrorCode say why a failed attempt failed (nil for answered requests).
	ErrorClass *string `json:"error_class"`
	ErrorCode  *string `json:"error_code"`
}

// Settlement finishes one pending reservation: commit with the actual cost, or release.
type Settlement struct {
	RequestID string
	// Status is the final state: StatusCommitted charges Actual, StatusReleased charges
	// nothing, StatusExpired (the sweeper) charges Actual (by default the reserved amount).
	Status ReservationStatus
	Actual int64
	// GlobalActual is the actual cost in the global currency.
	GlobalActual int64
	Usage        Usage
	// UsageSource says where the usage came from: "upstream", "relayed" (counted by the gateway
	// when a stream broke), or "estimate".
	UsageSource string
	// LockIDs lists every budget row the reservation charged (Reservation.LockIDs), so the
	// settlement can lock them in the global order before touching the ledger row.
	LockIDs []int64
	// QuotaIDs lists the quota window rows the reservation holds (Reservation.QuotaIDs),
	// locked after the budget rows, in id order too.
	QuotaIDs []int64
	// ErrorClass and ErrorCode record why an attempt failed (its provider error's class and
	// code), "" for an answered request.
	ErrorClass ErrorClass
	ErrorCode  string
}

// LockIDs returns every budget row id the reservation charged, the global one included.
func (r *Reservation) LockIDs() []int64 {
	ids := make([]int64, 0, len(r.BudgetIDs)+1)
	ids = append(ids, r.BudgetIDs...)
	if r.GlobalBudgetID != nil {
		ids = append(ids, *r.GlobalBudgetID)
	}
	return ids
}

// SettleOutcome says what a settlement did.
type SettleOutcome struct {
	// Applied is true when this call moved the money; false when the reservation was already
	// settled (a retry, a race lost to another settler) or does not exist.
	Applied bool
	Overrun bool
}

// ReserveResult is the ledger's answer to one ReserveRequest.
type ReserveResult struct {
	// Admitted is true when every node had room and the worst case is now held.
	Admitted bool
	// Duplicate is true when a reservation with this request_id already existed: nothing new
	// was reserved and Reservation is the existing row.
	Duplicate bool
	// FullNode names the first node (in the request's order) that had no room.
	FullNode Node
	// FullQuota is the first quota window without room, when the budgets had room but a
	// window did not (nil otherwise).
	FullQuota *QuotaClaim
	// Reservation is the row (when admitted or duplicate).
	Reservation Reservation
	// Remaining is the room left on the tightest capped org-currency node after this
	// reservation; HasRemaining is false when none of them has a cap.
	Remaining    int64
	HasRemaining bool
}
