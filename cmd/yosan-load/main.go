// Command yosan-load is a small HTTP load generator for benchmarking the gateway on this
// machine. It only sends traffic to loopback addresses.
//
//	yosan-load -url http://127.0.0.1:18080/v1/chat/completions -key ysk-... -mode rate -rate 1000 -duration 10s
//	yosan-load -url ... -mode closed -workers 64 -duration 10s -json
//	yosan-load -compare direct.json,gateway.json
//
// Mode "rate" sends requests at a constant rate (open loop, with vegeta); mode "closed" runs N
// workers that each send the next request as soon as the previous one finished. Both print
// requests/s, status code counts and latency percentiles; -json prints the summary as JSON
// instead, -out also writes it to a file. -compare reads two such files (direct to the
// upstream, then through the gateway) and prints the latency the gateway adds.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const defaultBody = `{"model":"bench-model","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`

// Hard bounds so that a run always stops by itself.
const (
	maxDuration = 5 * time.Minute
	maxRate     = 50_000
	maxWorkers  = 4096
)

type config struct {
	url      string
	key      string
	mode     string
	rate     int
	duration time.Duration
	workers  int
	body     string
	timeout  time.Duration
	label    string
	jsonOut  bool
	outFile  string
	compare  string
	table    string
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "http://127.0.0.1:18080/v1/chat/completions", "target URL (loopback only)")
	flag.StringVar(&c.key, "key", "", "API key, sent as 'Authorization: Bearer KEY' (optional)")
	flag.StringVar(&c.mode, "mode", "rate", "rate (constant request rate) or closed (N workers back to back)")
	flag.IntVar(&c.rate, "rate", 1000, "requests per second (mode rate)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send requests (max 5m)")
	flag.IntVar(&c.workers, "workers", 64, "concurrent workers (mode closed)")
	flag.StringVar(&c.body, "body", defaultBody, "JSON request body (POST)")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Second, "per-request timeout")
	flag.StringVar(&c.label, "label", "", "name of this run in the output")
	flag.BoolVar(&c.jsonOut, "json", false, "print the summary as JSON instead of text")
	flag.StringVar(&c.outFile, "out", "", "also write the JSON summary to this file")
	flag.StringVar(&c.compare, "compare", "", "DIRECT.json,GATEWAY.json: print the latency the gateway adds, then exit")
	flag.StringVar(&c.table, "table", "", "A.json,B.json,...: print those summaries as one table, then exit")
	flag.Parse()

	if c.table != "" {
		if err := runTable(os.Stdout, c.table); err != nil {
			fatal(err)
		}
		return
	}
	if c.compare != "" {
		if err := runCompare(os.Stdout, c.compare); err != nil {
			fatal(err)
		}
		return
	}
	if err := c.validate(); err != nil {
		fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var s Summary
	switch c.mode {
	case "rate":
		s = runRate(ctx, c)
	case "closed":
		s = runClosed(ctx, c)
	}
	s.Label, s.Mode, s.URL = c.label, c.mode, c.url
	if c.mode == "rate" {
		s.Rate = c.rate
	} else {
		s.Workers = c.workers
	}

	if c.outFile != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(c.outFile, append(b, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
	if c.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	} else {
		s.Print(os.Stdout)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "yosan-load:", err)
	os.Exit(2)
}

func (c *config) validate() error {
	if _, err := checkLoopback(c.url); err != nil {
		return err
	}
	switch c.mode {
	case "rate":
		if c.rate <= 0 || c.rate > maxRate {
			return fmt.Errorf("-rate must be in 1..%d", maxRate)
		}
	case "closed":
		if c.workers <= 0 || c.workers > maxWorkers {
			return fmt.Errorf("-workers must be in 1..%d", maxWorkers)
		}
	default:
		return fmt.Errorf("-mode must be rate or closed, got %q", c.mode)
	}
	if c.duration <= 0 || c.duration > maxDuration {
		return fmt.Errorf("-duration must be in (0, %s]", maxDuration)
	}
	if c.timeout <= 0 || c.timeout > time.Minute {
		return fmt.Errorf("-timeout must be in (0, 1m]")
	}
	if !json.Valid([]byte(c.body)) {
		return errors.New("-body is not valid JSON")
	}
	return nil
}

// loopbackDialer refuses to connect anywhere but loopback, whatever a name resolves to.
func loopbackDialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   5 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("refusing to connect to non-loopback address %s", address)
			}
			return nil
		},
	}
}

func newClient(c config, conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // never through a proxy
		DialContext:         loopbackDialer().DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func headers(c config) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	return h
}

// shortErr trims an error message to something worth counting (no request-specific detail).
func shortErr(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.HasPrefix(s, "Post ") {
		s = s[i+2:]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// runRate sends requests at a constant rate with vegeta.
func runRate(ctx context.Context, c config) Summary {
	conns := c.rate
	if conns > 10_000 {
		conns = 10_000
	}
	atk := vegeta.NewAttacker(
		vegeta.Client(newClient(c, conns)),
		vegeta.KeepAlive(true),
		vegeta.Redirects(vegeta.NoFollow),
		vegeta.MaxBody(0),
		vegeta.Workers(64),
	)
	tgt := vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost, URL: c.url, Body: []byte(c.body), Header: headers(c),
	})
	pacer := vegeta.ConstantPacer{Freq: c.rate, Per: time.Second}

	go func() {
		<-ctx.Done()
		atk.Stop()
	}()

	samples := make([]sample, 0, int(float64(c.rate)*c.duration.Seconds())+16)
	start := time.Now()
	var end time.Time
	for r := range atk.Attack(tgt, pacer, c.duration, "yosan-load") {
		sm := sample{code: int(r.Code), latency: r.Latency}
		if sm.code < 200 || sm.code >= 300 {
			sm.err = shortErr(r.Error)
		}
		samples = append(samples, sm)
		if e := r.End(); e.After(end) {
			end = e
		}
	}
	if end.Before(start) {
		end = time.Now()
	}
	s := summarize(samples, end.Sub(start))
	s.StartedAt, s.FinishedAt = start, end
	return s
}

// runClosed runs c.workers workers, each sending its next request as soon as the previous one
// finished, until c.duration has passed (requests in flight then are allowed to finish).
func runClosed(ctx context.Context, c config) Summary {
	client := newClient(c, c.workers)
	hdr := headers(c)
	body := []byte(c.body)
	start := time.Now()
	deadline := start.Add(c.duration)

	results := make([][]sample, c.workers)
	var wg sync.WaitGroup
	for w := 0; w < c.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var out []sample
			for ctx.Err() == nil && time.Now().Before(deadline) {
				out = append(out, doOne(client, c.url, hdr, body))
			}
			results[w] = out
		}(w)
	}
	wg.Wait()
	end := time.Now()
	client.CloseIdleConnections()

	var all []sample
	for _, r := range results {
		all = append(all, r...)
	}
	s := summarize(all, end.Sub(start))
	s.StartedAt, s.FinishedAt = start, end
	return s
}

func doOne(client *http.Client, url string, hdr http.Header, body []byte) sample {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return sample{err: err.Error()}
	}
	req.Header = hdr.Clone()
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{latency: time.Since(t0), err: shortErr(err.Error())}
	}
	_, cerr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sm := sample{code: resp.StatusCode, latency: time.Since(t0)}
	switch {
	case cerr != nil:
		sm.code, sm.err = 0, "reading body: "+shortErr(cerr.Error())
	case sm.code < 200 || sm.code >= 300:
		sm.err = resp.Status
	}
	return sm
}

func readSummaries(arg string) ([]Summary, error) {
	var ss []Summary
	for _, p := range strings.Split(arg, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var s Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func runCompare(w io.Writer, arg string) error {
	ss, err := readSummaries(arg)
	if err != nil {
		return err
	}
	if len(ss) != 2 {
		return errors.New("-compare wants DIRECT.json,GATEWAY.json")
	}
	compare(w, ss[0], ss[1])
	return nil
}

func runTable(w io.Writer, arg string) error {
	ss, err := readSummaries(arg)
	if err != nil {
		return err
	}
	table(w, ss)
	return nil
}
