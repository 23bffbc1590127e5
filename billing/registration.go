package billing

import (
	"strings"
	"unicode/utf8"

	"yosan/app"
)

// ValidateRegistrationNumber checks a qualified invoice issuer registration number
// (適格請求書発行事業者登録番号): an upper-case half-width "T" followed by 13 half-width digits,
// the first of which is a check digit over the other twelve. It checks the check digit with the
// corporate number scheme (法人番号, 財務省令 on 法人番号の指定等, article 2): with P_n the n-th
// digit of the last twelve counted from the right and Q_n = 1 for odd n and 2 for even n, the
// check digit is 9 - (Σ P_n × Q_n mod 9), so it is never 0.
//
// It does not normalise: spaces, hyphens and full-width characters are rejected rather than
// silently fixed, so what is stored is what gets printed. It returns EINVALID with a message
// that says what is wrong: empty, full-width characters, a missing or lower-case T, a non-digit
// (and where), the wrong number of digits, or the wrong check digit (and which was expected).
func ValidateRegistrationNumber(s string) error {
	if s == "" {
		return app.Errorf(app.EINVALID, "registration number is empty: want T followed by 13 digits")
	}
	if !utf8.ValidString(s) {
		return app.Errorf(app.EINVALID, "registration number is not valid UTF-8 text")
	}
	if strings.ContainsFunc(s, isFullWidth) {
		return app.Errorf(app.EINVALID,
			"registration number %q contains full-width (全角) characters: use a half-width T and half-width digits", s)
	}
	switch {
	case s[0] == 't':
		return app.Errorf(app.EINVALID, "registration number %q must start with an upper-case T", s)
	case s[0] != 'T':
		return app.Errorf(app.EINVALID, "registration number %q must start with T (the 13 digits follow it)", s)
	}
	digits := s[1:]
	for i, r := range digits {
		if r < '0' || r > '9' {
			return app.Errorf(app.EINVALID,
				"registration number %q has a non-digit %q at position %d: want T followed by 13 digits, without spaces or hyphens",
				s, r, i+2)
		}
	}
	if len(digits) != 13 {
		return app.Errorf(app.EINVALID, "registration number %q has %d digits after T: want 13", s, len(digits))
	}
	want := checkDigit(digits[1:])
	if got := digits[0] - '0'; got != want {
		return app.Errorf(app.EINVALID,
			"registration number %q has the wrong check digit: the first digit after T is %d, expected %d for the 12 digits that follow",
			s, got, want)
	}
	return nil
}

// checkDigit returns the corporate number check digit (1-9) of a 12-digit base number.
func checkDigit(base string) byte {
	sum := 0
	for n := 1; n <= 12; n++ {
		p := int(base[12-n] - '0')
		q := 1
		if n%2 == 0 {
			q = 2
		}
		sum += p * q
	}
	return byte(9 - sum%9)
}

// isFullWidth reports whether r is a full-width form (全角 Latin letters and digits, U+FF01 to
// U+FF5E) or the ideographic space, the usual result of typing a number with a Japanese IME on.
func isFullWidth(r rune) bool {
	return (r >= 0xFF01 && r <= 0xFF5E) || r == '\u3000'
}
