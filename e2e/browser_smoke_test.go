package e2e

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

// smokePage is the layout of the smoke test's pages: Japanese text, so the screenshots show
// whether a CJK font is installed (boxes instead of glyphs mean it is not).
var smokePage = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="ja"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; max-width: 40rem; color: #1f2328; }
label { display: block; margin: 1rem 0 .25rem; font-weight: 600; }
input { font: inherit; padding: .4rem; width: 100%; box-sizing: border-box; }
button { font: inherit; margin-top: 1rem; padding: .4rem 1.2rem; }
.note { color: #59636e; }
</style></head>
<body>
<h1>{{.Title}}</h1>
{{if .Form}}
<form method="post" action="/submit">
  <label for="name">お名前</label>
  <input id="name" name="name" type="text" value="初期値">
  <label>メールアドレス <input name="email" type="email"></label>
  <button id="send" type="submit">送信する</button>
</form>
{{else}}
<p id="result">{{.Result}}</p>
{{end}}
<p class="note">予算ゲートウェイ Yosan のブラウザ試験です。漢字・ひらがな・カタカナ・全角記号（「」、。）が正しく表示されること。</p>
</body></html>`))

type smokeData struct {
	Title, Result string
	Form          bool
}

// smokeServer serves the smoke test's pages: a form, the page its POST shows (which sets a
// cookie), a page that shows the cookie the browser sent, a redirect and a 403.
func smokeServer(t *testing.T) *httptest.Server {
	t.Helper()
	render := func(w http.ResponseWriter, status int, d smokeData) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		if err := smokePage.Execute(w, d); err != nil {
			t.Errorf("render %s: %v", d.Title, err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusOK, smokeData{Title: "お問い合わせ", Form: true})
	})
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "smoke", Value: "ok", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		render(w, http.StatusOK, smokeData{Title: "送信完了",
			Result: "受け付けました: " + r.PostFormValue("name") + " / " + r.PostFormValue("email")})
	})
	mux.HandleFunc("GET /cookie", func(w http.ResponseWriter, r *http.Request) {
		var vals []string
		for _, c := range r.CookiesNamed("smoke") {
			vals = append(vals, c.Value)
		}
		render(w, http.StatusOK, smokeData{Title: "クッキー", Result: strconv.Itoa(len(vals)) + ":" + strings.Join(vals, ",")})
	})
	mux.HandleFunc("GET /old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/form", http.StatusFound)
	})
	mux.HandleFunc("GET /forbidden", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusForbidden, smokeData{Title: "権限がありません", Result: "このページを見る権限がありません。"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowserSmoke drives a tiny form in headless Chromium through the browser harness, so a
// broken Chromium install, a missing CJK font or a harness regression shows up here rather
// than in the console's own tests.
func TestBrowserSmoke(t *testing.T) {
	srv := smokeServer(t)

	t.Run("Form", func(t *testing.T) {
		b := newBrowser(t)
		b.visit(srv.URL + "/form")
		if got := b.status(); got != http.StatusOK {
			t.Errorf("form status = %d, want 200", got)
		}
		if got := b.title(); got != "お問い合わせ" {
			t.Errorf("title = %q, want お問い合わせ", got)
		}
		if !b.has("#send") {
			t.Error(`has("#send") = false on the form`)
		}
		if b.has("#result") {
			t.Error(`has("#result") = true on the form`)
		}

		// お名前 is a label for= with an id; メールアドレス wraps its input, which has no id.
		// The name field starts with a value, which fill must replace.
		b.fillLabel("お名前", "山田 太郎 <b>&")
		b.fillLabel("メールアドレス", "taro@example.jp")
		b.screenshot("form")
		b.submit("#send")

		if got, want := b.text("#result"), "受け付けました: 山田 太郎 <b>& / taro@example.jp"; got != want {
			t.Errorf("result = %q, want %q", got, want)
		}
		if got := b.status(); got != http.StatusOK {
			t.Errorf("result status = %d, want 200", got)
		}
		if got := b.url(); got != srv.URL+"/submit" {
			t.Errorf("url = %s, want %s/submit", got, srv.URL)
		}
		c := b.cookie("smoke")
		if c == nil {
			t.Fatalf("no cookie smoke after the POST; cookies: %v", b.cookies())
		}
		if c.Value != "ok" || !c.HTTPOnly || c.Path != "/" {
			t.Errorf("cookie smoke = %q (HttpOnly %v, path %s), want ok, HttpOnly, /", c.Value, c.HTTPOnly, c.Path)
		}
		shot := b.screenshot("result")
		phone := b.screenshotPhone("result")
		for _, p := range []string{shot, phone} {
			if st, err := os.Stat(p); err != nil || st.Size() == 0 {
				t.Errorf("screenshot %s: %v", p, err)
			}
		}

		// setCookie replaces the server's cookie (same path, HttpOnly) rather than adding a
		// second one, as a CSRF test needs.
		b.visit(srv.URL + "/cookie")
		if got := b.text("#result"); got != "1:ok" {
			t.Errorf("cookie page = %q, want 1:ok", got)
		}
		b.setCookie("smoke", "tampered")
		b.visit(srv.URL + "/cookie")
		if got := b.text("#result"); got != "1:tampered" {
			t.Errorf("after setCookie the server saw %q, want 1:tampered", got)
		}
		b.deleteCookie("smoke")
		b.visit(srv.URL + "/cookie")
		if got := b.text("#result"); got != "0:" {
			t.Errorf("after deleteCookie the server saw %q, want 0:", got)
		}
	})

	t.Run("Redirect", func(t *testing.T) {
		b := newBrowser(t)
		b.visit(srv.URL + "/old")
		if got := b.status(); got != http.StatusOK {
			t.Errorf("status after the redirect = %d, want 200 (the page shown)", got)
		}
		if got := b.url(); got != srv.URL+"/form" {
			t.Errorf("url = %s, want %s/form", got, srv.URL)
		}
	})

	t.Run("Forbidden", func(t *testing.T) {
		b := newBrowser(t)
		b.visit(srv.URL + "/forbidden")
		if got := b.status(); got != http.StatusForbidden {
			t.Errorf("status = %d, want 403", got)
		}
		if got := b.text("h1"); got != "権限がありません" {
			t.Errorf("h1 = %q, want 権限がありません", got)
		}
	})
}
