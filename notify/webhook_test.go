package notify_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"yosan/notify"
)

// The Standard Webhooks reference test vector.
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = 1614265330
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSign(t *testing.T) {
	for _, tc := range []struct {
		name, secret, want string
		wantErr            bool
	}{
		{"OK", vecSecret, vecSig, false},
		{"OKWithoutPrefix", strings.TrimPrefix(vecSecret, "whsec_"), vecSig, false},
		{"ErrNotBase64", "whsec_not*base64!", "", true},
		{"ErrEmpty", "whsec_", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := notify.Sign(tc.secret, vecID, time.Unix(vecTS, 0), []byte(vecBody))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Sign(%q) = %q, want an error", tc.secret, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Sign(%q) = %q, %v; want %q", tc.secret, got, err, tc.want)
			}
		})
	}
}

func TestNewWebhookSecret(t *testing.T) {
	a, err := notify.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := notify.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two secrets are equal: %q", a)
	}
	rest, ok := strings.CutPrefix(a, "whsec_")
	if !ok {
		t.Fatalf("secret %q lacks the whsec_ prefix", a)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) != 24 {
		t.Fatalf("secret %q decodes to %d bytes (%v), want 24", a, len(key), err)
	}
	if _, err := notify.Sign(a, "msg_1", time.Now(), []byte("{}")); err != nil {
		t.Fatalf("Sign with a new secret: %v", err)
	}
}

func TestSignatureHeader(t *testing.T) {
	t.Run("OKRotation", func(t *testing.T) {
		other := mustSecret(t)
		h, err := notify.SignatureHeader([]string{other, vecSecret}, vecID, time.Unix(vecTS, 0), []byte(vecBody))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(h, " ")
		if len(parts) != 2 || parts[1] != vecSig || !strings.HasPrefix(parts[0], "v1,") {
			t.Fatalf("header = %q, want two v1 signatures ending with %q", h, vecSig)
		}
	})
	t.Run("ErrNoSecret", func(t *testing.T) {
		if h, err := notify.SignatureHeader(nil, vecID, time.Unix(vecTS, 0), []byte(vecBody)); err == nil {
			t.Fatalf("header = %q, want an error", h)
		}
	})
	t.Run("ErrBadSecret", func(t *testing.T) {
		if h, err := notify.SignatureHeader([]string{vecSecret, "whsec_%%%"}, vecID, time.Unix(vecTS, 0), []byte(vecBody)); err == nil {
			t.Fatalf("header = %q, want an error", h)
		}
	})
}

func mustSecret(tb testing.TB) string {
	tb.Helper()
	s, err := notify.NewWebhookSecret()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// signedHeaders returns the headers a sender sets for body.
func signedHeaders(tb testing.TB, secrets []string, id string, ts time.Time, body string) http.Header {
	tb.Helper()
	sig, err := notify.SignatureHeader(secrets, id, ts, []byte(body))
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVerify(t *testing.T) {
	ts := time.Unix(vecTS, 0)
	tol := notify.DefaultWebhookTolerance
	oldSecret, newSecret := mustSecret(t), mustSecret(t)
	without := func(name string) http.Header {
		h := signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody)
		h.Del(name)
		return h
	}
	withHeader := func(name, value string) http.Header {
		h := signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody)
		h.Set(name, value)
		return h
	}
	for _, tc := range []struct {
		name    string
		secrets []string
		header  http.Header
		body    string
		now     time.Time
		want    error
	}{
		{"OK", []string{vecSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts, nil},
		{"OKReferenceHeader", []string{vecSecret}, withHeader("webhook-signature", vecSig), vecBody, ts, nil},
		// The sender signs with both secrets of a rotation; a receiver that still knows only the
		// old one, or already only the new one, accepts.
		{"OKRotationReceiverOld", []string{oldSecret}, signedHeaders(t, []string{newSecret, oldSecret}, vecID, ts, vecBody), vecBody, ts, nil},
		{"OKRotationReceiverNew", []string{newSecret}, signedHeaders(t, []string{newSecret, oldSecret}, vecID, ts, vecBody), vecBody, ts, nil},
		{"OKReceiverKnowsBoth", []string{newSecret, oldSecret}, signedHeaders(t, []string{oldSecret}, vecID, ts, vecBody), vecBody, ts, nil},
		{"OKOtherVersionsIgnored", []string{vecSecret}, withHeader("webhook-signature", "v1a,AAAA v2,xyz "+vecSig), vecBody, ts, nil},
		{"OKEdgeOfTolerance", []string{vecSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts.Add(tol), nil},
		{"ErrTamperedBody", []string{vecSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), `{"test": 2432232315}`, ts, notify.ErrNoMatchingSignature},
		{"ErrTamperedID", []string{vecSecret}, withHeader("webhook-id", "msg_other"), vecBody, ts, notify.ErrNoMatchingSignature},
		{"ErrWrongSecret", []string{oldSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts, notify.ErrNoMatchingSignature},
		{"ErrNoSecrets", nil, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts, notify.ErrNoMatchingSignature},
		{"ErrGarbageSignature", []string{vecSecret}, withHeader("webhook-signature", "v1,!!! nonsense"), vecBody, ts, notify.ErrNoMatchingSignature},
		{"ErrTooOld", []string{vecSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts.Add(tol + time.Second), notify.ErrTimestampTooOld},
		{"ErrTooNew", []string{vecSecret}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), vecBody, ts.Add(-tol - time.Second), notify.ErrTimestampTooNew},
		{"ErrBadTimestamp", []string{vecSecret}, withHeader("webhook-timestamp", "2021-02-26T00:00:00Z"), vecBody, ts, notify.ErrBadTimestamp},
		{"ErrMissingID", []string{vecSecret}, without("webhook-id"), vecBody, ts, notify.ErrMissingHeader},
		{"ErrMissingTimestamp", []string{vecSecret}, without("webhook-timestamp"), vecBody, ts, notify.ErrMissingHeader},
		{"ErrMissingSignature", []string{vecSecret}, without("webhook-signature"), vecBody, ts, notify.ErrMissingHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := notify.Verify(tc.secrets, tc.header, []byte(tc.body), tc.now, tol)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("ErrMalformedReceiverSecret", func(t *testing.T) {
		err := notify.Verify([]string{"whsec_***"}, signedHeaders(t, []string{vecSecret}, vecID, ts, vecBody), []byte(vecBody), ts, tol)
		if err == nil || errors.Is(err, notify.ErrNoMatchingSignature) {
			t.Fatalf("Verify = %v, want an error about the secret", err)
		}
	})
}

// receiver is a webhook endpoint that checks each request the way a customer's would.
type receiver struct {
	t       *testing.T
	secrets []string
	now     time.Time
	got     chan http.Header
	status  int
	answer  string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rc.t.Errorf("receiver: read body: %v", err)
	}
	if err := notify.Verify(rc.secrets, r.Header, body, rc.now, notify.DefaultWebhookTolerance); err != nil {
		rc.t.Errorf("receiver: %v", err)
	}
	if string(body) != vecBody {
		rc.t.Errorf("receiver: body = %q, want %q", body, vecBody)
	}
	rc.got <- r.Header.Clone()
	w.WriteHeader(rc.status)
	io.WriteString(w, rc.answer)
}

func TestWebhookSenderSend(t *testing.T) {
	ts := time.Unix(vecTS, 0)
	secrets := []string{mustSecret(t), vecSecret}
	send := func(ctx context.Context, s *notify.WebhookSender, url string) (int, error) {
		return s.Send(ctx, url, vecID, secrets, ts, []byte(vecBody))
	}
	start := func(t *testing.T, status int, answer string) (*httptest.Server, *receiver) {
		rc := &receiver{t: t, secrets: []string{vecSecret}, now: ts.Add(time.Second), got: make(chan http.Header, 1), status: status, answer: answer}
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		return srv, rc
	}

	t.Run("OK", func(t *testing.T) {
		srv, rc := start(t, http.StatusNoContent, "")
		status, err := send(context.Background(), &notify.WebhookSender{}, srv.URL+"/hook")
		if err != nil || status != http.StatusNoContent {
			t.Fatalf("Send = %d, %v; want 204, nil", status, err)
		}
		h := <-rc.got
		for k, want := range map[string]string{
			"Content-Type":      "application/json",
			"User-Agent":        notify.DefaultWebhookUserAgent,
			"Webhook-Id":        vecID,
			"Webhook-Timestamp": strconv.Itoa(vecTS),
		} {
			if got := h.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		if sig := h.Get("webhook-signature"); !strings.HasSuffix(sig, " "+vecSig) {
			t.Errorf("webhook-signature = %q, want two signatures ending with the reference one", sig)
		}
	})

	t.Run("OKCustomClientAndUserAgent", func(t *testing.T) {
		srv, rc := start(t, http.StatusOK, `{"ok":true}`)
		s := &notify.WebhookSender{Client: srv.Client(), UserAgent: "Test/2"}
		if status, err := send(context.Background(), s, srv.URL); err != nil || status != http.StatusOK {
			t.Fatalf("Send = %d, %v; want 200, nil", status, err)
		}
		if ua := (<-rc.got).Get("User-Agent"); ua != "Test/2" {
			t.Errorf("User-Agent = %q, want Test/2", ua)
		}
	})

	t.Run("Err500", func(t *testing.T) {
		answer := "database\r\nis down\n" + strings.Repeat("x", 100_000)
		srv, _ := start(t, http.StatusInternalServerError, answer)
		status, err := send(context.Background(), &notify.WebhookSender{}, srv.URL)
		if status != http.StatusInternalServerError || err == nil {
			t.Fatalf("Send = %d, %v; want 500 and an error", status, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "500") || !strings.Contains(msg, "database is down xxx") {
			t.Errorf("error %q lacks the status or the start of the body", msg)
		}
		if strings.ContainsAny(msg, "\r\n") || len(msg) > 300 {
			t.Errorf("error is not one short line (%d bytes): %q", len(msg), msg)
		}
	})

	t.Run("ErrRedirect", func(t *testing.T) {
		followed := make(chan struct{}, 1)
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed <- struct{}{} }))
		t.Cleanup(target.Close)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		status, err := send(context.Background(), &notify.WebhookSender{Client: &http.Client{}}, srv.URL)
		if status != http.StatusFound || err == nil || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), "/elsewhere") {
			t.Fatalf("Send = %d, %v; want 302 and an error naming the redirect", status, err)
		}
		select {
		case <-followed:
			t.Fatal("the redirect was followed")
		default:
		}
	})

	t.Run("ErrConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		status, err := send(context.Background(), &notify.WebhookSender{}, "http://"+addr+"/hook")
		if status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Send = %d, %v; want 0 and connection refused", status, err)
		}
	})

	t.Run("ErrContextTimeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		status, err := send(ctx, &notify.WebhookSender{}, srv.URL)
		if status != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send = %d, %v; want 0 and context.DeadlineExceeded", status, err)
		}
	})

	t.Run("ErrNoSecret", func(t *testing.T) {
		srv, _ := start(t, http.StatusOK, "")
		if status, err := (&notify.WebhookSender{}).Send(context.Background(), srv.URL, vecID, nil, ts, []byte(vecBody)); err == nil {
			t.Fatalf("Send = %d, nil; want an error", status)
		}
	})
}
