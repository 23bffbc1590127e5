package app

import (
	"slices"
	"time"
)

// AlertKind names what an alert event is about. The value is also the webhook event "type".
type AlertKind string

// Alert kinds.
const (
	// AlertThreshold: a node's committed spend crossed one or more of its thresholds.
	AlertThreshold AlertKind = "budget.threshold_crossed"
	// AlertOverrun: a request's true cost exceeded its reserved worst case.
	AlertOverrun AlertKind = "budget.overrun"
	// AlertTest: a test message an admin asked for.
	AlertTest AlertKind = "alert.test"
	// AlertProviderAction: a provider cooldown that needs a human (no balance, plan expired,
	// revoked key); sent to the operator.
	AlertProviderAction AlertKind = "provider.manual_action"
)

// DefaultThresholds are the percentages of a cap that alert when no others are set.
var DefaultThresholds = []int{50, 80, 90, 100}

// MaxThreshold bounds a threshold percentage (an alert at 500 % of the cap is still useful on
// an overrun node; beyond that a typo is more likely).
const MaxThreshold = 1000

// NormalizeThresholds checks a node's thresholds (1..MaxThreshold percent, at most 10) and
// returns them sorted without duplicates. EINVALID names the bad value.
func NormalizeThresholds(ts []int) ([]int, error) {
	if len(ts) > 10 {
		return nil, Errorf(EINVALID, "at most 10 thresholds per node, got %d", len(ts))
	}
	out := make([]int, 0, len(ts))
	for _, t := range ts {
		if t < 1 || t > MaxThreshold {
			return nil, Errorf(EINVALID, "threshold %d is out of range: give a percentage from 1 to %d", t, MaxThreshold)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// AlertEvent is one alert as written to the outbox in the transaction that caused it: a
// threshold crossing or an overrun of one budget node and period.
type AlertEvent struct {
	ID   string
	Kind AlertKind
	// OrgID is "" for the global (gateway-wide) node, whose alerts go to the operator.
	OrgID   string
	OrgName string
	Node    Node
	// NodeName is the node's human name: org or team name, member email, key name and prefix.
	NodeName string
	Period   string
	Currency string
	// Threshold is the highest threshold (percent of the cap) this crossing passed; Crossed
	// lists every threshold it passed, ascending (a single large request can pass several).
	Threshold int
	Crossed   []int
	// Spent, Reserved and Cap are the node's counters right after the crossing, in micro-units
	// of Currency. Cap is nil for an uncapped node (overrun events only).
	Spent    int64
	Reserved int64
	Cap      *int64
	// RequestID, Model, Amount (reserved worst case) and Actual describe an overrun.
	RequestID string
	Model     string
	Amount    int64
	Actual    int64
	// Provider, Code, Message and ResetAt describe a provider cooldown that needs a human:
	// the provider's name, its error code and message, and when the cooldown ends.
	Provider  string
	Code      string
	Message   string
	ResetAt   time.Time
	CreatedAt time.Time
}

// ChannelKind is how alerts reach people.
type ChannelKind string

// Channel kinds.
const (
	ChannelEmail   ChannelKind = "email"
	ChannelWebhook ChannelKind = "webhook"
)

// AlertChannel is one destination of an org's alerts (or, with OrgID "", of the operator's).
type AlertChannel struct {
	ID    string
	OrgID string
	Name  string
	Kind  ChannelKind
	// Emails are the recipients of an email channel.
	Emails []string
	// URL is a webhook channel's endpoint.
	URL string
	// Secrets are the webhook signing secrets ("whsec_..."), newest first: during a rotation
	// the previous secret still signs until it expires.
	Secrets []string
	// PrevSecret is the secret replaced by the last rotation and PrevSecretExpires the end of
	// its overlap (nil when none).
	PrevSecret        string
	PrevSecretExpires *time.Time
	Enabled           bool
	// Managed is true for a channel defined by the config file (the operator's address); the
	// admin API cannot change it.
	Managed   bool
	CreatedAt time.Time
}

// DeliveryStatus is the state of one alert's delivery to one channel.
type DeliveryStatus string

// Delivery states: pending -> sent | failed (retries exhausted). A re-send makes a failed or
// sent delivery pending again.
const (
	DeliveryPending DeliveryStatus = "pending"
	DeliverySent    DeliveryStatus = "sent"
	DeliveryFailed  DeliveryStatus = "failed"
)

// AlertDelivery is one event's delivery to one channel, with what was (or will be) sent, so a
// retry or a re-send sends the same bytes under the same message id.
type AlertDelivery struct {
	ID        string
	EventID   string
	ChannelID string
	OrgID     string
	Kind      ChannelKind
	Status    DeliveryStatus
	// Target is the webhook URL or the comma-separated recipients, as of the fan-out.
	Target string
	// Subject and Body: the email's subject and text, or the webhook's JSON payload in Body.
	Subject        string
	Body           string
	Attempts       int
	NextAttemptAt  time.Time
	LastAttemptAt  *time.Time
	LastStatusCode int
	LastError      string
	CreatedAt      time.Time
	SentAt         *time.Time
}
