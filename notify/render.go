package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"

	"yosan/app"
)

// WebhookVersion is the "version" of the webhook body schema. It changes only when a field is
// removed or changes meaning; new fields may appear within a version.
const WebhookVersion = 1

// webhookTestMessage is the "message" of an alert.test webhook.
const webhookTestMessage = "This is a test alert from Yosan. If you received it, this endpoint is set up correctly."

// emailSeparator separates the Japanese text of an email from the English one.
const emailSeparator = "----------------------------------------"

// FormatAmount renders micro-units of currency for people: JPY in whole yen ("¥1,234,568"),
// USD with cents ("$1,234.57"), both with thousands separators and rounded half away from zero
// (half up on the magnitude); a negative amount gets a leading minus ("-¥1,200"). Any other
// currency is rendered exactly, followed by its code ("12.5 EUR").
func FormatAmount(currency string, micro int64) string {
	// The magnitude as uint64 is exact even for math.MinInt64, and adding half a unit to at
	// most 2^63 cannot overflow.
	u := uint64(micro)
	if micro < 0 {
		u = -u
	}
	var s string
	switch currency {
	case app.JPY:
		yen := (u + app.Micro/2) / app.Micro
		s = "¥" + groupThousands(yen)
		u = yen
	case app.USD:
		const microPerCent = app.Micro / 100
		cents := (u + microPerCent/2) / microPerCent
		s = fmt.Sprintf("$%s.%02d", groupThousands(cents/100), cents%100)
		u = cents
	default:
		return app.FormatMoney(micro) + " " + currency
	}
	if micro < 0 && u != 0 {
		s = "-" + s
	}
	return s
}

// groupThousands renders n with a comma every three digits.
func groupThousands(n uint64) string {
	d := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// percentUsed returns spent/cap in percent with one decimal, rounded half away from zero
// ("81.3"), and false when there is no positive cap to divide by.
func percentUsed(spent int64, limit *int64) (string, bool) {
	if limit == nil || *limit <= 0 {
		return "", false
	}
	// Tenths of a percent = spent*1000/cap; big.Int because spent*1000 can exceed int64.
	num := new(big.Int).Mul(big.NewInt(spent), big.NewInt(1000))
	neg := num.Sign() < 0
	num.Abs(num)
	c := big.NewInt(*limit)
	num.Mul(num, big.NewInt(2)).Add(num, c)
	tenths := num.Quo(num, c.Mul(c, big.NewInt(2)))
	whole, frac := new(big.Int).QuoRem(tenths, big.NewInt(10), new(big.Int))
	s := whole.String() + "." + frac.String()
	if neg && tenths.Sign() != 0 {
		s = "-" + s
	}
	return s, true
}

// oneLine flattens a name for a subject or a text line: control characters and line breaks
// become spaces, so an odd org or key name cannot break a header or fake a line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// nodeNames returns a node's label in Japanese and English, plain ("チーム Sales", for a
// subject) and quoted ("チーム「Sales」", for a sentence).
func nodeNames(ev app.AlertEvent) (ja, en, jaQuoted, enQuoted string) {
	if ev.Node.Kind == app.NodeGlobal {
		return "ゲートウェイ全体", "the whole gateway", "ゲートウェイ全体", "the whole gateway"
	}
	name := oneLine(ev.NodeName)
	if name == "" {
		name = ev.Node.ID
	}
	kindJA, kindEN := string(ev.Node.Kind), string(ev.Node.Kind)
	switch ev.Node.Kind {
	case app.NodeOrg:
		kindJA, kindEN = "組織", "org"
	case app.NodeTeam:
		kindJA, kindEN = "チーム", "team"
	case app.NodeMember:
		kindJA, kindEN = "メンバー", "member"
	case app.NodeKey:
		kindJA, kindEN = "API キー", "API key"
	}
	return kindJA + " " + name, kindEN + " " + name, kindJA + "「" + name + "」", kindEN + ` "` + name + `"`
}

// consoleLink is where a message points people: the console's root.
func consoleLink(consoleURL string) string {
	if consoleURL == "" {
		return ""
	}
	return strings.TrimRight(consoleURL, "/") + "/"
}

// percentList renders thresholds as "50%, 80%" with the given separator.
func percentList(ps []int, sep string) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(p) + "%"
	}
	return strings.Join(parts, sep)
}

// crossed returns the thresholds an event passed, never empty for a threshold event.
func crossed(ev app.AlertEvent) []int {
	if len(ev.Crossed) > 0 {
		return ev.Crossed
	}
	return []int{ev.Threshold}
}

// RenderEmail renders an alert as an email: a short bilingual subject and a plain text body,
// Japanese first, then English after a separator line. The body says what happened, for which
// org, node and period, the node's spending against its cap, for an overrun the request, and
// links to consoleURL when it is not empty. It never fails: an unknown kind is rendered as a
// generic notification.
func RenderEmail(ev app.AlertEvent, consoleURL string) (subject, text string) {
	nodeJA, nodeEN, nodeJAQ, nodeENQ := nodeNames(ev)
	period := oneLine(ev.Period)
	var ja, en strings.Builder
	switch ev.Kind {
	case app.AlertThreshold:
		subject = fmt.Sprintf("[Yosan] 予算アラート: %s が %d%% に到達 / Budget alert: %s reached %d%% (%s)",
			nodeJA, ev.Threshold, nodeEN, ev.Threshold, period)
		fmt.Fprintf(&ja, "Yosan 予算アラート\n\n%sの %s の使用額が、予算上限の %d%% に達しました。\n", nodeJAQ, period, ev.Threshold)
		fmt.Fprintf(&en, "Yosan budget alert\n\nThe spending of %s for %s reached %d%% of its cap.\n", nodeENQ, period, ev.Threshold)
		if cs := crossed(ev); len(cs) > 1 {
			fmt.Fprintf(&ja, "今回一度に超えたしきい値: %s\n", percentList(cs, "、"))
			fmt.Fprintf(&en, "Thresholds crossed at once: %s\n", percentList(cs, ", "))
		}
	case app.AlertOverrun:
		subject = fmt.Sprintf("[Yosan] コスト超過: %s のリクエストが予約額を超過 / Cost overrun: a request on %s cost more than reserved (%s)",
			nodeJA, nodeEN, period)
		fmt.Fprintf(&ja, "Yosan コスト超過アラート\n\n%sで、リクエストの実際のコストが、開始時に予約した最大見込み額を上回りました。\n\n", nodeJAQ)
		fmt.Fprintf(&en, "Yosan cost overrun alert\n\nA request on %s cost more than the worst case reserved for it when it started.\n\n", nodeENQ)
		excess := ev.Actual - ev.Amount
		fmt.Fprintf(&ja, "リクエスト ID: %s\nモデル: %s\n予約額（最大見込み）: %s\n実際のコスト: %s\n超過額: %s\n",
			oneLine(ev.RequestID), oneLine(ev.Model), FormatAmount(ev.Currency, ev.Amount), FormatAmount(ev.Currency, ev.Actual), FormatAmount(ev.Currency, excess))
		fmt.Fprintf(&en, "Request ID:             %s\nModel:                  %s\nReserved (worst case):  %s\nActual cost:            %s\nExcess:                 %s\n",
			oneLine(ev.RequestID), oneLine(ev.Model), FormatAmount(ev.Currency, ev.Amount), FormatAmount(ev.Currency, ev.Actual), FormatAmount(ev.Currency, excess))
	case app.AlertTest:
		subject = "[Yosan] テスト通知 / Test alert"
		if ev.Node.Kind != "" {
			subject = fmt.Sprintf("[Yosan] テスト通知: %s / Test alert: %s", nodeJA, nodeEN)
		}
		ja.WriteString("Yosan テスト通知\n\nこれは Yosan からのテスト通知です。このメールが届いていれば、アラートの送信先は正しく設定されています。\n")
		en.WriteString("Yosan test alert\n\nThis is a test alert from Yosan. If you received it, this channel is set up correctly.\n")
	case app.AlertProviderAction:
		prov, model := oneLine(ev.Provider), oneLine(ev.Model)
		until := ev.ResetAt.UTC().Format(time.RFC3339)
		subject = fmt.Sprintf("[Yosan] 要対応: プロバイダー %s が停止中 / Action needed: provider %s is cooling down", prov, prov)
		fmt.Fprintf(&ja, "Yosan プロバイダー要対応アラート\n\nプロバイダー %s（モデル %s）が、人の対応が必要なエラー（残高不足、プランの期限切れ、無効なキーなど）を返したため、呼び出しを停止しています。\n\nエラーコード: %s\nメッセージ: %s\n停止の期限: %s\n対応後は管理 API（DELETE /admin/v1/cooldowns/%s/%s）で解除できます。\n",
			prov, model, oneLine(ev.Code), oneLine(ev.Message), until, prov, model)
		fmt.Fprintf(&en, "Yosan provider action alert\n\nProvider %s (model %s) answered with an error a human must fix (no balance, plan expired, revoked key), so the gateway stopped calling it.\n\nError code: %s\nMessage: %s\nCooling down until: %s\nOnce fixed, clear it with the admin API (DELETE /admin/v1/cooldowns/%s/%s).\n",
			prov, model, oneLine(ev.Code), oneLine(ev.Message), until, prov, model)
		return subject, ja.String() + "\n" + strings.Repeat("-", 40) + "\n\n" + en.String()
	default:
		kind := oneLine(string(ev.Kind))
		subject = fmt.Sprintf("[Yosan] 通知: %s / Notification: %s", kind, kind)
		fmt.Fprintf(&ja, "Yosan 通知 (%s)\n", kind)
		fmt.Fprintf(&en, "Yosan notification (%s)\n", kind)
	}

	// The facts, as "label: value" lines after a blank line.
	var jaFacts, enFacts strings.Builder
	if ev.OrgID != "" {
		org := oneLine(ev.OrgName)
		if org == "" {
			org = ev.OrgID
		}
		fmt.Fprintf(&jaFacts, "組織: %s\n", org)
		fmt.Fprintf(&enFacts, "Organization:  %s\n", org)
	}
	if ev.Node.Kind != "" {
		fmt.Fprintf(&jaFacts, "対象: %s\n", nodeJAQ)
		fmt.Fprintf(&enFacts, "Budget:        %s\n", nodeENQ)
	}
	if ev.Kind == app.AlertThreshold || ev.Kind == app.AlertOverrun {
		spent := FormatAmount(ev.Currency, ev.Spent)
		fmt.Fprintf(&jaFacts, "期間: %s\n", period)
		fmt.Fprintf(&enFacts, "Period:        %s\n", period)
		switch pct, ok := percentUsed(ev.Spent, ev.Cap); {
		case ev.Cap == nil:
			fmt.Fprintf(&jaFacts, "使用額: %s（上限なし）\n", spent)
			fmt.Fprintf(&enFacts, "Spent:         %s (no cap)\n", spent)
		case ok:
			fmt.Fprintf(&jaFacts, "使用額: %s / 上限 %s（%s%% 使用）\n", spent, FormatAmount(ev.Currency, *ev.Cap), pct)
			fmt.Fprintf(&enFacts, "Spent:         %s of %s cap (%s%% used)\n", spent, FormatAmount(ev.Currency, *ev.Cap), pct)
		default:
			fmt.Fprintf(&jaFacts, "使用額: %s / 上限 %s\n", spent, FormatAmount(ev.Currency, *ev.Cap))
			fmt.Fprintf(&enFacts, "Spent:         %s of %s cap\n", spent, FormatAmount(ev.Currency, *ev.Cap))
		}
		fmt.Fprintf(&jaFacts, "予約中: %s\n", FormatAmount(ev.Currency, ev.Reserved))
		fmt.Fprintf(&enFacts, "Reserved:      %s (in-flight requests)\n", FormatAmount(ev.Currency, ev.Reserved))
	}
	if jaFacts.Len() > 0 {
		ja.WriteString("\n" + jaFacts.String())
		en.WriteString("\n" + enFacts.String())
	}
	if link := consoleLink(consoleURL); link != "" {
		fmt.Fprintf(&ja, "\nコンソール: %s\n", link)
		fmt.Fprintf(&en, "\nConsole: %s\n", link)
	}
	return subject, ja.String() + "\n" + emailSeparator + "\n\n" + en.String()
}

// The webhook body. Structs, not maps, so the field order is stable and documented.
type (
	webhookEnvelope struct {
		Type      app.AlertKind `json:"type"`
		Version   int           `json:"version"`
		ID        string        `json:"id"`
		Timestamp string        `json:"timestamp"`
		Data      any           `json:"data"`
	}
	webhookOrg struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	webhookNode struct {
		Kind app.NodeKind `json:"kind"`
		ID   string       `json:"id"`
		Name string       `json:"name"`
	}
	// webhookBudget is embedded, so its fields sit in data itself.
	webhookBudget struct {
		PercentUsed    *string `json:"percent_used"`
		Spent          string  `json:"spent"`
		Reserved       string  `json:"reserved"`
		Cap            *string `json:"cap"`
		SpentMicros    int64   `json:"spent_micros"`
		ReservedMicros int64   `json:"reserved_micros"`
		CapMicros      *int64  `json:"cap_micros"`
	}
	webhookThreshold struct {
		Org              *webhookOrg `json:"org"`
		Node             webhookNode `json:"node"`
		Period           string      `json:"period"`
		Currency         string      `json:"currency"`
		ThresholdPercent int         `json:"threshold_percent"`
		CrossedPercents  []int       `json:"crossed_percents"`
		webhookBudget
		ConsoleURL string `json:"console_url,omitempty"`
	}
	webhookOverrunDetail struct {
		RequestID string `json:"request_id"`
		Model     string `json:"model"`
		Reserved  string `json:"reserved"`
		Actual    string `json:"actual"`
		Excess    string `json:"excess"`
	}
	webhookOverrun struct {
		Org      *webhookOrg `json:"org"`
		Node     webhookNode `json:"node"`
		Period   string      `json:"period"`
		Currency string      `json:"currency"`
		webhookBudget
		Overrun    webhookOverrunDetail `json:"overrun"`
		ConsoleURL string               `json:"console_url,omitempty"`
	}
	webhookTest struct {
		Org        *webhookOrg  `json:"org,omitempty"`
		Node       *webhookNode `json:"node,omitempty"`
		Message    string       `json:"message"`
		ConsoleURL string       `json:"console_url,omitempty"`
	}
)

// WebhookPayload renders an alert as the JSON body of a webhook. Amounts are decimal strings in
// units of the currency (app.FormatMoney: "812.5"), with the exact micro-units beside them for
// the node's counters. The schema, version 1 (docs/webhooks.md has examples):
//
//	{
//	  "type": "budget.threshold_crossed" | "budget.overrun" | "alert.test",
//	  "version": 1,
//	  "id": "<event id, the same on every retry and re-send>",
//	  "timestamp": "<when the event happened, RFC 3339 UTC>",
//	  "data": {...}
//	}
//
// data of budget.threshold_crossed, in this order:
//
//	org               {"id","name"}, or null for the gateway-wide node (the operator's alerts)
//	node              {"kind": "global"|"org"|"team"|"member"|"key", "id", "name"}
//	period            "2026-11"
//	currency          "JPY" | "USD"
//	threshold_percent the highest threshold passed, e.g. 80
//	crossed_percents  every threshold passed by this crossing, ascending, e.g. [50, 80]
//	percent_used      spent / cap in percent, one decimal ("81.3"); null without a positive cap
//	spent, reserved   decimal strings; reserved is what in-flight requests hold
//	cap               decimal string, or null for an uncapped node
//	spent_micros, reserved_micros, cap_micros   the same in micro-units (cap_micros null too)
//	console_url       link to the console; absent when none is configured
//
// data of budget.overrun: org, node, period, currency, the counters (percent_used through
// cap_micros), then overrun {"request_id","model","reserved" (the worst case held),"actual",
// "excess" (actual - reserved)} as decimal strings, then console_url.
//
// data of alert.test: org and node when the test names them (absent otherwise), "message",
// console_url.
//
// It returns an error for an event without an id or of an unknown kind.
func WebhookPayload(ev app.AlertEvent, consoleURL string) ([]byte, error) {
	if ev.ID == "" {
		return nil, errors.New("render webhook: the event has no id")
	}
	link := consoleLink(consoleURL)
	var org *webhookOrg
	if ev.OrgID != "" {
		org = &webhookOrg{ID: ev.OrgID, Name: ev.OrgName}
	}
	node := webhookNode{Kind: ev.Node.Kind, ID: ev.Node.ID, Name: ev.NodeName}
	var data any
	switch ev.Kind {
	case app.AlertThreshold:
		data = webhookThreshold{
			Org: org, Node: node, Period: ev.Period, Currency: ev.Currency,
			ThresholdPercent: ev.Threshold, CrossedPercents: crossed(ev),
			webhookBudget: budgetFields(ev), ConsoleURL: link,
		}
	case app.AlertOverrun:
		data = webhookOverrun{
			Org: org, Node: node, Period: ev.Period, Currency: ev.Currency,
			webhookBudget: budgetFields(ev),
			Overrun: webhookOverrunDetail{
				RequestID: ev.RequestID, Model: ev.Model,
				Reserved: app.FormatMoney(ev.Amount), Actual: app.FormatMoney(ev.Actual),
				Excess: app.FormatMoney(ev.Actual - ev.Amount),
			},
			ConsoleURL: link,
		}
	case app.AlertTest:
		t := webhookTest{Org: org, Message: webhookTestMessage, ConsoleURL: link}
		if ev.Node.Kind != "" {
			t.Node = &node
		}
		data = t
	case app.AlertProviderAction:
		data = webhookProvider{Provider: ev.Provider, Model: ev.Model, Class: "manual_action", Code: ev.Code,
			Message: ev.Message, ResetAt: ev.ResetAt.UTC().Format(time.RFC3339), ConsoleURL: link}
	default:
		return nil, fmt.Errorf("render webhook: unknown alert kind %q", ev.Kind)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "&" in URLs readable; the body is JSON, not HTML
	err := enc.Encode(webhookEnvelope{
		Type: ev.Kind, Version: WebhookVersion, ID: ev.ID,
		Timestamp: ev.CreatedAt.UTC().Format(time.RFC3339), Data: data,
	})
	if err != nil {
		return nil, fmt.Errorf("render webhook: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// webhookProvider is the data of provider.manual_action: which provider and model stopped
// being called, why, and until when.
type webhookProvider struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Class      string `json:"class"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	ResetAt    string `json:"reset_at"`
	ConsoleURL string `json:"console_url,omitempty"`
}

// budgetFields returns a node's counters for a webhook body.
func budgetFields(ev app.AlertEvent) webhookBudget {
	b := webhookBudget{
		Spent: app.FormatMoney(ev.Spent), Reserved: app.FormatMoney(ev.Reserved),
		SpentMicros: ev.Spent, ReservedMicros: ev.Reserved,
	}
	if ev.Cap != nil {
		c, m := app.FormatMoney(*ev.Cap), *ev.Cap
		b.Cap, b.CapMicros = &c, &m
	}
	if p, ok := percentUsed(ev.Spent, ev.Cap); ok {
		b.PercentUsed = &p
	}
	return b
}
