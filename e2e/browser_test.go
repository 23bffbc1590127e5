package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browserTimeout bounds each browser action (a page load, waiting for an element), so that a
// stuck page or a missing element fails the test with the page's state instead of hanging
// until go test's -timeout kills the whole package.
const browserTimeout = 20 * time.Second

// browserStartTimeout bounds the start of Chromium; its first start on a cold disk is slow.
const browserStartTimeout = 60 * time.Second

// defaultChromium is where Debian's package puts the browser (scripts/chromium.sh installs it).
const defaultChromium = "/usr/bin/chromium"

// browser is one headless Chromium for a test: one process, one tab, a fresh profile.
//
// Every method fails the test (t.Fatal) when the browser cannot do what it is asked within
// browserTimeout; the message names the step and shows the current URL, the HTTP status,
// the start of the page's text and the page's JavaScript errors. Selectors are CSS selectors.
type browser struct {
	ctx context.Context
	t   *testing.T
	dir string // where screenshots go: e2e/screenshots

	out *syncBuffer // Chromium's stdout and stderr, and chromedp's own errors

	mu         sync.Mutex
	lastStatus int      // HTTP status of the last main-frame document response
	lastDocURL string   // its URL
	pageErrors []string // uncaught exceptions and console errors, oldest first
}

// newBrowser starts headless Chromium for t and stops it when t ends. The binary is
// $YOSAN_CHROMIUM, else /usr/bin/chromium; without either the test fails (it never skips:
// `make test` installs Chromium through scripts/chromium.sh).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := os.Getenv("YOSAN_CHROMIUM")
	if exe != "" {
		if _, err := exec.LookPath(exe); err != nil {
			t.Fatalf("YOSAN_CHROMIUM=%s: %v", exe, err)
		}
	} else if _, err := os.Stat(defaultChromium); err == nil {
		exe = defaultChromium
	} else {
		t.Fatal("chromium not found: run `make test` (scripts/chromium.sh installs it) or set YOSAN_CHROMIUM")
	}

	b := &browser{t: t, dir: "screenshots", out: &syncBuffer{}}
	// The flags that work on this machine's closed network: without the background-networking
	// ones Chromium keeps trying Google's hosts and its connections are refused.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()), // removed after the cleanup below stops the browser
		chromedp.WindowSize(1280, 900),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.CombinedOutput(b.out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	logf := func(format string, args ...any) { fmt.Fprintf(b.out, "chromedp: "+format+"\n", args...) }
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	b.ctx = ctx

	// The first action starts the browser and ties it to ctx, so it cannot run under a
	// timeout context (that would kill the browser when the timeout ends); a timer cancels
	// it instead.
	start := time.Now()
	stuck := time.AfterFunc(browserStartTimeout, cancelTab)
	err := chromedp.Do(ctx)
	if !stuck.Stop() {
		err = fmt.Errorf("not started within %v: %w", browserStartTimeout, err)
	}
	if err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v\nchromium output:\n%s", exe, err, clipTail(chromiumLog(b.out.String()), 4000))
	}
	t.Logf("chromium %s started in %v", exe, time.Since(start).Round(time.Millisecond))

	// For a page target the main frame's id is the target's id.
	mainFrame := cdp.FrameID(chromedp.FromContext(ctx).Target.TargetID)
	if err := chromedp.Listen(ctx, func(ev any) {
		if ev, ok := ev.(*network.EventResponseReceived); ok &&
			ev.Type == network.ResourceTypeDocument && ev.FrameID == mainFrame {
			b.mu.Lock()
			b.lastStatus, b.lastDocURL = int(ev.Response.Status), ev.Response.URL
			b.mu.Unlock()
		}
	}); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("listen to the tab: %v", err)
	}
	console := chromedp.Console(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.pageErrors = append(b.pageErrors, m.String())
				b.mu.Unlock()
			}
		}
	}()

	t.Cleanup(func() {
		if t.Failed() {
			b.failureScreenshot()
			if out := chromiumLog(b.out.String()); out != "" {
				t.Logf("chromium output (end):\n%s", clipTail(out, 4000))
			}
		}
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
		<-consoleDone
	})
	return b
}

// visit loads url and waits for its load event. A 4xx or 5xx answer is not a failure (see
// status); a network error is.
func (b *browser) visit(url string) {
	b.t.Helper()
	b.do("visit "+url, chromedp.Navigate(url))
}

// fill types value into the input or textarea that sel matches, after clearing it, so the
// page sees real key events. A select, or an input that takes no typing (date, color,
// range, hidden...), gets the value set directly, with input and change events. fill fails
// on a disabled or readonly field, and when the field does not hold value afterwards
// (maxlength, or a select without that option).
func (b *browser) fill(sel, value string) {
	b.t.Helper()
	what := fmt.Sprintf("fill %s with %q", sel, value)
	b.do(what, chromedp.WaitReady(chromedp.CSS(sel)))
	mode := browserEval[string](b, what, `(sel, value) => {
		const el = document.querySelector(sel);
		if (!el) return "missing";
		if (el.disabled) return "disabled";
		if (el.readOnly) return "readonly";
		const typed = el.tagName === "TEXTAREA" || (el.tagName === "INPUT" &&
			["text", "search", "email", "url", "tel", "password", "number"].includes(el.type));
		el.focus();
		el.value = typed ? "" : value;
		if (!typed) {
			el.dispatchEvent(new Event("input", {bubbles: true}));
			el.dispatchEvent(new Event("change", {bubbles: true}));
		}
		return typed ? "type" : "set";
	}`, sel, value)
	switch mode {
	case "missing":
		b.fatalf("%s: the element went away", what)
	case "disabled", "readonly":
		b.fatalf("%s: the field is %s", what, mode)
	case "type":
		if value != "" {
			b.do(what, chromedp.SendKeys(chromedp.CSS(sel), value))
		}
	}
	if got := browserRun(b, what, chromedp.Value(chromedp.CSS(sel))); got != value {
		b.fatalf("%s: the field holds %q (maxlength, or no such option?)", what, got)
	}
}

// fillLabel fills the form field whose <label> reads label (whitespace collapsed, the
// text of controls nested in the label left out), or else the field whose aria-label is
// label. It waits for the label like any other element.
func (b *browser) fillLabel(label, value string) {
	b.t.Helper()
	b.fill(b.labelled(label), value)
}

// labelled returns a CSS selector for the control that label names, marking the control
// with a data-e2e-field attribute when it has no id.
func (b *browser) labelled(label string) string {
	b.t.Helper()
	what := fmt.Sprintf("find the field labelled %q", label)
	type found struct {
		Sel string `json:"sel"`
		Err string `json:"err"`
	}
	deadline := time.Now().Add(browserTimeout)
	for {
		f := browserEval[found](b, what, `(label) => {
			const norm = s => s.replace(/\s+/g, " ").trim();
			const own = l => {
				const c = l.cloneNode(true);
				c.querySelectorAll("input, select, textarea, button").forEach(e => e.remove());
				return norm(c.textContent);
			};
			const labels = [...document.querySelectorAll("label")];
			let els = labels.filter(l => own(l) === label).map(l => l.control);
			if (els.length === 0) {
				els = [...document.querySelectorAll("input, select, textarea")]
					.filter(e => norm(e.getAttribute("aria-label") || "") === label);
			}
			if (els.length === 0) {
				return {err: "no <label> or aria-label reads " + JSON.stringify(label) +
					"; the labels here: " + (labels.map(own).map(s => JSON.stringify(s)).join(", ") || "none")};
			}
			if (els.length > 1) return {err: els.length + " labels read " + JSON.stringify(label)};
			const el = els[0];
			if (!el) return {err: "the label " + JSON.stringify(label) + " has no control (no for= or nested input)"};
			if (el.id) return {sel: "#" + CSS.escape(el.id)};
			if (!el.dataset.e2eField) {
				window.__e2eField = (window.__e2eField || 0) + 1;
				el.dataset.e2eField = String(window.__e2eField);
			}
			return {sel: '[data-e2e-field="' + el.dataset.e2eField + '"]'};
		}`, label)
		if f.Sel != "" {
			return f.Sel
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: %s", what, f.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// click clicks the element that sel matches once it is visible, and does not wait for
// anything the click causes: use submit for a click that loads a new page.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// submit clicks the element that sel matches (a submit button, a link) and waits until the
// page it leads to has loaded, following redirects. It fails when no new page loads within
// browserTimeout (a client-side validation error, a button that does nothing).
func (b *browser) submit(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.fatalf("submit %s (click, then wait for the next page): %s", sel, explainBrowserErr(err))
	}
}

// text returns the visible text of the first element that sel matches (innerText, trimmed;
// "" for a hidden element), waiting for the element to exist.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(browserRun(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// has reports whether an element matches sel now; it does not wait for one to appear.
func (b *browser) has(sel string) bool {
	b.t.Helper()
	return browserEval[bool](b, "look for "+sel, `(sel) => document.querySelector(sel) !== null`, sel)
}

// title returns the document's title.
func (b *browser) title() string {
	b.t.Helper()
	return browserRun(b, "read the title", chromedp.Title())
}

// url returns the URL of the current document.
func (b *browser) url() string {
	b.t.Helper()
	return browserRun(b, "read the URL", chromedp.Location())
}

// status returns the HTTP status of the last document the tab loaded in its main frame
// (after redirects: the status of the page shown), or 0 before the first one.
func (b *browser) status() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastStatus
}

// cookies returns the cookies that the browser would send to the current page, HttpOnly
// ones included.
func (b *browser) cookies() []*network.Cookie {
	b.t.Helper()
	return browserRun(b, "read the cookies", func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
		return res.Cookies, err
	})
}

// cookie returns the cookie called name that the current page would get, or nil.
func (b *browser) cookie(name string) *network.Cookie {
	b.t.Helper()
	for _, c := range b.cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// setCookie sets the cookie called name for the current page's site. When the page already
// has one of that name, the new value replaces it (same domain, path and flags), so a test
// can tamper with a session or CSRF cookie; otherwise it is a session cookie for path /.
func (b *browser) setCookie(name, value string) {
	b.t.Helper()
	p := network.SetCookieParams{Name: name, Value: value, URL: b.url(), Path: "/"}
	if old := b.cookie(name); old != nil {
		p.Domain, p.Path, p.SameSite = old.Domain, old.Path, old.SameSite
		p.Secure, p.HTTPOnly = &old.Secure, &old.HTTPOnly
		if !old.Session {
			p.Expires = cdp.TimeSinceEpoch(old.Expires)
		}
	}
	b.do("set the cookie "+name, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCookie, p)
		return err
	}))
}

// deleteCookie removes the cookies called name that the current page would get.
func (b *browser) deleteCookie(name string) {
	b.t.Helper()
	url := b.url()
	b.do("delete the cookie "+name, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.DeleteCookies, network.DeleteCookiesParams{Name: name, URL: url})
		return err
	}))
}

// screenshot saves a full-page PNG of the current page at the window's width (1280 CSS
// pixels) to e2e/screenshots/<test name>-<name>.png and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	return b.save(name, browserRun(b, "screenshot "+name, chromedp.FullScreenshot(100)))
}

// screenshotPhone is screenshot at a phone's size: 390 CSS pixels wide (an iPhone 14),
// mobile viewport rules and touch on, device pixel ratio 2. It saves
// e2e/screenshots/<test name>-<name>-phone.png and then restores the desktop window.
func (b *browser) screenshotPhone(name string) string {
	b.t.Helper()
	defer b.restoreViewport()
	b.do("switch to a phone viewport",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulatePortrait,
			chromedp.EmulateMobile, chromedp.EmulateTouch),
		b.afterLayout())
	return b.save(name+"-phone", browserRun(b, "screenshot "+name+" (phone)", chromedp.FullScreenshot(100)))
}

// restoreViewport undoes screenshotPhone's emulation, also when the screenshot failed.
func (b *browser) restoreViewport() {
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error { //nolint:errcheck // best effort; the next action reports a dead browser
		if _, err := cdp.Call(ctx, t, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, t, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{})
		return err
	}), b.afterLayout())
}

// afterLayout waits for two animation frames, so a viewport change has been laid out.
func (b *browser) afterLayout() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](
		`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`, chromedp.EvalAwaitPromise)
}

// save writes a PNG to b.dir as <test name>-<name>.png, logs and returns its path.
func (b *browser) save(name string, png []byte) string {
	b.t.Helper()
	path, err := b.write(name, png)
	if err != nil {
		b.t.Fatalf("save screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot %s", path)
	return path
}

func (b *browser) write(name string, png []byte) (string, error) {
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(b.dir, screenshotName(b.t.Name()+"-"+name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "", err
	}
	return filepath.Abs(path)
}

// failureScreenshot saves <test name>-failed.png, best effort, for a test that failed. It
// runs in the cleanup, so it must not call t.Fatal: the browser would be left running.
func (b *browser) failureScreenshot() {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		var path string
		if path, err = b.write("failed", png); err == nil {
			b.t.Logf("screenshot at the failure: %s", path)
			return
		}
	}
	b.t.Logf("no screenshot at the failure: %v", err)
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshotName turns a test name ("TestConsole/Keys", Japanese subtest names...) into a safe
// file name.
func screenshotName(s string) string {
	return strings.Trim(unsafeNameChars.ReplaceAllString(s, "_"), "_.")
}

// do runs actions under browserTimeout and fails the test with the page's state on error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatalf("%s: %s", what, explainBrowserErr(err))
	}
}

// browserRun is do for an action with a result (a method cannot have type parameters).
func browserRun[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fatalf("%s: %s", what, explainBrowserErr(err))
	}
	return v
}

// browserEval calls the JavaScript function fn with args (encoded as JSON) in the page and
// decodes its result into T.
func browserEval[T any](b *browser, what, fn string, args ...any) T {
	b.t.Helper()
	enc := make([]string, len(args))
	for i, a := range args {
		buf, err := json.Marshal(a)
		if err != nil {
			b.t.Fatalf("%s: encode %v: %v", what, a, err)
		}
		enc[i] = string(buf)
	}
	return browserRun(b, what, chromedp.Evaluate[T]("("+fn+")("+strings.Join(enc, ", ")+")"))
}

// explainBrowserErr makes a timeout readable; other errors are chromedp's own.
func explainBrowserErr(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("nothing happened within %v (no such element, not visible, or the page never loaded)", browserTimeout)
	}
	return err.Error()
}

// fatalf fails the test with the message and the page's state: its URL and status, the
// first 500 bytes of its text, and its latest JavaScript errors.
func (b *browser) fatalf(format string, args ...any) {
	b.t.Helper()
	b.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), b.state())
}

// state describes the page for a failure message without failing again itself.
func (b *browser) state() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	// A page that is still loading answers nothing until it stops; the test is over anyway.
	chromedp.Do(ctx, chromedp.Stop()) //nolint:errcheck // the reads below report a dead tab
	var sb strings.Builder
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		url = fmt.Sprintf("(unknown: %v)", err)
	}
	b.mu.Lock()
	status, docURL, pageErrors := b.lastStatus, b.lastDocURL, b.pageErrors
	b.mu.Unlock()
	last := "none"
	if status != 0 {
		last = fmt.Sprintf("%d %s", status, docURL)
	}
	fmt.Fprintf(&sb, "  page: %s\n  last document: %s\n", url, last)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.body ? document.body.innerText : document.documentElement.outerHTML`))
	if err != nil {
		text = fmt.Sprintf("(unreadable: %v)", err)
	}
	fmt.Fprintf(&sb, "  page text: %s", indentText(clipText(compactLines(text), 500)))
	if n := len(pageErrors); n > 0 {
		fmt.Fprintf(&sb, "\n  page errors (%d, latest last):", n)
		for _, e := range pageErrors[max(0, n-5):] {
			fmt.Fprintf(&sb, "\n    %s", indentText(clipText(e, 300)))
		}
	}
	return sb.String()
}

// compactLines trims every line of s and drops the empty ones, so a page's text fits in
// a failure message.
func compactLines(s string) string {
	var lines []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// chromiumNoise matches the lines Chromium always prints on this machine: there is no D-Bus,
// and Debian's wrapper script trips over two /dev/shm mounts.
var chromiumNoise = regexp.MustCompile(`dbus/|unexpected operator`)

// chromiumLog is Chromium's output without the lines it prints on every start.
func chromiumLog(out string) string {
	var lines []string
	for l := range strings.Lines(out) {
		if !chromiumNoise.MatchString(l) && strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(lines, "\n")
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func indentText(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

// clipTail returns the last n bytes of s.
func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}
