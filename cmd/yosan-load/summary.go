package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sample is one completed request: its HTTP status (0 when the request failed before a
// response, e.g. a connection error or timeout), its latency and, for failures, a short reason.
type sample struct {
	code    int
	latency time.Duration
	err     string
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary is what one load run reports (and what -json prints).
type Summary struct {
	Label      string         `json:"label,omitempty"`
	Mode       string         `json:"mode"`
	URL        string         `json:"url"`
	Rate       int            `json:"rate,omitempty"`
	Workers    int            `json:"workers,omitempty"`
	Duration   float64        `json:"duration_s"` // wall time from the first request to the last response
	Requests   int            `json:"requests"`
	Success    int            `json:"success"` // 2xx responses
	RPS        float64        `json:"rps"`     // completed requests per second
	OKRPS      float64        `json:"ok_rps"`  // 2xx responses per second
	Codes      map[string]int `json:"codes"`   // status code -> count; "error" for no response
	Errors     map[string]int `json:"errors,omitempty"`
	Latency    Latency        `json:"latency"`    // all completed requests
	LatencyOK  Latency        `json:"latency_ok"` // 2xx only
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the nearest-rank method:
// the smallest value such that at least p% of the values are <= it. Empty input gives 0.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	// rank = ceil(p/100 * n), computed in integers to avoid float error (p has at most 3 decimals).
	rank := int((int64(p*1000)*int64(n) + 100_000 - 1) / 100_000)
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyOf summarises a set of latencies; it sorts its argument in place.
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{
		Count: len(ds),
		Mean:  ms(sum / time.Duration(len(ds))),
		P50:   ms(percentile(ds, 50)),
		P90:   ms(percentile(ds, 90)),
		P99:   ms(percentile(ds, 99)),
		Max:   ms(ds[len(ds)-1]),
	}
}

const maxErrorKinds = 10

// summarize builds a Summary from the samples of a run that took elapsed wall time.
func summarize(samples []sample, elapsed time.Duration) Summary {
	s := Summary{Codes: map[string]int{}, Requests: len(samples)}
	all := make([]time.Duration, 0, len(samples))
	ok := make([]time.Duration, 0, len(samples))
	for _, r := range samples {
		all = append(all, r.latency)
		if r.code == 0 {
			s.Codes["error"]++
		} else {
			s.Codes[strconv.Itoa(r.code)]++
		}
		if r.code >= 200 && r.code < 300 {
			s.Success++
			ok = append(ok, r.latency)
		} else if r.err != "" {
			if s.Errors == nil {
				s.Errors = map[string]int{}
			}
			if _, seen := s.Errors[r.err]; seen || len(s.Errors) < maxErrorKinds {
				s.Errors[r.err]++
			} else {
				s.Errors["(other)"]++
			}
		}
	}
	s.Latency = latencyOf(all)
	s.LatencyOK = latencyOf(ok)
	s.Duration = elapsed.Seconds()
	if elapsed > 0 {
		s.RPS = float64(s.Requests) / elapsed.Seconds()
		s.OKRPS = float64(s.Success) / elapsed.Seconds()
	}
	return s
}

// Print writes the human-readable summary.
func (s Summary) Print(w io.Writer) {
	title := s.Mode
	if s.Mode == "rate" {
		title = fmt.Sprintf("constant rate %d/s", s.Rate)
	} else if s.Mode == "closed" {
		title = fmt.Sprintf("closed loop, %d workers", s.Workers)
	}
	if s.Label != "" {
		title = s.Label + ": " + title
	}
	fmt.Fprintf(w, "== %s -> %s\n", title, s.URL)
	fmt.Fprintf(w, "   requests %d in %.2fs = %.1f req/s; success (2xx) %d = %.1f/s (%.2f%%)\n",
		s.Requests, s.Duration, s.RPS, s.Success, s.OKRPS, pct(s.Success, s.Requests))
	fmt.Fprintf(w, "   status codes: %s\n", formatCodes(s.Codes))
	fmt.Fprintf(w, "   latency (all): %s\n", s.Latency)
	if s.LatencyOK.Count != s.Latency.Count {
		fmt.Fprintf(w, "   latency (2xx): %s\n", s.LatencyOK)
	}
	if len(s.Errors) > 0 {
		keys := make([]string, 0, len(s.Errors))
		for k := range s.Errors {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return s.Errors[keys[i]] > s.Errors[keys[j]] })
		fmt.Fprintf(w, "   errors:\n")
		for _, k := range keys {
			fmt.Fprintf(w, "     %6d  %s\n", s.Errors[k], k)
		}
	}
}

func (l Latency) String() string {
	if l.Count == 0 {
		return "n/a"
	}
	return fmt.Sprintf("p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms  mean %.2fms",
		l.P50, l.P90, l.P99, l.Max, l.Mean)
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func formatCodes(codes map[string]int) string {
	if len(codes) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, codes[k]))
	}
	return strings.Join(parts, " ")
}

// compare prints, for a baseline run (direct to the upstream) and a run through the gateway,
// the latency the gateway adds (gateway minus direct) at p50 and p99, using 2xx latencies.
func compare(w io.Writer, base, gw Summary) {
	b, g := base.LatencyOK, gw.LatencyOK
	name := gw.Label
	if name == "" {
		name = gw.Mode
	}
	if b.Count == 0 || g.Count == 0 {
		fmt.Fprintf(w, "%s: cannot compare (no successful requests in one of the runs)\n", name)
		return
	}
	fmt.Fprintf(w, "%-28s p50 %+8.2fms  p99 %+8.2fms   (gateway %.2f/%.2f ms vs direct %.2f/%.2f ms; %.0f vs %.0f ok req/s)\n",
		name+" added latency:", g.P50-b.P50, g.P99-b.P99, g.P50, g.P99, b.P50, b.P99, gw.OKRPS, base.OKRPS)
}

// table prints several summaries as one aligned table (latencies of 2xx responses, in ms).
func table(w io.Writer, ss []Summary) {
	fmt.Fprintf(w, "%-24s %9s %9s %8s %8s %8s %8s %8s %8s\n",
		"run", "req/s", "ok/s", "requests", "ok", "p50", "p90", "p99", "max")
	for _, s := range ss {
		name := s.Label
		if name == "" {
			name = s.Mode
		}
		l := s.LatencyOK
		fmt.Fprintf(w, "%-24s %9.1f %9.1f %8d %8d %8.2f %8.2f %8.2f %8.2f\n",
			name, s.RPS, s.OKRPS, s.Requests, s.Success, l.P50, l.P90, l.P99, l.Max)
	}
}

// checkLoopback refuses any target that is not on this machine's loopback interface.
func checkLoopback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad -url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bad -url %q: scheme must be http or https", raw)
	}
	if !isLoopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("refusing non-loopback target %q: only localhost, 127.0.0.0/8 and [::1] are allowed", u.Host)
	}
	return u, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
