package billing

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-pdf/fpdf"

	"yosan/app"
)

// FindJapaneseFont returns the path of a Japanese TrueType font for InvoicePDF: the file named
// by the environment variable YOSAN_PDF_FONT when it is set, else IPAexGothic (Debian's
// fonts-ipaexfont-gothic) or IPAGothic (fonts-ipafont-gothic) where Debian installs them. The
// font is not vendored: it is 6 MB, and the system package keeps it patched.
//
// It returns an error wrapping fs.ErrNotExist (or the os.Stat error) when YOSAN_PDF_FONT names
// no regular file, or when no known font is installed; the message says what to install.
func FindJapaneseFont() (string, error) {
	if p := os.Getenv("YOSAN_PDF_FONT"); p != "" {
		if err := regularFile(p); err != nil {
			return "", fmt.Errorf("find japanese font: YOSAN_PDF_FONT: %w", err)
		}
		return p, nil
	}
	known := []string{
		"/usr/share/fonts/opentype/ipaexfont-gothic/ipaexg.ttf", // fonts-ipaexfont-gothic
		"/usr/share/fonts/opentype/ipafont-gothic/ipag.ttf",     // fonts-ipafont-gothic
	}
	for _, p := range known {
		if regularFile(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("find japanese font: none of %s exists: install Debian's "+
		"fonts-ipaexfont-gothic (apt-get install fonts-ipaexfont-gothic, or run scripts/pdf-deps.sh) "+
		"or set YOSAN_PDF_FONT to a Japanese TrueType (.ttf) font: %w",
		strings.Join(known, ", "), fs.ErrNotExist)
}

// regularFile returns nil when p is a regular file (or a symbolic link to one).
func regularFile(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: %w", p, fs.ErrNotExist)
	}
	return nil
}

// InvoicePDF renders an issued invoice or credit note as an A4 portrait PDF with the content of
// the HTML page (views.InvoicePage): every item of a qualified invoice (適格請求書) — the issuer's
// name and registration number, the transaction period, what was supplied, the amounts totalled
// per tax rate with the rate, the consumption tax per rate in yen, the recipient — plus the due
// date, the tax rounding, the USD->JPY rate and its source, and the payment terms. Dates print
// in the location of the invoice's times (the caller passes them in the org's time zone);
// PeriodEnd is exclusive and prints as the day before. A table that runs over a page repeats
// its header, and every page then carries "page / pages".
//
// fontPath is a Japanese TrueType font (see FindJapaneseFont); only the glyphs used are
// embedded. The PDF's dates are the invoice's IssuedAt, so an invoice renders to the same bytes
// every time.
//
// Text the font cannot encode (a character outside Unicode's Basic Multilingual Plane, such as
// an emoji or 𠮷) prints as 〓; a field of absurd length is cut with "…" rather than let a
// table row outgrow a page.
//
// Every error is wrapped as "render invoice pdf: ...": one wrapping fs.ErrNotExist when
// fontPath names no file, fpdf's when the font is not a TrueType font it can parse (an .otf
// with CFF outlines or a .ttc collection is not), or when it fails to write the document, and
// an error (rather than a panic) when fpdf panics.
func InvoicePDF(inv app.Invoice, fontPath string) (b []byte, err error) {
	defer func() {
		// fpdf panics on some inputs (a rune outside the BMP, before clean filtered them); an
		// invoice someone asked for must not take the process down with it.
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("render invoice pdf: fpdf panicked: %v", p)
		}
	}()
	if b, err = invoicePDF(inv, fontPath); err != nil {
		return nil, fmt.Errorf("render invoice pdf: %w", err)
	}
	return b, nil
}

// invoicePDF lays the document out once to count its pages, and a second time with the count
// when there is more than one page: fpdf's page-count alias is a placeholder whose width is
// not the count's, so a right-aligned "1 / 2" would be misplaced.
func invoicePDF(inv app.Invoice, fontPath string) ([]byte, error) {
	if fontPath == "" {
		return nil, errors.New("no font: pass the path of a Japanese TrueType font (see FindJapaneseFont)")
	}
	if err := regularFile(fontPath); err != nil {
		return nil, fmt.Errorf("font: %w", err)
	}
	d, err := layoutInvoice(inv, fontPath, 0)
	if err != nil {
		return nil, err
	}
	if n := d.pdf.PageNo(); n > 1 {
		if d, err = layoutInvoice(inv, fontPath, n); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if err := d.pdf.Output(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// The page: A4 portrait, 15 mm margins; the footer is printed in the bottom margin.
const (
	pdfPageW   = 210.0
	pdfPageH   = 297.0
	pdfMargin  = 15.0
	pdfLeft    = pdfMargin
	pdfRight   = pdfPageW - pdfMargin
	pdfWidth   = pdfRight - pdfLeft
	pdfBottom  = pdfPageH - pdfMargin
	pdfFooterY = pdfPageH - 11.0
	pdfFont    = "jp"
	mmPerPt    = 25.4 / 72
)

// The palette of the HTML page, as grey levels.
const (
	grayInk   = 26  // #1a1a1a
	grayMuted = 85  // #555
	grayRule  = 200 // #c8c8c8
	grayHead  = 240 // #f0f0f0
)

// The lines table's columns, left to right; they add up to pdfWidth.
const (
	colNo     = 9.0
	colDesc   = 108.0
	colQty    = 24.0
	colAmount = 27.0
	colRate   = 12.0
	cellPad   = 2.0

	tableHeaderH = 10.0
)

// textStyle is how a run of text is set: size in points, a grey level, and bold, which is
// drawn as fill plus a thin stroke because IPAexGothic has no bold face.
type textStyle struct {
	size float64
	gray int
	bold bool
}

// lh is the height of a line of text set at size points.
func lh(size float64) float64 { return size * mmPerPt * 1.45 }

// invoiceDoc is one layout pass of an invoice.
type invoiceDoc struct {
	pdf *fpdf.Fpdf
	inv app.Invoice
	// pages is the page count, known on the second pass (0 on the first).
	pages int
	// y is the top of the free space on the current page.
	y float64
}

// layoutInvoice lays out the whole document; pages is the page count to print in the footers
// (0: none, the document has one page as far as the caller knows).
func layoutInvoice(inv app.Invoice, fontPath string, pages int) (*invoiceDoc, error) {
	pdf := fpdf.New("P", "mm", "A4", filepath.Dir(fontPath))
	// AddUTF8Font joins its file name to the font directory, so it gets the base name.
	pdf.AddUTF8Font(pdfFont, "", filepath.Base(fontPath))
	if err := pdf.Error(); err != nil {
		return nil, fmt.Errorf("font %s: %w", fontPath, err)
	}
	d := &invoiceDoc{pdf: pdf, inv: inv, pages: pages}
	pdf.SetMargins(pdfMargin, pdfMargin, pdfMargin)
	pdf.SetAutoPageBreak(false, pdfMargin) // page breaks are the layout's, between blocks and rows
	pdf.SetCellMargin(0)
	titleJA, titleEN := pdfDocTitle(inv)
	pdf.SetTitle(inv.Number, true)
	pdf.SetSubject(titleJA+" / "+titleEN+" "+inv.Period, true)
	pdf.SetAuthor(inv.Issuer.Name, true)
	pdf.SetCreator("Yosan", true)
	pdf.SetLang("ja")
	if !inv.IssuedAt.IsZero() {
		pdf.SetCreationDate(inv.IssuedAt)
		pdf.SetModificationDate(inv.IssuedAt)
	}
	pdf.SetFooterFunc(d.footer)

	pdf.AddPage()
	d.y = pdfMargin
	d.header()
	d.parties()
	d.lines()
	d.totals()
	d.payment()
	if err := pdf.Error(); err != nil {
		return nil, err
	}
	return d, nil
}

// put draws one line of text whose box (of height lh(st.size)) has its top at y: from x
// for align "L", ending at x for "R", centred on x for "C". It returns the text's width.
func (d *invoiceDoc) put(x, y float64, align, s string, st textStyle) float64 {
	p := d.pdf
	s = strings.ReplaceAll(clean(s), "\n", " ")
	p.SetFont(pdfFont, "", st.size)
	w := p.GetStringWidth(s)
	switch align {
	case "R":
		x -= w
	case "C":
		x -= w / 2
	}
	p.SetTextColor(st.gray, st.gray, st.gray)
	if st.bold {
		p.SetDrawColor(st.gray, st.gray, st.gray)
		p.SetLineWidth(st.size * 0.012)
		p.SetTextRenderingMode(2)
	}
	// The baseline: the line box's middle plus about a third of the em (as fpdf's cells do).
	p.Text(x, y+lh(st.size)/2+0.3*st.size*mmPerPt, s)
	if st.bold {
		p.SetTextRenderingMode(0)
	}
	return w
}

// width is the width of s set at size points.
func (d *invoiceDoc) width(s string, size float64) float64 {
	d.pdf.SetFont(pdfFont, "", size)
	return d.pdf.GetStringWidth(clean(s))
}

// clean makes s printable with fpdf: a rune outside the Basic Multilingual Plane (an emoji, a
// rare kanji), which fpdf cannot encode and panics on, becomes 〓 (the geta mark, Japanese
// typesetting's sign for a missing character); a tab becomes a space; other control characters
// go. Newlines stay.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if r > 0xFFFF || (unicode.IsControl(r) && r != '\n') {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r > 0xFFFF:
			b.WriteRune('〓')
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) && r != '\n':
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks s into lines no wider than w at size points: at newlines, at spaces, and between
// Japanese characters, but not before closing punctuation (、。）」…) nor after opening brackets
// (the basic 禁則 rules); a word wider than w is cut. "" gives no lines.
func (d *invoiceDoc) wrap(s string, w, size float64) []string {
	s = strings.TrimRight(clean(s), "\n")
	if strings.TrimSpace(s) == "" {
		return nil
	}
	d.pdf.SetFont(pdfFont, "", size)
	fits := func(t string) bool { return d.pdf.GetStringWidth(t) <= w }
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, t := range breakUnits(para) {
			switch {
			case strings.TrimSpace(t) == "" && line == "":
				// no space at the start of a line
			case fits(strings.TrimRight(line+t, " ")):
				line += t
			case line != "" && fits(t):
				// Break at the line's last space rather than inside a word ("丸の内") when
				// that leaves the line at least 60 % full.
				if i := strings.LastIndex(line, " "); i > 0 && fits(line[i+1:]+t) &&
					d.pdf.GetStringWidth(strings.TrimRight(line[:i], " ")) >= 0.6*w {
					lines = append(lines, strings.TrimRight(line[:i], " "))
					line = line[i+1:] + t
					break
				}
				lines = append(lines, strings.TrimRight(line, " "))
				line = t
			default:
				// A unit wider than the line: cut it where it overflows.
				for _, r := range t {
					if line != "" && !fits(line+string(r)) {
						lines = append(lines, strings.TrimRight(line, " "))
						line = ""
					}
					line += string(r)
				}
			}
		}
		lines = append(lines, strings.TrimRight(line, " "))
	}
	return lines
}

// breakUnits cuts a paragraph into the units a line may break between: a run of spaces, a
// word of Latin letters and digits, or one Japanese character; closing punctuation sticks to
// the unit before it and an opening bracket to the unit after it.
func breakUnits(s string) []string {
	const (
		noStart = "、。，．・：；？！ー々ゝゞヽヾぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ）］｝〕〉》」』】’”,.)]}!?:;%"
		noEnd   = "（［｛〔〈《「『【‘“([{"
	)
	var units []string
	word := ""
	flush := func() {
		if word != "" {
			units = append(units, word)
			word = ""
		}
	}
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			flush()
			if n := len(units); n > 0 && strings.TrimSpace(units[n-1]) == "" {
				units[n-1] += string(r)
			} else {
				units = append(units, string(r))
			}
		case isWideRune(r):
			flush()
			units = append(units, string(r))
		default:
			word += string(r)
		}
	}
	flush()
	var out []string
	for _, u := range units {
		n := len(out)
		first, _ := utf8.DecodeRuneInString(u)
		if n > 0 && strings.TrimSpace(u) != "" && strings.TrimSpace(out[n-1]) != "" {
			prevLast, _ := utf8.DecodeLastRuneInString(out[n-1])
			if strings.ContainsRune(noStart, first) || strings.ContainsRune(noEnd, prevLast) {
				out[n-1] += u
				continue
			}
		}
		out = append(out, u)
	}
	return out
}

// isWideRune reports whether r is a Japanese (or other CJK) character, between any two of which
// a line may break.
func isWideRune(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// clip keeps the first n of lines, the last of them ending in "…" when some were cut: a field
// of absurd length must not push a table row or a block beyond a page.
func clip(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	lines = lines[:n:n]
	last := []rune(lines[n-1])
	lines[n-1] = string(last[:max(0, len(last)-1)]) + "…"
	return lines
}

// pack sets items on as few lines no wider than w as it can, separated by sep, each item kept
// whole unless it is wider than w on its own.
func (d *invoiceDoc) pack(items []string, sep string, w, size float64) []string {
	var lines []string
	cur := ""
	for _, it := range items {
		switch {
		case cur == "":
			cur = it
		case d.width(cur+sep+it, size) <= w:
			cur += sep + it
		default:
			lines = append(lines, cur)
			cur = it
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	var out []string
	for _, l := range lines {
		out = append(out, d.wrap(l, w, size)...)
	}
	return out
}

// rule draws a horizontal line at y.
func (d *invoiceDoc) rule(x1, x2, y, width float64, gray int) {
	d.pdf.SetDrawColor(gray, gray, gray)
	d.pdf.SetLineWidth(width)
	d.pdf.Line(x1, y, x2, y)
}

// bi draws a Japanese label and its English translation beside it, smaller and muted, on one
// line of height lh(ja.size); it returns the x where the pair ends.
func (d *invoiceDoc) bi(x, y float64, ja, en string, jaStyle textStyle, enSize float64) float64 {
	x += d.put(x, y, "L", ja, jaStyle)
	if en == "" {
		return x
	}
	x += 1.2
	// Same baseline: the smaller line box is moved down by the difference of the offsets.
	off := lh(jaStyle.size)/2 + 0.3*jaStyle.size*mmPerPt - (lh(enSize)/2 + 0.3*enSize*mmPerPt)
	return x + d.put(x, y+off, "L", en, textStyle{size: enSize, gray: grayMuted})
}

// newPage ends the current page and starts the next with a running head, so a separated page
// still says what it belongs to.
func (d *invoiceDoc) newPage() {
	d.pdf.AddPage()
	ja, en := pdfDocTitle(d.inv)
	y := pdfMargin
	x := d.bi(pdfLeft, y, ja, en, textStyle{size: 10, gray: grayInk, bold: true}, 7.5)
	d.put(x+4, y+0.4, "L", d.inv.Number, textStyle{size: 9, gray: grayInk})
	d.put(pdfRight, y+0.4, "R", "（続き / continued）", textStyle{size: 8, gray: grayMuted})
	y += lh(10) + 1.5
	d.rule(pdfLeft, pdfRight, y, 0.3, grayInk)
	d.y = y + 5
}

// footer prints the document and its number at the bottom left of every page and, when the
// document has more than one page, "page / pages" at the bottom right.
func (d *invoiceDoc) footer() {
	ja, _ := pdfDocTitle(d.inv)
	st := textStyle{size: 7.5, gray: grayMuted}
	d.put(pdfLeft, pdfFooterY, "L", strings.TrimSpace(ja+" "+d.inv.Number), st)
	if d.pages > 1 {
		d.put(pdfRight, pdfFooterY, "R", fmt.Sprintf("%d / %d", d.pdf.PageNo(), d.pages), st)
	}
}

// header draws the title (and what a correction corrects) at the left, the number and dates at
// the right, and a strong rule under both.
func (d *invoiceDoc) header() {
	inv := d.inv
	ja, en := pdfDocTitle(inv)
	y := pdfMargin
	d.put(pdfLeft, y, "L", ja, textStyle{size: 20, gray: grayInk, bold: true})
	y += lh(20)
	d.put(pdfLeft, y, "L", strings.ToUpper(en), textStyle{size: 9, gray: grayMuted})
	y += lh(9)
	if inv.Corrects != "" {
		y += 2
		st := textStyle{size: 8.5, gray: grayInk}
		s := "訂正対象 / Corrects: " + inv.Corrects
		w := d.width(s, st.size) + 6
		h := lh(st.size) + 2.4
		d.pdf.SetDrawColor(grayInk, grayInk, grayInk)
		d.pdf.SetLineWidth(0.3)
		d.pdf.Rect(pdfLeft, y, w, h, "D")
		d.put(pdfLeft+3, y+1.2, "L", s, st)
		y += h
	}
	left := y

	type meta struct{ ja, en, value string }
	var rows []meta
	if inv.Kind == app.KindCreditNote {
		rows = append(rows, meta{"返還請求書番号", "Credit note No.", inv.Number})
	} else {
		rows = append(rows, meta{"請求書番号", "Invoice No.", inv.Number})
	}
	rows = append(rows, meta{"発行日", "Issue date", pdfDate(inv.IssuedAt)})
	if !inv.DueAt.IsZero() {
		rows = append(rows, meta{"お支払期限", "Due date", pdfDate(inv.DueAt)})
	}
	rows = append(rows, meta{"取引期間", "Period", pdfPeriod(inv.PeriodStart, inv.PeriodEnd)})
	y = pdfMargin + 1
	const metaX = 112.0
	for _, r := range rows {
		d.bi(metaX, y, r.ja, r.en, textStyle{size: 8.5, gray: grayMuted}, 6.5)
		d.put(pdfRight, y, "R", r.value, textStyle{size: 9, gray: grayInk, bold: true})
		y += lh(9) + 1.3
	}
	y = max(left, y) + 3
	d.rule(pdfLeft, pdfRight, y, 0.6, grayInk)
	d.y = y + 7
}

// parties draws the recipient with the amount due at the left and the issuer at the right.
func (d *invoiceDoc) parties() {
	inv := d.inv
	const (
		recipientW = 100.0
		issuerX    = 124.0
		issuerW    = pdfRight - issuerX
	)
	top := d.y

	// The recipient, 御中 after the last line of the name.
	y := top
	name := textStyle{size: 14, gray: grayInk, bold: true}
	onchu := textStyle{size: 11, gray: grayInk, bold: true}
	lines := clip(d.wrap(inv.Recipient, recipientW-d.width("　御中", onchu.size), name.size), 4)
	if len(lines) == 0 {
		lines = []string{""}
	}
	for i, l := range lines {
		w := d.put(pdfLeft, y, "L", l, name)
		if i == len(lines)-1 {
			off := lh(name.size)/2 + 0.3*name.size*mmPerPt - (lh(onchu.size)/2 + 0.3*onchu.size*mmPerPt)
			d.put(pdfLeft+w+3, y+off, "L", "御中", onchu)
		}
		y += lh(name.size)
	}
	y += 1
	d.rule(pdfLeft, pdfLeft+recipientW, y, 0.35, grayInk)
	y += 3.5

	leadJA, leadEN := "下記のとおりご請求申し上げます。", "Please find the amounts due below."
	dueJA, dueEN := "ご請求金額（税込）", "Amount due, tax included"
	if inv.Kind == app.KindCreditNote {
		leadJA, leadEN = "下記のとおり返還いたします。", "We credit you the amounts below."
		dueJA, dueEN = "返還金額（税込）", "Amount credited, tax included"
	}
	d.put(pdfLeft, y, "L", leadJA, textStyle{size: 9, gray: grayInk})
	y += lh(9)
	d.put(pdfLeft, y, "L", leadEN, textStyle{size: 7.5, gray: grayMuted})
	y += lh(7.5) + 3

	const boxH = 14.0
	d.pdf.SetFillColor(grayHead, grayHead, grayHead)
	d.pdf.SetDrawColor(grayInk, grayInk, grayInk)
	d.pdf.SetLineWidth(0.45)
	d.pdf.Rect(pdfLeft, y, recipientW, boxH, "FD")
	labelH := lh(9.5) + lh(7)
	ly := y + (boxH-labelH)/2
	d.put(pdfLeft+3.5, ly, "L", dueJA, textStyle{size: 9.5, gray: grayInk, bold: true})
	d.put(pdfLeft+3.5, ly+lh(9.5), "L", dueEN, textStyle{size: 7, gray: grayMuted})
	d.put(pdfLeft+recipientW-3.5, y+(boxH-lh(17))/2, "R", pdfYen(inv.Total), textStyle{size: 17, gray: grayInk, bold: true})
	y += boxH
	leftBottom := y

	// The issuer.
	y = top
	for _, l := range clip(d.wrap(inv.Issuer.Name, issuerW, 11.5), 3) {
		d.put(issuerX, y, "L", l, textStyle{size: 11.5, gray: grayInk, bold: true})
		y += lh(11.5)
	}
	y += 1.5
	type field struct {
		ja, en, value string
		st            textStyle
	}
	plain := textStyle{size: 8.5, gray: grayInk}
	fields := []field{{"登録番号", "Registration No.", inv.Issuer.RegistrationNumber, textStyle{size: 10, gray: grayInk, bold: true}}}
	if inv.Issuer.Address != "" {
		fields = append(fields, field{"住所", "Address", inv.Issuer.Address, plain})
	}
	if inv.Issuer.Phone != "" {
		fields = append(fields, field{"電話", "Phone", inv.Issuer.Phone, plain})
	}
	if inv.Issuer.Email != "" {
		fields = append(fields, field{"メール", "Email", inv.Issuer.Email, plain})
	}
	const labelW = 25.0
	for _, f := range fields {
		d.put(issuerX, y, "L", f.ja, textStyle{size: 8, gray: grayMuted})
		d.put(issuerX, y+lh(8), "L", f.en, textStyle{size: 6.5, gray: grayMuted})
		vy := y
		for _, l := range clip(d.wrap(f.value, issuerW-labelW, f.st.size), 6) {
			d.put(issuerX+labelW, vy, "L", l, f.st)
			vy += lh(f.st.size)
		}
		y = max(y+lh(8)+lh(6.5), vy) + 1.2
	}
	d.y = max(leftBottom, y) + 8
}

// lines draws the lines table; a row that does not fit goes to the next page, under the
// table's header again.
func (d *invoiceDoc) lines() {
	lines := d.inv.Lines
	// need is the room row i takes: the last row goes with the totals, since a page of totals
	// alone reads as a stray page.
	need := func(i int) float64 {
		h := d.lineRow(lines[i], 0, false)
		if i == len(lines)-1 {
			h += 5 + d.totalsBlock(0, false)
		}
		return h
	}
	// The heading and the table's header go with the first row, never alone at a page's foot.
	headingH := lh(10.5) + 1.5
	if len(lines) > 0 && d.y+headingH+tableHeaderH+need(0) > pdfBottom {
		d.newPage()
	}
	d.bi(pdfLeft, d.y, "明細", "Details", textStyle{size: 10.5, gray: grayInk, bold: true}, 7.5)
	d.y += headingH
	d.y += d.tableHeader(d.y)
	onPage := 0 // rows on this page: a row that fits no page still goes under the header
	for i, l := range lines {
		if d.y+need(i) > pdfBottom && onPage > 0 {
			d.rule(pdfLeft, pdfRight, d.y, 0.45, grayInk)
			d.newPage()
			d.y += d.tableHeader(d.y)
			onPage = 0
		}
		d.y += d.lineRow(l, d.y, true)
		onPage++
	}
	d.rule(pdfLeft, pdfRight, d.y, 0.45, grayInk)
	d.y += 5
}

// tableHeader draws the lines table's header row at y and returns its height.
func (d *invoiceDoc) tableHeader(y float64) float64 {
	const h = tableHeaderH
	d.pdf.SetFillColor(grayHead, grayHead, grayHead)
	d.pdf.Rect(pdfLeft, y, pdfWidth, h, "F")
	d.rule(pdfLeft, pdfRight, y, 0.45, grayInk)
	d.rule(pdfLeft, pdfRight, y+h, 0.3, grayInk)
	ja := textStyle{size: 7.5, gray: grayInk, bold: true}
	const en = 6.5
	top := y + (h-lh(ja.size)-lh(en))/2
	cell := func(x float64, align, sJA, sEN string) {
		d.put(x, top, align, sJA, ja)
		if sEN != "" {
			d.put(x, top+lh(ja.size), align, sEN, textStyle{size: en, gray: grayMuted})
		}
	}
	x := pdfLeft
	cell(x+colNo-cellPad, "R", "No.", "")
	x += colNo
	cell(x+cellPad, "L", "内容", "Description")
	x += colDesc
	cell(x+colQty-cellPad, "R", "数量（トークン）", "Quantity (tokens)")
	x += colQty
	cell(x+colAmount-cellPad, "R", "金額（税抜）", "Amount, excl. tax")
	x += colAmount
	cell(x+colRate-cellPad, "R", "税率", "Rate")
	return h
}

// lineRow draws (when draw is set) the row of line l with its top at y, and returns its
// height either way.
func (d *invoiceDoc) lineRow(l app.InvoiceLine, y float64, draw bool) float64 {
	const (
		padY = 1.8
		main = 8.5
		sub  = 7.0
	)
	descX := pdfLeft + colNo + cellPad
	descW := colDesc - 2*cellPad
	cy := y + padY
	text := func(s string, st textStyle) {
		if draw {
			d.put(descX, cy, "L", s, st)
		}
		cy += lh(st.size)
	}
	for _, s := range clip(d.wrap(l.Description, descW, main), 6) {
		text(s, textStyle{size: main, gray: grayInk, bold: true})
	}
	if l.Kind == app.LineUsage {
		muted := textStyle{size: sub, gray: grayMuted}
		// The provider and model, then the request count (muted) on the same line when it fits.
		var head []string
		if l.Provider != "" || l.Model != "" {
			head = append(head, l.Provider+" / "+l.Model)
		}
		if l.Requests > 0 {
			head = append(head, "リクエスト Requests "+pdfCount(l.Requests))
		}
		for _, s := range clip(d.pack(head, "   ", descW, sub), 3) {
			if draw {
				model := l.Provider + " / " + l.Model
				if rest, ok := strings.CutPrefix(s, model); ok && len(head) == 2 {
					w := d.put(descX, cy, "L", model, textStyle{size: sub, gray: grayInk})
					d.put(descX+w, cy, "L", rest, muted)
				} else {
					d.put(descX, cy, "L", s, muted)
				}
			}
			cy += lh(sub)
		}
		items := []string{
			"入力 Input " + pdfCount(l.InputTokens),
			"キャッシュ Cached " + pdfCount(l.CachedTokens),
		}
		if l.CacheWriteTokens != 0 {
			items = append(items, "キャッシュ書込 Cache write "+pdfCount(l.CacheWriteTokens))
		}
		items = append(items, "出力 Output "+pdfCount(l.OutputTokens))
		for _, s := range d.pack(items, "   ", descW, sub) {
			text(s, muted)
		}
		if l.InputPerM > 0 || l.CachedPerM > 0 || l.CacheWritePerM > 0 || l.OutputPerM > 0 {
			prices := []string{"単価（100万トークンあたり） Per 1M tokens:", "入力 " + pdfUSD(l.InputPerM)}
			if l.CachedPerM > 0 {
				prices = append(prices, "キャッシュ "+pdfUSD(l.CachedPerM))
			}
			if l.CacheWritePerM > 0 {
				prices = append(prices, "キャッシュ書込 "+pdfUSD(l.CacheWritePerM))
			}
			prices = append(prices, "出力 "+pdfUSD(l.OutputPerM))
			for _, s := range d.pack(prices, " ", descW, sub) {
				text(s, muted)
			}
		}
		if !l.PriceFrom.IsZero() {
			from := pdfDate(l.PriceFrom)
			for _, s := range d.pack([]string{from + "以降の単価", "Prices from " + from}, "  ", descW, sub) {
				text(s, muted)
			}
		}
	}
	h := cy - y + padY
	if draw {
		x := pdfLeft
		d.put(x+colNo-cellPad, y+padY, "R", strconv.Itoa(l.N), textStyle{size: main, gray: grayMuted})
		x += colNo + colDesc
		if l.Kind == app.LineUsage {
			d.put(x+colQty-cellPad, y+padY, "R", pdfCount(l.Quantity), textStyle{size: main, gray: grayInk})
		} else {
			d.put(x+colQty-cellPad, y+padY, "R", "—", textStyle{size: main, gray: grayMuted})
		}
		x += colQty
		d.put(x+colAmount-cellPad, y+padY, "R", pdfYen(l.Amount), textStyle{size: main, gray: grayInk, bold: true})
		x += colAmount
		rate := l.TaxRate
		if rate == 0 {
			rate = d.inv.TaxRate
		}
		d.put(x+colRate-cellPad, y+padY, "R", strconv.Itoa(rate)+"%", textStyle{size: main, gray: grayInk})
		d.rule(pdfLeft, pdfRight, y+h, 0.2, grayRule)
	}
	return h
}

// totals draws the totals per tax rate, the tax rounding and the FX rate at the right, on the
// next page when they do not fit.
func (d *invoiceDoc) totals() {
	if h := d.totalsBlock(d.y, false); d.y+h > pdfBottom {
		d.newPage()
	}
	d.y += d.totalsBlock(d.y, true)
}

// totalsBlock draws (when draw is set) the totals with their top at y, and returns their
// height either way.
func (d *invoiceDoc) totalsBlock(y float64, draw bool) float64 {
	inv := d.inv
	const (
		w  = 95.0
		x0 = pdfRight - w
	)
	rate := strconv.Itoa(inv.TaxRate) + "%"
	rows := []struct {
		ja, en string
		value  int64
	}{
		{rate + "対象 小計", "Subtotal (" + rate + ")", inv.Subtotal},
		{"消費税 (" + rate + ")", "Consumption tax", inv.Tax},
	}
	const rowH = 7.0
	label := textStyle{size: 9, gray: grayInk}
	value := textStyle{size: 9.5, gray: grayInk, bold: true}
	cy := y
	for _, r := range rows {
		if draw {
			d.bi(x0+cellPad, cy+(rowH-lh(label.size))/2, r.ja, r.en, label, 7)
			d.put(pdfRight-cellPad, cy+(rowH-lh(value.size))/2, "R", pdfYen(r.value), value)
			d.rule(x0, pdfRight, cy+rowH, 0.2, grayRule)
		}
		cy += rowH
	}
	const grandH = 9.0
	if draw {
		d.rule(x0, pdfRight, cy, 0.45, grayInk)
		grand := textStyle{size: 11, gray: grayInk, bold: true}
		d.bi(x0+cellPad, cy+(grandH-lh(grand.size))/2, "合計", "Total", grand, 7.5)
		d.put(pdfRight-cellPad, cy+(grandH-lh(12))/2, "R", pdfYen(inv.Total), textStyle{size: 12, gray: grayInk, bold: true})
		d.rule(x0, pdfRight, cy+grandH, 0.3, grayInk)
		d.rule(x0, pdfRight, cy+grandH+0.8, 0.3, grayInk)
	}
	cy += grandH + 2.5

	// The notes may be wider than the totals: they are right-aligned under them.
	const notesW = pdfWidth * 0.75
	note := textStyle{size: 7.5, gray: grayMuted}
	ja, en := RoundingLabel(inv.Rounding)
	notes := []string{"消費税の端数処理: " + ja + " (請求書単位で1回) / Tax " + en + " once per invoice"}
	if inv.USDJPY > 0 {
		fx := "為替レート / FX rate: 1 USD = " + pdfFXRate(inv.USDJPY) + " JPY"
		if inv.FXSource != "" {
			fx += " (" + inv.FXSource + ")"
		}
		notes = append(notes, fx)
	}
	for _, n := range notes {
		for _, l := range d.wrap(n, notesW, note.size) {
			if draw {
				d.put(pdfRight, cy, "R", l, note)
			}
			cy += lh(note.size)
		}
		cy += 0.8
	}
	return cy - y
}

// payment draws the payment terms and the notes, at the bottom of the last page (as the HTML
// page prints them), on a page of their own when they do not fit under the totals.
func (d *invoiceDoc) payment() {
	const gap = 8.0
	h := d.paymentBlock(0, false)
	if d.y+gap+h > pdfBottom {
		d.newPage()
	}
	y := max(d.y+gap, pdfBottom-h)
	d.paymentBlock(y, true)
	d.y = y + h
}

// paymentBlock draws (when draw is set) the payment terms and notes with their top at y, and
// returns their height either way.
func (d *invoiceDoc) paymentBlock(y float64, draw bool) float64 {
	inv := d.inv
	const colGap = 10.0
	half := (pdfWidth - colGap) / 2
	if draw {
		d.rule(pdfLeft, pdfRight, y, 0.2, grayRule)
	}
	top := y + 3
	heading := textStyle{size: 9, gray: grayInk, bold: true}
	body := textStyle{size: 8, gray: grayInk}

	notesX, notesW := pdfLeft, pdfWidth
	payH := 0.0
	if inv.Kind != app.KindCreditNote && (inv.Issuer.PaymentTerms != "" || inv.Issuer.BankAccount != "") {
		notesX, notesW = pdfLeft+half+colGap, half
		cy := top
		if draw {
			d.bi(pdfLeft, cy, "お支払について", "Payment", heading, 7)
		}
		cy += lh(heading.size) + 1
		const labelW = 24.0
		for _, f := range [][3]string{
			{"お支払条件", "Terms", inv.Issuer.PaymentTerms},
			{"お振込先", "Bank account", inv.Issuer.BankAccount},
		} {
			if f[2] == "" {
				continue
			}
			if draw {
				d.put(pdfLeft, cy, "L", f[0], textStyle{size: 7.5, gray: grayMuted})
				d.put(pdfLeft, cy+lh(7.5), "L", f[1], textStyle{size: 6.5, gray: grayMuted})
			}
			vy := cy
			for _, l := range clip(d.wrap(f[2], half-labelW, body.size), 6) {
				if draw {
					d.put(pdfLeft+labelW, vy, "L", l, body)
				}
				vy += lh(body.size)
			}
			cy = max(cy+lh(7.5)+lh(6.5), vy) + 1
		}
		payH = cy - top
	}

	cy := top
	if draw {
		d.bi(notesX, cy, "備考", "Notes", heading, 7)
	}
	cy += lh(heading.size) + 1
	for _, n := range [][2]string{
		{"本請求書の利用料金は台帳の確定額の合計です。", "Usage amounts are sums of the gateway's ledger."},
		{"明細の金額は税抜です。消費税は税率ごとの合計に対して計算しています。",
			"Line amounts exclude tax; the consumption tax is computed on the total per rate."},
	} {
		const bullet = 3.0
		if draw {
			d.put(notesX, cy, "L", "・", body)
		}
		for _, l := range d.wrap(n[0], notesW-bullet, body.size) {
			if draw {
				d.put(notesX+bullet, cy, "L", l, body)
			}
			cy += lh(body.size)
		}
		en := textStyle{size: 7, gray: grayMuted}
		for _, l := range d.wrap(n[1], notesW-bullet, en.size) {
			if draw {
				d.put(notesX+bullet, cy, "L", l, en)
			}
			cy += lh(en.size)
		}
		cy += 1
	}
	return max(payH, cy-top) + 3
}

// pdfDocTitle is the document's title, Japanese and English.
func pdfDocTitle(inv app.Invoice) (ja, en string) {
	if inv.Kind == app.KindCreditNote {
		return "適格返還請求書", "Credit note"
	}
	return "適格請求書", "Invoice"
}

// pdfMinus is the true minus sign (U+2212) printed before negative amounts: a hyphen-minus is
// too short to read next to a yen sign.
const pdfMinus = "\u2212"

// pdfYen renders whole yen with thousands separators: "¥1,234,567", "−¥1,234", "¥0".
func pdfYen(n int64) string {
	if n < 0 {
		return pdfMinus + "¥" + strings.TrimPrefix(groupDigits(n), "-")
	}
	return "¥" + groupDigits(n)
}

// pdfCount renders a count (tokens, requests) with thousands separators: "1,234,567".
func pdfCount(n int64) string {
	return strings.Replace(groupDigits(n), "-", pdfMinus, 1)
}

// pdfDate renders the calendar date of t, in t's own location, the Japanese way:
// "2026年12月1日". The zero time renders as "".
func pdfDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d年%d月%d日", t.Year(), int(t.Month()), t.Day())
}

// pdfPeriod renders a period from its bounds, end exclusive (printed as the day before):
// "2026年11月1日〜2026年11月30日".
func pdfPeriod(start, end time.Time) string {
	if !end.IsZero() {
		end = end.Add(-time.Nanosecond)
	}
	if start.IsZero() || end.IsZero() {
		return pdfDate(start) + pdfDate(end)
	}
	return pdfDate(start) + "〜" + pdfDate(end)
}

// pdfFXRate renders a rate in micro-JPY per USD with two decimals, rounded half up:
// 150_000_000 -> "150.00", 149_123_456 -> "149.12".
func pdfFXRate(microJPY int64) string {
	if microJPY < 0 {
		return pdfMinus + pdfFXRate(-microJPY)
	}
	const perCent = app.Micro / 100
	cents := (uint64(microJPY) + perCent/2) / perCent // uint64: no overflow near math.MaxInt64
	return fmt.Sprintf("%s.%02d", groupDigits(int64(cents/100)), cents%100)
}

// pdfUSD renders a price in micro-USD with at least two decimals and no trailing zeros past
// them: 2_500_000 -> "$2.50", 75_000 -> "$0.075".
func pdfUSD(micro int64) string {
	whole, frac, _ := strings.Cut(app.FormatMoney(micro), ".")
	for len(frac) < 2 {
		frac += "0"
	}
	if strings.HasPrefix(whole, "-") {
		return pdfMinus + "$" + whole[1:] + "." + frac
	}
	return "$" + whole + "." + frac
}
