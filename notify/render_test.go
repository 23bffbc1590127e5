package notify_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/notify"
)

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		name     string
		currency string
		micro    int64
		want     string
	}{
		{"JPYZero", app.JPY, 0, "¥0"},
		{"JPYOneMicro", app.JPY, 1, "¥0"},
		{"JPYJustBelowHalf", app.JPY, 499_999, "¥0"},
		{"JPYHalfRoundsUp", app.JPY, 500_000, "¥1"},
		{"JPYAlmostOne", app.JPY, 999_999, "¥1"},
		{"JPYThousands", app.JPY, 1_234_567_890_000, "¥1,234,568"},
		{"JPYExactMillion", app.JPY, 1_000_000 * app.Micro, "¥1,000,000"},
		{"JPYNegative", app.JPY, -1_200 * app.Micro, "-¥1,200"},
		{"JPYNegativeHalf", app.JPY, -500_000, "-¥1"},
		{"JPYNegativeRoundsToZero", app.JPY, -1, "¥0"},
		{"JPYMaxInt64", app.JPY, math.MaxInt64, "¥9,223,372,036,855"},
		{"JPYMinInt64", app.JPY, math.MinInt64, "-¥9,223,372,036,855"},
		{"USDZero", app.USD, 0, "$0.00"},
		{"USDHalfCentRoundsUp", app.USD, 1_234_565_000, "$1,234.57"},
		{"USDBelowHalfCent", app.USD, 1_234_564_999, "$1,234.56"},
		{"USDOneCent", app.USD, 5_000, "$0.01"},
		{"USDLessThanHalfCent", app.USD, 4_999, "$0.00"},
		{"USDNegative", app.USD, -2_500_000, "-$2.50"},
		{"USDMaxInt64", app.USD, math.MaxInt64, "$9,223,372,036,854.78"},
		{"OtherCurrency", "EUR", 12_500_000, "12.5 EUR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notify.FormatAmount(tc.currency, tc.micro); got != tc.want {
				t.Fatalf("FormatAmount(%s, %d) = %q, want %q", tc.currency, tc.micro, got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// thresholdEvent is team Sales of org Acme crossing 50 % and 80 % at once.
func thresholdEvent() app.AlertEvent {
	return app.AlertEvent{
		ID: "evt_1", Kind: app.AlertThreshold, OrgID: "org_1", OrgName: "Acme 株式会社",
		Node: app.Node{Kind: app.NodeTeam, ID: "team_1"}, NodeName: "Sales",
		Period: "2026-11", Currency: app.JPY, Threshold: 80, Crossed: []int{50, 80},
		Spent: 812_500 * app.Micro, Reserved: 3_456_700_000, Cap: ptr(int64(1_000_000 * app.Micro)),
		CreatedAt: time.Date(2026, 11, 5, 9, 30, 0, 0, time.FixedZone("JST", 9*3600)),
	}
}

// overrunEvent is a USD request on an uncapped key that cost more than it reserved.
func overrunEvent() app.AlertEvent {
	return app.AlertEvent{
		ID: "evt_2", Kind: app.AlertOverrun, OrgID: "org_1", OrgName: "Acme",
		Node: app.Node{Kind: app.NodeKey, ID: "key_1"}, NodeName: "ci (yk_ab12)",
		Period: "2026-11", Currency: app.USD, Spent: 1_234_565_000, Reserved: 0,
		RequestID: "req_abc", Model: "gpt-4o", Amount: 120_000, Actual: 1_500_000,
		CreatedAt: time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC),
	}
}

// assertInOrder fails unless each of parts occurs in text, in order.
func assertInOrder(tb testing.TB, text string, parts ...string) {
	tb.Helper()
	rest := text
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			tb.Fatalf("text lacks %q (in this order: %q):\n%s", p, parts, text)
		}
		rest = rest[i+len(p):]
	}
}

func TestRenderEmail(t *testing.T) {
	const console = "https://yosan.example.com/console"
	const sep = "\n----------------------------------------\n"

	t.Run("Threshold", func(t *testing.T) {
		subject, text := notify.RenderEmail(thresholdEvent(), console)
		if want := "[Yosan] 予算アラート: チーム Sales が 80% に到達 / Budget alert: team Sales reached 80% (2026-11)"; subject != want {
			t.Errorf("subject = %q, want %q", subject, want)
		}
		assertInOrder(t, text,
			"予算アラート", "チーム「Sales」", "80% に達しました", "50%、80%",
			"組織: Acme 株式会社", "期間: 2026-11", "¥812,500", "上限 ¥1,000,000", "81.3% 使用", "予約中: ¥3,457",
			"コンソール: "+console+"/",
			sep,
			"budget alert", `team "Sales"`, "reached 80% of its cap", "50%, 80%",
			"Acme 株式会社", "2026-11", "Spent:", "¥812,500 of ¥1,000,000 cap (81.3% used)", "Reserved:", "¥3,457",
			"Console: "+console+"/",
		)
	})

	t.Run("OneThreshold", func(t *testing.T) {
		ev := thresholdEvent()
		ev.Crossed = []int{80}
		_, text := notify.RenderEmail(ev, console)
		if strings.Contains(text, "50%") {
			t.Errorf("text lists thresholds although one was crossed:\n%s", text)
		}
	})

	t.Run("GlobalNode", func(t *testing.T) {
		ev := thresholdEvent()
		ev.OrgID, ev.OrgName, ev.Node, ev.NodeName = "", "", app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, ""
		subject, text := notify.RenderEmail(ev, console)
		if want := "[Yosan] 予算アラート: ゲートウェイ全体 が 80% に到達 / Budget alert: the whole gateway reached 80% (2026-11)"; subject != want {
			t.Errorf("subject = %q, want %q", subject, want)
		}
		assertInOrder(t, text, "ゲートウェイ全体", sep, "the whole gateway")
		if strings.Contains(text, "組織:") || strings.Contains(text, "Organization:") {
			t.Errorf("text names an org for the global node:\n%s", text)
		}
	})

	t.Run("Overrun", func(t *testing.T) {
		subject, text := notify.RenderEmail(overrunEvent(), console)
		assertInOrder(t, subject, "[Yosan] コスト超過: API キー ci (yk_ab12)", " / Cost overrun: a request on API key ci (yk_ab12)", "(2026-11)")
		assertInOrder(t, text,
			"コスト超過", "API キー「ci (yk_ab12)」",
			"リクエスト ID: req_abc", "モデル: gpt-4o", "予約額（最大見込み）: $0.12", "実際のコスト: $1.50", "超過額: $1.38",
			"使用額: $1,234.57（上限なし）",
			sep,
			"cost overrun", `API key "ci (yk_ab12)"`,
			"req_abc", "gpt-4o", "$0.12", "$1.50", "Excess:", "$1.38",
			"$1,234.57 (no cap)",
		)
	})

	t.Run("ZeroCap", func(t *testing.T) {
		ev := thresholdEvent()
		ev.Cap = ptr(int64(0))
		_, text := notify.RenderEmail(ev, console)
		assertInOrder(t, text, "使用額: ¥812,500 / 上限 ¥0\n", sep, "¥812,500 of ¥0 cap\n")
	})

	t.Run("Test", func(t *testing.T) {
		ev := app.AlertEvent{ID: "evt_3", Kind: app.AlertTest, OrgID: "org_1", OrgName: "Acme"}
		subject, text := notify.RenderEmail(ev, console)
		if want := "[Yosan] テスト通知 / Test alert"; subject != want {
			t.Errorf("subject = %q, want %q", subject, want)
		}
		assertInOrder(t, text, "テスト通知", "組織: Acme", sep, "test alert", "Organization:  Acme")
		if strings.Contains(text, "期間") || strings.Contains(text, "Spent") {
			t.Errorf("a test message shows budget figures:\n%s", text)
		}
	})

	t.Run("NoConsoleURL", func(t *testing.T) {
		_, text := notify.RenderEmail(thresholdEvent(), "")
		if strings.Contains(text, "コンソール") || strings.Contains(text, "Console") {
			t.Errorf("text links a console although none is configured:\n%s", text)
		}
	})

	t.Run("NameWithLineBreaks", func(t *testing.T) {
		ev := thresholdEvent()
		ev.NodeName = "Sales\r\nBcc: victim@example.com"
		subject, text := notify.RenderEmail(ev, console)
		if strings.ContainsAny(subject, "\r\n") {
			t.Errorf("subject has a line break: %q", subject)
		}
		if strings.Contains(text, "\nBcc:") {
			t.Errorf("the name starts a line of its own:\n%s", text)
		}
	})
}

// jsonKeys returns the keys of the JSON object raw, in document order.
func jsonKeys(tb testing.TB, raw []byte) []string {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		tb.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			tb.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			tb.Fatal(err)
		}
	}
	return keys
}

// The webhook body as docs/webhooks.md describes it; decoding with DisallowUnknownFields
// catches a field the docs do not know.
type (
	wantEnvelope struct {
		Type      string          `json:"type"`
		Version   int             `json:"version"`
		ID        string          `json:"id"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	wantOrg struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	wantNode struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	wantOverrun struct {
		RequestID string `json:"request_id"`
		Model     string `json:"model"`
		Reserved  string `json:"reserved"`
		Actual    string `json:"actual"`
		Excess    string `json:"excess"`
	}
	wantData struct {
		Org              *wantOrg     `json:"org"`
		Node             *wantNode    `json:"node"`
		Period           string       `json:"period"`
		Currency         string       `json:"currency"`
		ThresholdPercent int          `json:"threshold_percent"`
		CrossedPercents  []int        `json:"crossed_percents"`
		PercentUsed      *string      `json:"percent_used"`
		Spent            string       `json:"spent"`
		Reserved         string       `json:"reserved"`
		Cap              *string      `json:"cap"`
		SpentMicros      int64        `json:"spent_micros"`
		ReservedMicros   int64        `json:"reserved_micros"`
		CapMicros        *int64       `json:"cap_micros"`
		Overrun          *wantOverrun `json:"overrun"`
		Provider         string       `json:"provider"`
		Model            string       `json:"model"`
		Class            string       `json:"class"`
		Code             string       `json:"code"`
		Message          string       `json:"message"`
		ResetAt          string       `json:"reset_at"`
		ConsoleURL       string       `json:"console_url"`
	}
)

// dataKeys lists the keys of a webhook's data, in order, with every optional one present.
func dataKeys(typ string) []string {
	switch typ {
	case "budget.threshold_crossed":
		return []string{"org", "node", "period", "currency", "threshold_percent", "crossed_percents",
			"percent_used", "spent", "reserved", "cap", "spent_micros", "reserved_micros", "cap_micros", "console_url"}
	case "budget.overrun":
		return []string{"org", "node", "period", "currency", "percent_used", "spent", "reserved", "cap",
			"spent_micros", "reserved_micros", "cap_micros", "overrun", "console_url"}
	case "alert.test":
		return []string{"org", "node", "message", "console_url"}
	case "provider.manual_action":
		return []string{"provider", "model", "class", "code", "message", "reset_at", "console_url"}
	}
	return nil
}

// decodePayload checks the envelope and returns it with its data, both decoded strictly.
func decodePayload(tb testing.TB, body []byte) (wantEnvelope, wantData) {
	tb.Helper()
	var env wantEnvelope
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		tb.Fatalf("decode %s: %v", body, err)
	}
	if got, want := jsonKeys(tb, body), []string{"type", "version", "id", "timestamp", "data"}; !slices.Equal(got, want) {
		tb.Fatalf("keys = %q, want %q", got, want)
	}
	var data wantData
	dec = json.NewDecoder(bytes.NewReader(env.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&data); err != nil {
		tb.Fatalf("decode data %s: %v", env.Data, err)
	}
	return env, data
}

func TestWebhookPayload(t *testing.T) {
	const console = "https://yosan.example.com/console"

	t.Run("Threshold", func(t *testing.T) {
		body, err := notify.WebhookPayload(thresholdEvent(), console)
		if err != nil {
			t.Fatal(err)
		}
		env, data := decodePayload(t, body)
		if env.Type != "budget.threshold_crossed" || env.Version != notify.WebhookVersion ||
			env.ID != "evt_1" || env.Timestamp != "2026-11-05T00:30:00Z" {
			t.Errorf("envelope = %+v", env)
		}
		want := wantData{
			Org: &wantOrg{"org_1", "Acme 株式会社"}, Node: &wantNode{"team", "team_1", "Sales"},
			Period: "2026-11", Currency: "JPY", ThresholdPercent: 80, CrossedPercents: []int{50, 80},
			PercentUsed: ptr("81.3"), Spent: "812500", Reserved: "3456.7", Cap: ptr("1000000"),
			SpentMicros: 812_500_000_000, ReservedMicros: 3_456_700_000, CapMicros: ptr(int64(1_000_000_000_000)),
			ConsoleURL: console + "/",
		}
		if !reflect.DeepEqual(data, want) {
			t.Errorf("data = %s\nwant %+v", env.Data, want)
		}
		if got, want := jsonKeys(t, env.Data), dataKeys(env.Type); !slices.Equal(got, want) {
			t.Errorf("data keys = %q, want %q", got, want)
		}
	})

	t.Run("GlobalNodeWithoutCrossedList", func(t *testing.T) {
		ev := thresholdEvent()
		ev.OrgID, ev.OrgName, ev.Node, ev.NodeName, ev.Crossed = "", "", app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, "", nil
		body, err := notify.WebhookPayload(ev, "")
		if err != nil {
			t.Fatal(err)
		}
		env, data := decodePayload(t, body)
		if !bytes.Contains(env.Data, []byte(`"org":null`)) || data.Node.Kind != "global" {
			t.Errorf("data = %s, want org null and the global node", env.Data)
		}
		if !slices.Equal(data.CrossedPercents, []int{80}) {
			t.Errorf("crossed_percents = %v, want [80]", data.CrossedPercents)
		}
		if slices.Contains(jsonKeys(t, env.Data), "console_url") {
			t.Errorf("console_url present without a console: %s", env.Data)
		}
	})

	t.Run("Overrun", func(t *testing.T) {
		body, err := notify.WebhookPayload(overrunEvent(), console)
		if err != nil {
			t.Fatal(err)
		}
		env, data := decodePayload(t, body)
		if env.Type != "budget.overrun" {
			t.Errorf("type = %q", env.Type)
		}
		want := wantData{
			Org: &wantOrg{"org_1", "Acme"}, Node: &wantNode{"key", "key_1", "ci (yk_ab12)"},
			Period: "2026-11", Currency: "USD", Spent: "1234.565", Reserved: "0", SpentMicros: 1_234_565_000,
			Overrun:    &wantOverrun{RequestID: "req_abc", Model: "gpt-4o", Reserved: "0.12", Actual: "1.5", Excess: "1.38"},
			ConsoleURL: console + "/",
		}
		if !reflect.DeepEqual(data, want) {
			t.Errorf("data = %s\nwant %+v", env.Data, want)
		}
		if got, want := jsonKeys(t, env.Data), dataKeys(env.Type); !slices.Equal(got, want) {
			t.Errorf("data keys = %q, want %q", got, want)
		}
		for _, null := range []string{`"percent_used":null`, `"cap":null`, `"cap_micros":null`} {
			if !bytes.Contains(env.Data, []byte(null)) {
				t.Errorf("data lacks %s for an uncapped node: %s", null, env.Data)
			}
		}
	})

	t.Run("Test", func(t *testing.T) {
		ev := app.AlertEvent{ID: "evt_3", Kind: app.AlertTest, OrgID: "org_1", OrgName: "Acme",
			Node: app.Node{Kind: app.NodeOrg, ID: "org_1"}, NodeName: "Acme", CreatedAt: time.Unix(0, 0)}
		body, err := notify.WebhookPayload(ev, console)
		if err != nil {
			t.Fatal(err)
		}
		env, data := decodePayload(t, body)
		if env.Type != "alert.test" || data.Message == "" || data.Org == nil || data.Node == nil || data.Node.Kind != "org" {
			t.Errorf("payload = %s, want an alert.test with org, node and message", body)
		}
		if got, want := jsonKeys(t, env.Data), dataKeys(env.Type); !slices.Equal(got, want) {
			t.Errorf("data keys = %q, want %q", got, want)
		}
	})

	t.Run("TestWithoutNode", func(t *testing.T) {
		body, err := notify.WebhookPayload(app.AlertEvent{ID: "evt_4", Kind: app.AlertTest}, "")
		if err != nil {
			t.Fatal(err)
		}
		env, _ := decodePayload(t, body)
		if got, want := jsonKeys(t, env.Data), []string{"message"}; !slices.Equal(got, want) {
			t.Errorf("data keys = %q, want %q", got, want)
		}
	})

	t.Run("ErrUnknownKind", func(t *testing.T) {
		if body, err := notify.WebhookPayload(app.AlertEvent{ID: "evt_5", Kind: "budget.exploded"}, ""); err == nil {
			t.Fatalf("WebhookPayload = %s, want an error", body)
		}
	})

	t.Run("ErrNoID", func(t *testing.T) {
		if body, err := notify.WebhookPayload(app.AlertEvent{Kind: app.AlertTest}, ""); err == nil {
			t.Fatalf("WebhookPayload = %s, want an error", body)
		}
	})
}

// TestWebhookDocs keeps docs/webhooks.md honest: it shows one example per type, each with the
// fields and field order WebhookPayload produces, and the reference signature vector.
func TestWebhookDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, block := range strings.Split(string(doc), "```json\n")[1:] {
		example, _, _ := strings.Cut(block, "```")
		if !strings.Contains(example, `"version"`) {
			continue
		}
		env, _ := decodePayload(t, []byte(example))
		if got, want := jsonKeys(t, env.Data), dataKeys(env.Type); !slices.Equal(got, want) {
			t.Errorf("%s example: data keys = %q, want %q", env.Type, got, want)
		}
		types = append(types, env.Type)
	}
	if want := []string{"budget.threshold_crossed", "budget.overrun", "alert.test", "provider.manual_action"}; !slices.Equal(types, want) {
		t.Errorf("examples = %q, want %q", types, want)
	}
	for _, s := range []string{vecSecret, vecID, strconv.Itoa(vecTS), vecBody, vecSig} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/webhooks.md lacks the test vector's %q", s)
		}
	}
}
