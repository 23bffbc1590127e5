package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
	"yosan/notify"
	"yosan/notify/mailpittest"
)

// clock is an injected clock tests move by hand.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }

// hookReceiver is a real webhook endpoint that verifies every signature, as a customer's would,
// and answers fail times with 503 before it accepts.
type hookReceiver struct {
	*httptest.Server
	secrets atomic.Pointer[[]string]
	now     func() time.Time
	fail    atomic.Int64
	mu      sync.Mutex
	got     []received
}

type received struct {
	id      string
	body    []byte
	status  int
	badSign error
}

func newHookReceiver(t *testing.T, now func() time.Time) *hookReceiver {
	r := &hookReceiver{now: now}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		rec := received{id: req.Header.Get("webhook-id"), body: body}
		var secrets []string
		if p := r.secrets.Load(); p != nil {
			secrets = *p
		}
		rec.badSign = notify.Verify(secrets, req.Header, body, r.now(), 5*time.Minute)
		switch {
		case rec.badSign != nil:
			rec.status = http.StatusUnauthorized
		case r.fail.Add(-1) >= 0:
			rec.status = http.StatusServiceUnavailable
		default:
			rec.status = http.StatusNoContent
		}
		r.mu.Lock()
		r.got = append(r.got, rec)
		r.mu.Unlock()
		if rec.status == http.StatusServiceUnavailable {
			http.Error(w, "maintenance, try later", rec.status)
			return
		}
		w.WriteHeader(rec.status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type fixture struct {
	d     *db.DB
	l     *db.Ledger
	clock *clock
	org   app.Org
	key   app.APIKey
	nodes []app.Node
}

func newFixture(t *testing.T) *fixture {
	d := dbtest.New(t)
	c := newClock(time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC))
	d.Now = c.Now
	l := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: time.UTC})
	t.Cleanup(l.Close)
	ctx := context.Background()
	if err := d.UpsertPlans(ctx, []app.Plan{{Name: "free", Tiers: []string{"free"}}}); err != nil {
		t.Fatal(err)
	}
	o, err := d.CreateOrg(ctx, app.Org{Name: "Acme 株式会社", Currency: app.JPY, TimeZone: "Asia/Tokyo", USDJPY: 150 * app.Micro})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := d.CreateTeam(ctx, o.ID, "Sales")
	if err != nil {
		t.Fatal(err)
	}
	k, err := d.CreateKey(ctx, app.APIKey{OrgID: o.ID, TeamID: tm.ID, Name: "ci", Plan: "free"}, db.NewKeySecret())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{d: d, l: l, clock: c, org: o, key: k,
		nodes: []app.Node{{Kind: app.NodeOrg, ID: o.ID}, {Kind: app.NodeTeam, ID: tm.ID}, {Kind: app.NodeKey, ID: k.ID}}}
	cp := int64(1000 * app.Micro)
	if _, err := l.SetCap(ctx, app.Node{Kind: app.NodeTeam, ID: tm.ID}, &cp); err != nil {
		t.Fatal(err)
	}
	return f
}

// spend reserves and commits yen on the fixture's key.
func (f *fixture) spend(t *testing.T, yen int64) {
	t.Helper()
	ctx := context.Background()
	amt := yen * app.Micro
	res, err := f.l.Reserve(ctx, app.ReserveRequest{RequestID: uuid.NewString(), OrgID: f.org.ID, KeyID: f.key.ID,
		Period: app.Period(f.clock.Now(), time.UTC), Currency: app.JPY, Nodes: f.nodes, Amount: amt,
		Model: "demo-mini", Provider: "demo", UpstreamModel: "demo-mini", USDJPY: 150 * app.Micro,
		EstInputTokens: 1, MaxOutputTokens: 1, Deadline: f.clock.Now().Add(time.Minute)})
	if err != nil || !res.Admitted {
		t.Fatalf("reserve: %v %+v", err, res)
	}
	if _, err := f.l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusCommitted,
		Actual: amt, LockIDs: res.Reservation.LockIDs()}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) channel(t *testing.T, ch app.AlertChannel) app.AlertChannel {
	t.Helper()
	ch.OrgID, ch.Enabled = f.org.ID, true
	if ch.Kind == app.ChannelWebhook {
		s, err := notify.NewWebhookSecret()
		if err != nil {
			t.Fatal(err)
		}
		ch.Secrets = []string{s}
	}
	out, err := f.d.CreateAlertChannel(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRound(t *testing.T, w *notify.Worker) notify.Stats {
	t.Helper()
	st, err := w.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestWorkerDeliversWithRetries(t *testing.T) {
	f := newFixture(t)
	mp := mailpittest.Start(t)
	rcv := newHookReceiver(t, f.clock.Now)
	hook := f.channel(t, app.AlertChannel{Name: "ops hook", Kind: app.ChannelWebhook, URL: rcv.URL + "/yosan"})
	rcv.secrets.Store(&hook.Secrets)
	f.channel(t, app.AlertChannel{Name: "finance", Kind: app.ChannelEmail, Emails: []string{"cfo@acme.example"}})
	w := &notify.Worker{DB: f.d, ConsoleURL: "https://yosan.example.com",
		Mailer: notify.NewMailer(notify.SMTPConfig{Host: mp.SMTPHost, Port: mp.SMTPPort, From: "Yosan <alerts@yosan.example>", TLS: notify.TLSNone}),
		Jitter: func() float64 { return 0.5 }}

	rcv.fail.Store(3) // the hookReceiver is down for three attempts
	f.spend(t, 850)   // the team passes 50 and 80 at once: one event
	st := mustRound(t, w)
	if st != (notify.Stats{Events: 1, Sent: 1, Retried: 1}) {
		t.Fatalf("first round %+v, want the event fanned out, the email sent, the webhook retried", st)
	}
	msgs := mp.WaitFor(t, 1, 10*time.Second)
	m := mp.Message(t, msgs[0].ID)
	if !strings.Contains(m.Subject, "80%") || !strings.Contains(m.Subject, "Sales") || len(m.To) != 1 || m.To[0].Address != "cfo@acme.example" {
		t.Errorf("email %q to %v", m.Subject, m.To)
	}
	for _, want := range []string{"¥850", "¥1,000", "Sales", "https://yosan.example.com/", "85.0"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("email text lacks %q:\n%s", want, m.Text)
		}
	}

	// Nothing is due before the backoff ends; then each round retries once.
	if st := mustRound(t, w); st != (notify.Stats{}) {
		t.Fatalf("round before the retry is due: %+v", st)
	}
	waits := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute}
	for i, wait := range waits {
		f.clock.Add(wait)
		st := mustRound(t, w)
		want := notify.Stats{Retried: 1}
		if i == len(waits)-1 {
			want = notify.Stats{Sent: 1}
		}
		if st != want {
			t.Fatalf("round after %s: %+v, want %+v", wait, st, want)
		}
	}
	got := rcv.received()
	if len(got) != 4 {
		t.Fatalf("hookReceiver got %d requests, want 4", len(got))
	}
	for i, r := range got {
		if r.badSign != nil {
			t.Errorf("request %d: signature rejected: %v", i, r.badSign)
		}
		if r.id != got[0].id || string(r.body) != string(got[0].body) {
			t.Errorf("request %d: id %s body %s differ from the first (%s)", i, r.id, r.body, got[0].id)
		}
	}
	var payload struct {
		Type    string `json:"type"`
		Version int    `json:"version"`
		Data    struct {
			Node    struct{ Kind, Name string }
			Crossed []int  `json:"crossed_percents"`
			Spent   string `json:"spent"`
			Cap     string `json:"cap"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.Type != "budget.threshold_crossed" || payload.Version != 1 || payload.Data.Node.Name != "Sales" ||
		len(payload.Data.Crossed) != 2 || payload.Data.Spent != "850" || payload.Data.Cap != "1000" {
		t.Errorf("payload %+v", payload)
	}
	ds, err := f.d.AlertDeliveries(context.Background(), f.org.ID, db.DeliveryFilter{Status: app.DeliverySent, Limit: 10})
	if err != nil || len(ds) != 2 {
		t.Fatalf("sent deliveries: %d %v", len(ds), err)
	}
	for _, d := range ds {
		if d.Kind == app.ChannelWebhook {
			_, log, err := f.d.AlertDelivery(context.Background(), f.org.ID, d.ID)
			if err != nil || d.Attempts != 4 || len(log) != 4 || log[0].StatusCode != 503 || !log[3].OK ||
				!strings.Contains(log[0].Error, "maintenance") {
				t.Errorf("webhook delivery %+v log %+v %v", d, log, err)
			}
		}
	}
}

func TestWorkerRetriesForADayThenGivesUp(t *testing.T) {
	f := newFixture(t)
	rcv := newHookReceiver(t, f.clock.Now)
	hook := f.channel(t, app.AlertChannel{Name: "down", Kind: app.ChannelWebhook, URL: rcv.URL})
	rcv.secrets.Store(&hook.Secrets)
	w := &notify.Worker{DB: f.d, Jitter: func() float64 { return 0.5 }}
	rcv.fail.Store(1 << 30) // down for good
	start := f.clock.Now()
	f.spend(t, 600)
	var lastAttempt time.Time
	for i := 0; i < 200; i++ {
		st := mustRound(t, w)
		if st.Retried+st.Failed > 0 {
			lastAttempt = f.clock.Now()
		}
		if st.Failed == 1 {
			break
		}
		f.clock.Add(10 * time.Minute)
	}
	ds, err := f.d.AlertDeliveries(context.Background(), f.org.ID, db.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatal(err, ds)
	}
	d := ds[0]
	if d.Status != app.DeliveryFailed {
		t.Fatalf("delivery %s after %s, want failed", d.Status, f.clock.Now().Sub(start))
	}
	if span := lastAttempt.Sub(start); span < 24*time.Hour {
		t.Errorf("gave up %s after the alert, want at least a day of retries", span)
	}
	if d.Attempts < 20 || d.Attempts != len(rcv.received()) {
		t.Errorf("%d attempts, hookReceiver saw %d", d.Attempts, len(rcv.received()))
	}
	if d.LastStatusCode != 503 || !strings.Contains(d.LastError, "503") {
		t.Errorf("last status %d error %q", d.LastStatusCode, d.LastError)
	}

	// The hookReceiver is back; an admin re-sends: same message id, delivered once.
	rcv.fail.Store(0)
	if _, err := f.d.ResendAlertDelivery(context.Background(), f.org.ID, d.ID, w.RetryFor); err != nil {
		t.Fatal(err)
	}
	if st := mustRound(t, w); st.Sent != 1 {
		t.Fatalf("round after re-send: %+v", st)
	}
	got := rcv.received()
	if last := got[len(got)-1]; last.status != http.StatusNoContent || last.id != got[0].id {
		t.Errorf("re-sent request: status %d id %s, want 204 and %s", last.status, last.id, got[0].id)
	}
}

// TestWorkerCrashBetweenCommitAndSend: a worker claims a delivery and dies before sending (or
// while sending). Nobody sends it while its lease holds; after the lease another worker sends it,
// once.
func TestWorkerCrashBetweenCommitAndSend(t *testing.T) {
	f := newFixture(t)
	rcv := newHookReceiver(t, f.clock.Now)
	hook := f.channel(t, app.AlertChannel{Name: "hook", Kind: app.ChannelWebhook, URL: rcv.URL})
	rcv.secrets.Store(&hook.Secrets)
	f.spend(t, 950)

	// The dying worker fans out and claims, and never gets to send.
	dead := &notify.Worker{DB: f.d}
	if _, err := f.d.FanOutAlerts(context.Background(), dead.Render, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	claimed, err := f.d.ClaimAlertDeliveries(context.Background(), notify.DefaultLease, 10, "")
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}

	survivor := &notify.Worker{DB: f.d}
	if st := mustRound(t, survivor); st != (notify.Stats{}) {
		t.Fatalf("the survivor took a delivery still leased: %+v", st)
	}
	f.clock.Add(notify.DefaultLease)
	if st := mustRound(t, survivor); st != (notify.Stats{Sent: 1}) {
		t.Fatalf("after the lease: %+v, want one sent", st)
	}
	if st := mustRound(t, survivor); st != (notify.Stats{}) {
		t.Fatalf("a later round: %+v, want nothing", st)
	}
	if got := rcv.received(); len(got) != 1 || got[0].status != http.StatusNoContent {
		t.Fatalf("hookReceiver got %+v, want one accepted message", got)
	}
}

func TestWorkerSendTest(t *testing.T) {
	f := newFixture(t)
	rcv := newHookReceiver(t, f.clock.Now)
	hook := f.channel(t, app.AlertChannel{Name: "hook", Kind: app.ChannelWebhook, URL: rcv.URL})
	rcv.secrets.Store(&hook.Secrets)
	w := &notify.Worker{DB: f.d}

	t.Run("OK", func(t *testing.T) {
		d, err := w.SendTest(context.Background(), f.org.ID, hook.ID)
		if err != nil || d.Status != app.DeliverySent || d.Attempts != 1 {
			t.Fatalf("test send: %+v %v", d, err)
		}
		got := rcv.received()
		if len(got) != 1 || !strings.Contains(string(got[0].body), `"type":"alert.test"`) {
			t.Fatalf("hookReceiver got %+v", got)
		}
	})
	t.Run("FailsOnceNoRetry", func(t *testing.T) {
		rcv.fail.Store(5)
		d, err := w.SendTest(context.Background(), f.org.ID, hook.ID)
		if err != nil || d.Status != app.DeliveryFailed || d.LastStatusCode != 503 {
			t.Fatalf("failing test send: %+v %v", d, err)
		}
		f.clock.Add(time.Hour)
		if st := mustRound(t, w); st != (notify.Stats{}) {
			t.Errorf("a failed test send was retried: %+v", st)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := w.SendTest(context.Background(), "", hook.ID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("the org's channel from the operator scope: %v", err)
		}
	})
	t.Run("SMTPNotConfigured", func(t *testing.T) {
		mailCh := f.channel(t, app.AlertChannel{Name: "mail", Kind: app.ChannelEmail, Emails: []string{"a@b.example"}})
		d, err := w.SendTest(context.Background(), f.org.ID, mailCh.ID)
		if err != nil || d.Status != app.DeliveryFailed || !strings.Contains(d.LastError, "SMTP is not configured") {
			t.Fatalf("email test without SMTP: %+v %v", d, err)
		}
	})
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0.5, 30 * time.Second},
		{2, 0.5, time.Minute},
		{3, 0.5, 2 * time.Minute},
		{8, 0.5, time.Hour},
		{40, 0.5, time.Hour},
		{1, 0, 24 * time.Second},
		{1, 0.999999, 36 * time.Second},
	} {
		got := notify.Backoff(notify.DefaultFirstRetry, tc.attempt, tc.jitter)
		if diff := got - tc.want; diff > time.Millisecond || diff < -time.Millisecond {
			t.Errorf("Backoff(%d, %v) = %s, want %s", tc.attempt, tc.jitter, got, tc.want)
		}
	}
}

func TestRenderProviderAction(t *testing.T) {
	ev := app.AlertEvent{ID: "e1", Kind: app.AlertProviderAction, Provider: "zhipu", Model: "glm-4.6", Code: "1113",
		Message: "余额不足或无可用资源包,请充值。", ResetAt: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC),
		Node: app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}, CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	subject, text := notify.RenderEmail(ev, "")
	for _, want := range []string{"zhipu", "glm-4.6", "1113", "余额不足", "2026-12-07T12:00:00Z", "DELETE /admin/v1/cooldowns/zhipu/glm-4.6"} {
		if !strings.Contains(text, want) {
			t.Errorf("email lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(subject, "要対応") || !strings.Contains(subject, "Action needed") {
		t.Errorf("subject %q", subject)
	}
	body, err := notify.WebhookPayload(ev, "")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type string
		Data struct{ Provider, Model, Class, Code, ResetAt string } `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "provider.manual_action" || p.Data.Provider != "zhipu" || p.Data.Class != "manual_action" || p.Data.Code != "1113" {
		t.Errorf("payload %s", body)
	}
}
