package billing_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"yosan/app"
	"yosan/billing"
	"yosan/billing/billingtest"
)

// pdfLongInvoice is an invoice of n usage lines of 1,000 yen each, billed in yen.
func pdfLongInvoice(n int) app.Invoice {
	inv := billingtest.Invoice()
	inv.Currency, inv.USDJPY, inv.FXSource = app.JPY, 0, ""
	inv.Lines = nil
	for i := range n {
		inv.Lines = append(inv.Lines, app.InvoiceLine{
			N: i + 1, Kind: app.LineUsage, Provider: "openai", Model: fmt.Sprintf("model-%02d", i+1),
			InputPerM: 2_000_000, OutputPerM: 8_000_000,
			Description: fmt.Sprintf("LLM API 利用料 model-%02d / LLM API usage", i+1),
			Requests:    10, InputTokens: 100_000, OutputTokens: 100_000, Quantity: 200_000,
			Amount: 1_000, TaxRate: 10,
		})
	}
	inv.Subtotal, inv.Tax, inv.Total, inv.MarkupBP = int64(n)*1_000, int64(n)*100, int64(n)*1_100, 0
	return inv
}

// mustFont returns the Japanese font the PDFs are rendered with. A missing font fails the test:
// the PDF is a deliverable, so its tests must run (scripts/pdf-deps.sh installs it).
func mustFont(tb testing.TB) string {
	tb.Helper()
	p, err := billing.FindJapaneseFont()
	if err != nil {
		tb.Fatalf("%v (run scripts/pdf-deps.sh)", err)
	}
	return p
}

// mustPDF renders inv and checks the file's framing. With YOSAN_PDF_OUT set to a directory,
// it leaves the PDF there, named for the test, to be looked at.
func mustPDF(tb testing.TB, inv app.Invoice) []byte {
	tb.Helper()
	b, err := billing.InvoicePDF(inv, mustFont(tb))
	if err != nil {
		tb.Fatalf("InvoicePDF: %v", err)
	}
	if dir := os.Getenv("YOSAN_PDF_OUT"); dir != "" {
		name := strings.NewReplacer("/", "-").Replace(tb.Name()) + ".pdf"
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if !bytes.HasPrefix(b, []byte("%PDF-")) {
		tb.Fatalf("the output does not start with %%PDF-: %q", b[:min(len(b), 16)])
	}
	if !bytes.HasSuffix(bytes.TrimRight(b, "\r\n"), []byte("%%EOF")) {
		tb.Fatalf("the output does not end with %%%%EOF: %q", b[max(0, len(b)-16):])
	}
	return b
}

// poppler runs one of poppler-utils' tools (pdftotext, pdfinfo) on pdf with args before the
// file name and extra after it, and returns its output. A missing tool fails the test.
func poppler(tb testing.TB, tool string, pdf []byte, args ...string) string {
	tb.Helper()
	bin, err := exec.LookPath(tool)
	if err != nil {
		tb.Fatalf("%s not found: install Debian's poppler-utils (apt-get install poppler-utils, or run scripts/pdf-deps.sh): %v", tool, err)
	}
	f := filepath.Join(tb.TempDir(), "invoice.pdf")
	if err := os.WriteFile(f, pdf, 0o600); err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append(args, f)...)
	if tool == "pdftotext" {
		cmd.Args = append(cmd.Args, "-")
	}
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s: %v: %s", tool, err, stderr.String())
	}
	if stderr.Len() > 0 {
		tb.Errorf("%s complains about the PDF: %s", tool, stderr.String())
	}
	return string(out)
}

// pdfText is the text of pdf as `pdftotext -layout` extracts it (pages end with a form feed).
func pdfText(tb testing.TB, pdf []byte) string {
	tb.Helper()
	return poppler(tb, "pdftotext", pdf, "-layout", "-enc", "UTF-8")
}

// pdfInfo is one field of `pdfinfo`'s output ("Pages", "Title", ...).
func pdfInfo(tb testing.TB, pdf []byte, field string) string {
	tb.Helper()
	out := poppler(tb, "pdfinfo", pdf)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:\s*(.*)$`).FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("pdfinfo prints no %s:\n%s", field, out)
	}
	return strings.TrimSpace(m[1])
}

// assertContains fails for each of want that text does not contain.
func assertContains(tb testing.TB, text string, want ...string) {
	tb.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			tb.Errorf("the PDF's text lacks %q", w)
		}
	}
	if tb.Failed() {
		tb.Logf("pdftotext -layout:\n%s", text)
	}
}

// pageNumber matches "page / pages" in pdftotext's output, which drops the spaces around the
// slash.
func pageNumber(page, pages int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?m)\b%d ?/ ?%d\s*$`, page, pages))
}

func TestInvoicePDF(t *testing.T) {
	t.Run("Invoice", func(t *testing.T) {
		t.Parallel()
		b := mustPDF(t, billingtest.Invoice())
		text := pdfText(t, b)
		assertContains(t, text,
			"適格請求書", "INVOICE",
			"Yosan株式会社", "登録番号", "T7010705000725",
			"株式会社サンプル商事", "御中",
			"請求書番号", "YSN-2026-11-0042",
			"発行日", "2026年12月1日",
			"取引期間", "2026年11月1日〜2026年11月30日",
			"お支払期限", "2026年12月31日",
			// The lines: description, provider/model, tokens, amounts, rate.
			"LLM API 利用料 gpt-4.1", "openai / gpt-4.1", "anthropic / claude-sonnet-4",
			"41,250,000", "12,000,000", "6,830,113", "18,204", "48,080,113",
			"¥16,017,635", "¥2,299,500", "¥4,500,002", "\u2212¥1,140,857",
			"2026年11月15日以降の単価", "$2.50", "値引き 5% / Discount 5%",
			// The totals per rate.
			"10%対象 小計", "¥21,676,280",
			"消費税 (10%)", "¥2,167,628",
			"合計", "¥23,843,908",
			"ご請求金額（税込）",
			"消費税の端数処理: 切り捨て (請求書単位で1回)", "Tax rounded down once per invoice",
			"1 USD = 150.00 JPY (MUFG TTM 2026-11-02)",
			"お支払条件", "請求書発行日から30日以内に銀行振込", "お振込先", "みずほ銀行 丸の内支店 普通 1234567",
		)
		for _, absent := range []string{"訂正対象", "続き"} {
			if strings.Contains(text, absent) {
				t.Errorf("a one-page invoice shows %q", absent)
			}
		}
		if pageNumber(1, 1).MatchString(text) {
			t.Error("a one-page invoice is numbered 1 / 1")
		}
		if n := strings.Count(text, "\f"); n != 1 {
			t.Errorf("pdftotext sees %d pages, want 1", n)
		}
		for field, want := range map[string]string{
			"Title": "YSN-2026-11-0042", "Creator": "Yosan", "Author": "Yosan株式会社", "Pages": "1",
			"Page size": "595.28 x 841.89 pts (A4)",
		} {
			if got := pdfInfo(t, b, field); got != want {
				t.Errorf("pdfinfo %s = %q, want %q", field, got, want)
			}
		}
	})

	t.Run("CreditNote", func(t *testing.T) {
		t.Parallel()
		text := pdfText(t, mustPDF(t, billingtest.CreditNote()))
		assertContains(t, text,
			"適格返還請求書", "CREDIT NOTE",
			"訂正対象 / Corrects: YSN-2026-11-0042",
			"返還請求書番号", "YSN-2026-11-0042-C1", "2026年12月10日",
			"Yosan株式会社", "T7010705000725", "株式会社サンプル商事", "御中",
			"2026年11月1日〜2026年11月30日",
			"\u2212¥16,017,635", "¥1,140,857",
			"10%対象 小計", "\u2212¥21,676,280", "\u2212¥2,167,628", "\u2212¥23,843,908",
			"返還金額（税込）", "下記のとおり返還いたします。",
			"1 USD = 150.00 JPY (MUFG TTM 2026-11-02)",
		)
		if strings.Contains(text, "\u2212¥1,140,857") {
			t.Error("the credit note does not negate the discount")
		}
		for _, absent := range []string{"お支払期限", "お振込先"} {
			if strings.Contains(text, absent) {
				t.Errorf("a credit note shows %q", absent)
			}
		}
	})

	t.Run("RoundingAndNoFX", func(t *testing.T) {
		t.Parallel()
		inv := pdfLongInvoice(3)
		inv.Rounding = app.RoundHalfUp
		text := pdfText(t, mustPDF(t, inv))
		ja, en := billing.RoundingLabel(app.RoundHalfUp)
		assertContains(t, text, "消費税の端数処理: "+ja, "Tax "+en+" once per invoice", "¥3,300")
		if strings.Contains(text, "USD") {
			t.Error("an invoice without an FX rate prints one")
		}
	})

	t.Run("ManyLines", func(t *testing.T) {
		t.Parallel()
		b := mustPDF(t, pdfLongInvoice(60))
		text := pdfText(t, b)
		pages := strings.Count(text, "\f")
		if pages < 2 {
			t.Fatalf("60 lines fit on %d page(s), want 2 or more", pages)
		}
		if got := pdfInfo(t, b, "Pages"); got != fmt.Sprint(pages) {
			t.Errorf("pdfinfo Pages = %s, pdftotext sees %d", got, pages)
		}
		// Every page is numbered; every page after the first repeats the table header.
		for i, page := range strings.Split(strings.TrimSuffix(text, "\f"), "\f") {
			if re := pageNumber(i+1, pages); !re.MatchString(page) {
				t.Errorf("page %d lacks its number (%s)", i+1, re)
			}
			if !strings.Contains(page, "Amount, excl. tax") && strings.Contains(page, "model-") {
				t.Errorf("page %d has lines but no table header", i+1)
			}
		}
		assertContains(t, text, "model-01", "model-60", "¥60,000", "¥6,000", "¥66,000", "続き / continued")
	})

	t.Run("OddText", func(t *testing.T) {
		t.Parallel()
		// Text the font has no glyphs for, words wider than their column, a description longer
		// than a page, empty fields: the document still renders, on as many pages as it takes.
		inv := billingtest.Invoice()
		inv.Recipient = "株式会社😀" + strings.Repeat("ＡＢＣ", 30)
		inv.Issuer.Email = strings.Repeat("x", 120) + "@example.com"
		inv.Issuer.Address = ""
		inv.Lines[0].Description = strings.Repeat("とても長い説明文です。", 400)
		inv.Lines[1].Model = strings.Repeat("m", 200)
		inv.FXSource = ""
		b := mustPDF(t, inv)
		assertContains(t, pdfText(t, b), "株式会社〓", "1 USD = 150.00 JPY", "¥23,843,908")
	})

	t.Run("ZeroInvoice", func(t *testing.T) {
		t.Parallel()
		mustPDF(t, app.Invoice{})
	})

	t.Run("Deterministic", func(t *testing.T) {
		t.Parallel()
		a, b := mustPDF(t, billingtest.Invoice()), mustPDF(t, billingtest.Invoice())
		if !bytes.Equal(a, b) {
			t.Error("the same invoice renders to different bytes")
		}
	})

	t.Run("ErrFontMissing", func(t *testing.T) {
		t.Parallel()
		_, err := billing.InvoicePDF(billingtest.Invoice(), filepath.Join(t.TempDir(), "nope.ttf"))
		if err == nil || !strings.HasPrefix(err.Error(), "render invoice pdf: ") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want a wrapped fs.ErrNotExist", err)
		}
	})

	t.Run("ErrNotAFont", func(t *testing.T) {
		t.Parallel()
		f := filepath.Join(t.TempDir(), "junk.ttf")
		if err := os.WriteFile(f, []byte("not a font at all, just some text padding it out"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := billing.InvoicePDF(billingtest.Invoice(), f)
		if err == nil || !strings.HasPrefix(err.Error(), "render invoice pdf: ") {
			t.Errorf("err = %v, want a render invoice pdf error", err)
		}
		t.Logf("err = %v", err)
	})
}

func TestPDFFont(t *testing.T) {
	t.Run("Found", func(t *testing.T) {
		if st, err := os.Stat(mustFont(t)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("FindJapaneseFont returns no regular file: %v", err)
		}
	})

	t.Run("FromEnv", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "custom.ttf")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("YOSAN_PDF_FONT", f)
		if p, err := billing.FindJapaneseFont(); err != nil || p != f {
			t.Errorf("FindJapaneseFont = %q, %v; want %q", p, err, f)
		}
	})

	t.Run("ErrEnvMissing", func(t *testing.T) {
		t.Setenv("YOSAN_PDF_FONT", filepath.Join(t.TempDir(), "missing.ttf"))
		_, err := billing.FindJapaneseFont()
		if err == nil || !strings.Contains(err.Error(), "YOSAN_PDF_FONT") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want a wrapped fs.ErrNotExist naming YOSAN_PDF_FONT", err)
		}
	})

	t.Run("ErrEnvDirectory", func(t *testing.T) {
		t.Setenv("YOSAN_PDF_FONT", t.TempDir())
		if _, err := billing.FindJapaneseFont(); err == nil {
			t.Error("a directory is accepted as the font")
		}
	})
}

// TestInvoicePDFCacheWrites: a line with prompt-cache writes prints their tokens and price.
func TestInvoicePDFCacheWrites(t *testing.T) {
	inv := pdfLongInvoice(1)
	inv.Lines[0].CacheWriteTokens, inv.Lines[0].CacheWritePerM = 1_100, 3_750_000
	text := pdfText(t, mustPDF(t, inv))
	for _, want := range []string{"キャッシュ書込 Cache write 1,100", "キャッシュ書込 $3.75"} {
		if !strings.Contains(text, want) {
			t.Errorf("PDF text lacks %q:\n%s", want, text)
		}
	}
	if text := pdfText(t, mustPDF(t, pdfLongInvoice(1))); strings.Contains(text, "キャッシュ書込") {
		t.Errorf("a line without cache writes prints them")
	}
}
