package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func durs(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	// 1..100 ms: the p-th percentile by nearest rank is p ms.
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{durs(7), 50, 7 * time.Millisecond},
		{durs(7), 99, 7 * time.Millisecond},
		{durs(1, 2), 50, 1 * time.Millisecond},
		{durs(1, 2), 51, 2 * time.Millisecond},
		{durs(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{durs(1, 2, 3, 4), 75, 3 * time.Millisecond},
		{durs(1, 2, 3, 4), 76, 4 * time.Millisecond},
		{hundred, 50, 50 * time.Millisecond},
		{hundred, 90, 90 * time.Millisecond},
		{hundred, 99, 99 * time.Millisecond},
		{hundred, 99.9, 100 * time.Millisecond},
		{hundred, 100, 100 * time.Millisecond},
		{hundred, 0, 1 * time.Millisecond},
	}
	for _, c := range cases {
		if got := percentile(c.in, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	var samples []sample
	// 90 fast successes (1..90 ms, shuffled order), 8 slow 402s, 2 connection errors.
	for i := 90; i >= 1; i-- {
		samples = append(samples, sample{code: 200, latency: time.Duration(i) * time.Millisecond})
	}
	for i := 0; i < 8; i++ {
		samples = append(samples, sample{code: 402, latency: 500 * time.Millisecond, err: "402 Payment Required"})
	}
	samples = append(samples,
		sample{code: 0, latency: 1000 * time.Millisecond, err: "connection refused"},
		sample{code: 0, latency: 1000 * time.Millisecond, err: "connection refused"},
	)
	s := summarize(samples, 2*time.Second)

	if s.Requests != 100 || s.Success != 90 {
		t.Fatalf("requests/success = %d/%d, want 100/90", s.Requests, s.Success)
	}
	if s.RPS != 50 || s.OKRPS != 45 {
		t.Errorf("rps/ok_rps = %v/%v, want 50/45", s.RPS, s.OKRPS)
	}
	wantCodes := map[string]int{"200": 90, "402": 8, "error": 2}
	for k, v := range wantCodes {
		if s.Codes[k] != v {
			t.Errorf("codes[%s] = %d, want %d (all: %v)", k, s.Codes[k], v, s.Codes)
		}
	}
	if s.Errors["connection refused"] != 2 || s.Errors["402 Payment Required"] != 8 {
		t.Errorf("errors = %v", s.Errors)
	}
	// All 100: sorted = 1..90, 500 x8, 1000 x2.
	if s.Latency.P50 != 50 || s.Latency.P90 != 90 || s.Latency.P99 != 1000 || s.Latency.Max != 1000 {
		t.Errorf("latency(all) = %+v", s.Latency)
	}
	// 2xx only: 1..90 -> p50 = 45, p90 = 81, p99 = 90, mean 45.5.
	if s.LatencyOK.Count != 90 || s.LatencyOK.P50 != 45 || s.LatencyOK.P90 != 81 ||
		s.LatencyOK.P99 != 90 || s.LatencyOK.Max != 90 || s.LatencyOK.Mean != 45.5 {
		t.Errorf("latency(ok) = %+v", s.LatencyOK)
	}

	var buf bytes.Buffer
	s.Mode, s.Rate = "rate", 50
	s.Print(&buf)
	out := buf.String()
	for _, want := range []string{"constant rate 50/s", "requests 100", "200=90 402=8 error=2", "p99 1000.00ms", "latency (2xx)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary text lacks %q:\n%s", want, out)
		}
	}
	// The JSON form round-trips.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil || back.LatencyOK != s.LatencyOK || back.Success != 90 {
		t.Errorf("json round trip: %v %+v", err, back)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := summarize(nil, 0)
	if s.Requests != 0 || s.RPS != 0 || s.Latency.Count != 0 {
		t.Errorf("empty summary = %+v", s)
	}
	var buf bytes.Buffer
	s.Print(&buf) // must not panic
}

func TestErrorKindsBounded(t *testing.T) {
	var samples []sample
	for i := 0; i < 50; i++ {
		samples = append(samples, sample{code: 0, err: strings.Repeat("x", i+1)})
	}
	s := summarize(samples, time.Second)
	if len(s.Errors) > maxErrorKinds+1 || s.Errors["(other)"] != 50-maxErrorKinds {
		t.Errorf("errors not bounded: %d kinds, other=%d", len(s.Errors), s.Errors["(other)"])
	}
}

func TestCompare(t *testing.T) {
	base := Summary{Label: "direct", OKRPS: 1000, LatencyOK: Latency{Count: 10, P50: 1, P99: 5}}
	gw := Summary{Label: "gateway rate", OKRPS: 990, LatencyOK: Latency{Count: 10, P50: 1.5, P99: 9}}
	var buf bytes.Buffer
	compare(&buf, base, gw)
	if !strings.Contains(buf.String(), "p50    +0.50ms") || !strings.Contains(buf.String(), "p99    +4.00ms") {
		t.Errorf("compare output: %q", buf.String())
	}
	buf.Reset()
	compare(&buf, base, Summary{Label: "x"})
	if !strings.Contains(buf.String(), "cannot compare") {
		t.Errorf("compare with no successes: %q", buf.String())
	}
}

func TestCheckLoopback(t *testing.T) {
	ok := []string{
		"http://127.0.0.1:8080/v1/chat/completions",
		"http://localhost:9099/",
		"http://127.9.9.9/",
		"http://[::1]:8080/x",
		"https://LOCALHOST/",
	}
	bad := []string{
		"http://10.0.0.1/",
		"http://192.168.1.1:8080/",
		"http://example.com/",
		"http://0.0.0.0:8080/",
		"ftp://127.0.0.1/",
		"127.0.0.1:8080",
		"http://127.0.0.1.nip.io/",
	}
	for _, u := range ok {
		if _, err := checkLoopback(u); err != nil {
			t.Errorf("checkLoopback(%q) = %v, want ok", u, err)
		}
	}
	for _, u := range bad {
		if _, err := checkLoopback(u); err == nil {
			t.Errorf("checkLoopback(%q) accepted a non-loopback target", u)
		}
	}
}

// Both modes against a local test server: counts add up and statuses are recorded.
func TestRunModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	c := config{url: srv.URL, key: "k", rate: 200, workers: 4, duration: 300 * time.Millisecond,
		timeout: 5 * time.Second, body: defaultBody, mode: "rate"}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	s := runRate(t.Context(), c)
	if s.Requests < 40 || s.Success != s.Requests {
		t.Errorf("rate mode: %d requests, %d ok (codes %v)", s.Requests, s.Success, s.Codes)
	}
	c.mode = "closed"
	s = runClosed(t.Context(), c)
	if s.Requests == 0 || s.Success != s.Requests || s.Workers != 0 {
		t.Errorf("closed mode: %d requests, %d ok (codes %v)", s.Requests, s.Success, s.Codes)
	}
	c.key = "wrong"
	s = runClosed(t.Context(), c)
	if s.Codes["401"] != s.Requests || s.Success != 0 {
		t.Errorf("closed mode, bad key: codes %v", s.Codes)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	table(&buf, []Summary{
		{Label: "direct rate", RPS: 1000, OKRPS: 1000, Requests: 10000, Success: 10000, LatencyOK: Latency{P50: 0.5, P90: 0.9, P99: 2, Max: 10}},
		{Mode: "closed", Requests: 5, Success: 4},
	})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "direct rate") || !strings.Contains(lines[1], "10000") ||
		!strings.HasPrefix(lines[2], "closed") {
		t.Errorf("table:\n%s", buf.String())
	}
}
