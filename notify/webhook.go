package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Standard Webhooks header names (https://www.standardwebhooks.com).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// secretPrefix marks a webhook signing secret; the rest is the base64 of the HMAC key.
const secretPrefix = "whsec_"

// DefaultWebhookUserAgent is the User-Agent of webhook requests when WebhookSender has none.
const DefaultWebhookUserAgent = "Yosan-Webhooks/1"

// DefaultWebhookTimeout bounds one webhook request when WebhookSender has no Client of its own;
// the caller's ctx can only shorten it.
const DefaultWebhookTimeout = 30 * time.Second

// DefaultWebhookTolerance is how far a webhook-timestamp may be from the receiver's clock, in
// either direction, before Verify rejects it (the Standard Webhooks recommendation).
const DefaultWebhookTolerance = 5 * time.Minute

const (
	// maxResponseRead is how much of a receiver's answer is read (the rest is discarded with
	// the connection).
	maxResponseRead = 64 << 10
	// maxErrorSnippet is how much of a receiver's answer goes into an error message.
	maxErrorSnippet = 200
)

// VerifyError is a reason Verify rejects a webhook. The values are constants, so a receiver
// tests for one with errors.Is.
type VerifyError string

// Error implements error.
func (e VerifyError) Error() string { return string(e) }

// Reasons Verify rejects a webhook.
const (
	ErrMissingHeader       VerifyError = "missing webhook header"
	ErrBadTimestamp        VerifyError = "malformed webhook-timestamp"
	ErrTimestampTooOld     VerifyError = "webhook-timestamp is too old"
	ErrTimestampTooNew     VerifyError = "webhook-timestamp is too far in the future"
	ErrNoMatchingSignature VerifyError = "no matching webhook signature"
)

// NewWebhookSecret returns a new signing secret: "whsec_" and the base64 of 24 random bytes.
// It returns an error only when the system's random source fails.
func NewWebhookSecret() (string, error) {
	var key [24]byte
	if _, err := rand.Read(key[:]); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(key[:]), nil
}

// secretKey decodes a "whsec_..." secret into its HMAC key. A secret without the prefix is taken
// as bare base64, as the Standard Webhooks libraries do.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return nil, fmt.Errorf("decode webhook secret: %w", err)
	}
	if len(key) == 0 {
		return nil, errors.New("decode webhook secret: the secret is empty")
	}
	return key, nil
}

// mac returns HMAC-SHA256(key, id "." unix seconds "." body).
func mac(key []byte, msgID string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msgID))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the Standard Webhooks signature of one message: "v1," and the base64 of
// HMAC-SHA256 over msgID, the Unix seconds of ts and the raw body, joined by dots. It returns an
// error when secret is not valid base64 (after the "whsec_" prefix) or is empty.
func Sign(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", fmt.Errorf("sign webhook: %w", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, ts.Unix(), body)), nil
}

// SignatureHeader returns the webhook-signature header value: one "v1,..." signature per
// secret, space-separated, so a receiver that still knows only the previous secret of a rotation
// accepts the message. It returns an error when there is no secret or one is malformed.
func SignatureHeader(secrets []string, msgID string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("sign webhook: no signing secret")
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, msgID, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Verify checks a received webhook the way a receiver should: the webhook-id,
// webhook-timestamp and webhook-signature headers must be present, the timestamp within
// tolerance of now (either direction, against replays), and any v1 signature of the header must
// match the body under any of secrets (compared in constant time). It returns an error wrapping
// ErrMissingHeader, ErrBadTimestamp, ErrTimestampTooOld, ErrTimestampTooNew or
// ErrNoMatchingSignature, or a plain error when one of secrets is malformed.
func Verify(secrets []string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	for _, hv := range []struct{ name, value string }{
		{HeaderWebhookID, id}, {HeaderWebhookTimestamp, tsText}, {HeaderWebhookSignature, sigs},
	} {
		if hv.value == "" {
			return fmt.Errorf("verify webhook: %w %s", ErrMissingHeader, hv.name)
		}
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("verify webhook: %w %q: want Unix seconds", ErrBadTimestamp, tsText)
	}
	sent := time.Unix(ts, 0)
	if age := now.Sub(sent); age > tolerance {
		return fmt.Errorf("verify webhook: %w: %s behind the receiver's clock (tolerance %s)", ErrTimestampTooOld, age.Truncate(time.Second), tolerance)
	} else if -age > tolerance {
		return fmt.Errorf("verify webhook: %w: %s ahead of the receiver's clock (tolerance %s)", ErrTimestampTooNew, (-age).Truncate(time.Second), tolerance)
	}
	var given [][]byte
	for _, f := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(f, ",")
		if !ok || version != "v1" {
			continue // another scheme (e.g. v1a); not ours to check
		}
		if b, err := base64.StdEncoding.DecodeString(sig); err == nil {
			given = append(given, b)
		}
	}
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return fmt.Errorf("verify webhook: %w", err)
		}
		want := mac(key, id, ts, body)
		for _, g := range given {
			if hmac.Equal(g, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("verify webhook: %w", ErrNoMatchingSignature)
}

// WebhookSender posts signed webhooks.
type WebhookSender struct {
	// Client sends the requests; nil means a client with DefaultWebhookTimeout. Redirects are
	// never followed, whatever the client's CheckRedirect says.
	Client *http.Client
	// UserAgent defaults to DefaultWebhookUserAgent.
	UserAgent string
}

// Send posts body (JSON) to url, signed with every secret for message msgID at time ts. A
// retry must pass the same msgID (receivers deduplicate on it) and the time of the attempt.
// It returns the response status and nil for any 2xx; the status and an error quoting the
// start of the response body for any other status (a 3xx is a failure: redirects are not
// followed); and status 0 with the wrapped cause when the request could not be made or ctx
// ended first.
func (s *WebhookSender) Send(ctx context.Context, url, msgID string, secrets []string, ts time.Time, body []byte) (status int, err error) {
	sig, err := SignatureHeader(secrets, msgID, ts, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("post webhook: %w", err)
	}
	ua := s.UserAgent
	if ua == "" {
		ua = DefaultWebhookUserAgent
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", ua)
	req.Header.Set(HeaderWebhookID, msgID)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderWebhookSignature, sig)

	var client http.Client
	if s.Client != nil {
		client = *s.Client
	} else {
		client.Timeout = DefaultWebhookTimeout
	}
	// A redirect could carry the signed payload to a host the org never configured.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post webhook: %w", err)
	}
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("post webhook: endpoint answered %s (redirect to %q, which is not followed: configure the final URL)",
			resp.Status, snippet([]byte(resp.Header.Get("Location"))))
	}
	msg := fmt.Sprintf("post webhook: endpoint answered %s", resp.Status)
	if sn := snippet(answer); sn != "" {
		msg += ": " + sn
	} else if readErr != nil {
		msg += fmt.Sprintf(" (reading the body: %v)", readErr)
	}
	return resp.StatusCode, errors.New(msg)
}

// snippet returns the start of a receiver's answer as one line of at most maxErrorSnippet
// bytes, for an error message that ends up in logs and the admin console.
func snippet(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(s) <= maxErrorSnippet {
		return s
	}
	cut := maxErrorSnippet
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
