package views

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"yosan/app"
	"yosan/billing/billingtest"
)

// tokyo is the org time zone of the example invoices.
var tokyo = time.FixedZone("JST", 9*60*60)

// exampleInvoice is the shared example invoice, with markup in a description to check escaping.
func exampleInvoice() app.Invoice {
	inv := billingtest.Invoice()
	inv.Lines[3].Description = "ボリューム割引 5% / Volume discount <script>alert(1)</script>"
	return inv
}

// exampleCreditNote negates exampleInvoice.
func exampleCreditNote() app.Invoice {
	cn := billingtest.CreditNote()
	cn.Lines[3].Description = exampleInvoice().Lines[3].Description
	return cn
}

func render(t *testing.T, inv app.Invoice) string {
	t.Helper()
	var buf bytes.Buffer
	if err := InvoicePage(inv).Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.String()
}

// page is a parsed rendered page.
type page struct {
	doc  *html.Node
	text string // the visible text, whitespace collapsed
}

func parse(t *testing.T, s string) page {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.DataAtom == atom.Style || n.DataAtom == atom.Head) {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return page{doc: doc, text: strings.Join(strings.Fields(b.String()), " ")}
}

// all returns the elements of the page with atom a.
func (p page) all(a atom.Atom) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.DataAtom == a {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(p.doc)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// textOf returns the collapsed text inside n.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func (p page) mustContain(t *testing.T, items ...string) {
	t.Helper()
	for _, s := range items {
		if !strings.Contains(p.text, s) {
			t.Errorf("page text does not contain %q", s)
		}
	}
}

// TestInvoicePage checks that a rendered invoice carries every item a qualified invoice must
// show, and the ones Yosan adds (FX, rounding mode, payment, ledger note).
func TestInvoicePage(t *testing.T) {
	out := render(t, exampleInvoice())
	writeExample(t, "yosan-invoice-example.html", out)
	p := parse(t, out)

	t.Run("Document", func(t *testing.T) {
		if !strings.HasPrefix(out, "<!doctype html>") && !strings.HasPrefix(out, "<!DOCTYPE html>") {
			t.Errorf("page does not start with the HTML5 doctype: %.40q", out)
		}
		htmls := p.all(atom.Html)
		if len(htmls) != 1 || attr(htmls[0], "lang") != "ja" {
			t.Errorf(`want one <html lang="ja">`)
		}
		if n := len(p.all(atom.Script)); n != 0 {
			t.Errorf("page has %d <script> elements, want none", n)
		}
		if n := len(p.all(atom.Link)); n != 0 {
			t.Errorf("page has %d <link> elements, want none (no external assets)", n)
		}
		styles := p.all(atom.Style)
		if len(styles) != 2 {
			t.Fatalf("page has %d <style> elements, want 2 (the sheet and the page footer)", len(styles))
		}
		css := textOf(styles[0])
		for _, rule := range []string{"@page { size: A4; margin: 15mm; }", "@media print", "@media screen", "counter(pages)"} {
			if !strings.Contains(css, rule) {
				t.Errorf("stylesheet lacks %q", rule)
			}
		}
		// The printed page footer: 適格請求書 YSN-2026-11-0042, CSS-escaped.
		if foot, want := textOf(styles[1]), `content: "\009069\00683C\008ACB\006C42\0066F8\000020YSN-2026-11-0042"`; !strings.Contains(foot, want) {
			t.Errorf("page footer style = %q, want it to contain %q", foot, want)
		}
		titles := p.all(atom.Title)
		if len(titles) != 1 || !strings.Contains(textOf(titles[0]), "YSN-2026-11-0042") {
			t.Errorf("<title> does not name the invoice")
		}
	})

	t.Run("MandatoryItems", func(t *testing.T) {
		p.mustContain(t,
			"適格請求書", "Invoice",
			"YSN-2026-11-0042",
			// issuer and its registration number
			"Yosan株式会社", "登録番号", "T7010705000725",
			"東京都千代田区丸の内1-1-1", "03-1234-5678", "billing@yosan.example",
			// recipient
			"株式会社サンプル商事 御中",
			// dates: issue, due, the period with its exclusive end printed as the day before
			"発行日", "2026年12月1日",
			"お支払期限", "2026年12月31日",
			"取引期間", "2026年11月1日〜2026年11月30日",
			// totals per rate, the tax in yen, the total
			"10%対象 小計", "Subtotal (10%)", "¥21,676,280",
			"消費税 (10%)", "Consumption tax", "¥2,167,628",
			"合計", "Total", "¥23,843,908",
			// the rounding mode
			"消費税の端数処理: 切り捨て (請求書単位で1回)", "Tax rounded down once per invoice",
			// FX rate and its source
			"為替レート", "FX rate", "1 USD = 150.00 JPY", "(MUFG TTM 2026-11-02)",
			// payment and the ledger note
			"銀行振込", "みずほ銀行 丸の内支店 普通 1234567",
			"本請求書の利用料金は台帳の確定額の合計です", "Usage amounts are sums of the gateway's ledger",
		)
		if strings.Contains(p.text, "Stripe") || strings.Contains(out, "stripe") {
			t.Errorf("page mentions Stripe")
		}
		if strings.Contains(p.text, "2026年12月1日〜") || strings.Contains(p.text, "〜2026年12月1日") {
			t.Errorf("period printed with its exclusive end")
		}
	})

	t.Run("Lines", func(t *testing.T) {
		tables := p.all(atom.Table)
		if len(tables) != 2 {
			t.Fatalf("page has %d tables, want 2 (lines and totals)", len(tables))
		}
		for i, tbl := range tables {
			var caption bool
			for c := tbl.FirstChild; c != nil; c = c.NextSibling {
				caption = caption || (c.Type == html.ElementNode && c.DataAtom == atom.Caption)
			}
			if !caption {
				t.Errorf("table %d has no <caption>", i)
			}
		}
		for _, th := range p.all(atom.Th) {
			if s := attr(th, "scope"); s != "col" && s != "row" {
				t.Errorf("<th> %q has scope %q, want col or row", textOf(th), s)
			}
		}
		var rows []*html.Node
		for _, tr := range p.all(atom.Tr) {
			if strings.Contains(" "+attr(tr, "class")+" ", " line ") {
				rows = append(rows, tr)
			}
		}
		want := []struct{ items []string }{
			{[]string{"1", "LLM API 利用料", "openai / gpt-4.1", "41,250,000", "12,000,000", "6,830,113", "48,080,113", "¥16,017,635", "10%", "$2.00", "$0.50", "$8.00"}},
			{[]string{"2", "anthropic / claude-sonnet-4", "3,100,000", "402,000", "3,502,000", "¥2,299,500", "10%", "$15.00"}},
			{[]string{"3", "anthropic / claude-sonnet-4", "7,000,000", "1,000,001", "8,000,001", "¥4,500,002", "10%", "from 2026年11月15日"}},
			{[]string{"4", "ボリューム割引 5%", "<script>alert(1)</script>", "\u2212¥1,140,857", "10%"}},
		}
		if len(rows) != len(want) {
			t.Fatalf("%d line rows, want %d", len(rows), len(want))
		}
		for i, row := range rows {
			text := textOf(row)
			for _, s := range want[i].items {
				if !strings.Contains(text, s) {
					t.Errorf("line %d %q lacks %q", i+1, text, s)
				}
			}
		}
		if strings.Contains(textOf(rows[1]), "from 20") {
			t.Errorf("line 2 has no PriceFrom but prints a price date: %q", textOf(rows[1]))
		}
	})

	t.Run("Escaping", func(t *testing.T) {
		if strings.Contains(out, "<script>") {
			t.Errorf("the description's <script> reached the page unescaped")
		}
		if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("the description's markup is not shown as escaped text")
		}
		inv := exampleInvoice()
		inv.Recipient = `Evil "Corp" & <b>Co</b>`
		inv.Issuer.Name = `<img src=x onerror=alert(1)>`
		q := parse(t, render(t, inv))
		if n := len(q.all(atom.Img)) + len(q.all(atom.B)); n != 0 {
			t.Errorf("markup in names became %d elements", n)
		}
		q.mustContain(t, `Evil "Corp" & <b>Co</b> 御中`, `<img src=x onerror=alert(1)>`)
	})

	t.Run("EscapingInStyle", func(t *testing.T) {
		inv := exampleInvoice()
		inv.Number = `X"; } body { display: none } </style><script>alert(1)</script>`
		q := parse(t, render(t, inv))
		if n := len(q.all(atom.Script)); n != 0 {
			t.Errorf("an invoice number broke out of the page footer style: %d <script> elements", n)
		}
		styles := q.all(atom.Style)
		if len(styles) != 2 {
			t.Fatalf("%d <style> elements, want 2", len(styles))
		}
		foot := textOf(styles[1])
		const prefix, suffix = `@page { @bottom-left { content: "`, `"; font-size: 7.5pt; color: #555; } }`
		if !strings.HasPrefix(foot, prefix) || !strings.HasSuffix(foot, suffix) {
			t.Fatalf("page footer style = %q", foot)
		}
		str := strings.TrimSuffix(strings.TrimPrefix(foot, prefix), suffix)
		if strings.ContainsAny(str, "\"<>{};") {
			t.Errorf("page footer string %q carries CSS or HTML syntax", str)
		}
		if got, want := cssString("a\"b\\c</style>\n"), `"a\000022b\00005Cc\00003C/style\00003E\00000A"`; got != want {
			t.Errorf("cssString = %s, want %s", got, want)
		}
	})
}

func TestCreditNotePage(t *testing.T) {
	out := render(t, exampleCreditNote())
	writeExample(t, "yosan-credit-note-example.html", out)
	p := parse(t, out)
	p.mustContain(t,
		"適格返還請求書", "Credit note",
		"訂正対象", "Corrects invoice", "YSN-2026-11-0042",
		"YSN-2026-11-0042-C1", "2026年12月10日",
		"2026年11月1日〜2026年11月30日",
		"Yosan株式会社", "T7010705000725", "株式会社サンプル商事 御中",
		"\u2212¥16,017,635", "¥1,140,857",
		"\u2212¥21,676,280", "\u2212¥2,167,628", "\u2212¥23,843,908",
		"消費税の端数処理: 切り捨て",
	)
	if strings.Contains(p.text, "適格請求書 ") || strings.Contains(p.text, "お支払期限") {
		t.Errorf("credit note reads like an invoice: %q", p.text)
	}
	if strings.Contains(p.text, "-¥") {
		t.Errorf("credit note uses a hyphen-minus, want U+2212")
	}
}

func TestInvoicePageVariants(t *testing.T) {
	t.Run("JPYWithoutFX", func(t *testing.T) {
		inv := exampleInvoice()
		inv.Currency, inv.USDJPY, inv.FXSource = app.JPY, 0, ""
		p := parse(t, render(t, inv))
		if strings.Contains(p.text, "為替レート") {
			t.Errorf("JPY invoice without a rate prints an FX rate")
		}
	})
	t.Run("JPYWithRate", func(t *testing.T) {
		inv := exampleInvoice()
		inv.Currency, inv.USDJPY, inv.FXSource = app.JPY, 149_123_456, ""
		p := parse(t, render(t, inv))
		p.mustContain(t, "1 USD = 149.12 JPY")
		if strings.Contains(p.text, "JPY (") {
			t.Errorf("empty FX source printed as parentheses")
		}
	})
	t.Run("CacheWrites", func(t *testing.T) {
		inv := exampleInvoice()
		if strings.Contains(render(t, inv), "キャッシュ書込") {
			t.Errorf("a line without cache writes prints them")
		}
		inv.Lines[0].CacheWriteTokens, inv.Lines[0].CacheWritePerM = 1_100, 3_750_000
		p := parse(t, render(t, inv))
		p.mustContain(t, "キャッシュ書込 Cache write 1,100")
		p.mustContain(t, "キャッシュ書込 $3.75")
	})
	t.Run("RoundingModes", func(t *testing.T) {
		for mode, want := range map[app.TaxRounding]string{
			"":              "切り捨て",
			app.RoundCeil:   "消費税の端数処理: 切り上げ (請求書単位で1回) / Tax rounded up once per invoice",
			app.RoundHalfUp: "消費税の端数処理: 四捨五入 (請求書単位で1回) / Tax rounded half up once per invoice",
		} {
			inv := exampleInvoice()
			inv.Rounding = mode
			parse(t, render(t, inv)).mustContain(t, want)
		}
	})
}

func TestFormat(t *testing.T) {
	t.Run("Yen", func(t *testing.T) {
		for n, want := range map[int64]string{
			0: "¥0", 1: "¥1", 999: "¥999", 1000: "¥1,000", 1_234_567: "¥1,234,567",
			-1234: "\u2212¥1,234", -9_223_372_036_854_775_808: "\u2212¥9,223,372,036,854,775,808",
		} {
			if got := yen(n); got != want {
				t.Errorf("yen(%d) = %q, want %q", n, got, want)
			}
		}
	})
	t.Run("Count", func(t *testing.T) {
		for n, want := range map[int64]string{0: "0", 12: "12", 123_456: "123,456", 1_000_001: "1,000,001"} {
			if got := count(n); got != want {
				t.Errorf("count(%d) = %q, want %q", n, got, want)
			}
		}
	})
	t.Run("Dates", func(t *testing.T) {
		if got := jaDate(time.Date(2026, 12, 1, 0, 0, 0, 0, tokyo)); got != "2026年12月1日" {
			t.Errorf("jaDate = %q", got)
		}
		if got := jaDate(time.Time{}); got != "" {
			t.Errorf("jaDate(zero) = %q, want empty", got)
		}
		got := period(time.Date(2026, 2, 1, 0, 0, 0, 0, tokyo), time.Date(2026, 3, 1, 0, 0, 0, 0, tokyo))
		if got != "2026年2月1日〜2026年2月28日" {
			t.Errorf("period(February) = %q", got)
		}
		got = period(time.Date(2026, 12, 1, 0, 0, 0, 0, tokyo), time.Date(2027, 1, 1, 0, 0, 0, 0, tokyo))
		if got != "2026年12月1日〜2026年12月31日" {
			t.Errorf("period(December) = %q", got)
		}
	})
	t.Run("FXRate", func(t *testing.T) {
		for micro, want := range map[int64]string{
			150_000_000: "150.00", 149_123_456: "149.12", 149_125_000: "149.13", 1_000_000_000: "1,000.00", 0: "0.00",
		} {
			if got := fxRate(micro); got != want {
				t.Errorf("fxRate(%d) = %q, want %q", micro, got, want)
			}
		}
	})
	t.Run("USDPrice", func(t *testing.T) {
		for micro, want := range map[int64]string{2_500_000: "$2.50", 75_000: "$0.075", 15_000_000: "$15.00", 1: "$0.000001"} {
			if got := usdPrice(micro); got != want {
				t.Errorf("usdPrice(%d) = %q, want %q", micro, got, want)
			}
		}
	})
}

// writeExample saves a rendered page under the OS temp dir, to open in a browser or screenshot.
func writeExample(t *testing.T, name, page string) {
	t.Helper()
	path := filepath.Join(os.TempDir(), name)
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Logf("write example %s: %v", path, err)
		return
	}
	t.Logf("rendered example: file://%s", path)
}
