package billing_test

import (
	"fmt"
	"strings"
	"testing"

	"yosan/app"
	"yosan/billing"
)

// withCheckDigit returns "T" + the corporate-number check digit + base (12 digits), computed
// here independently of the package: from the left, the 1st, 3rd, ... digits of base weigh 2
// and the others 1 (the 12th digit, counted first from the right, weighs 1).
func withCheckDigit(base string) string {
	sum := 0
	for i, c := range base {
		w := 1
		if i%2 == 0 {
			w = 2
		}
		sum += int(c-'0') * w
	}
	return fmt.Sprintf("T%d%s", 9-sum%9, base)
}

func TestValidateRegistrationNumber(t *testing.T) {
	valid := []struct {
		name, number string
	}{
		// Published corporate numbers, used as registration numbers by their holders.
		{"NichizeirenCorporate", "T7010705000725"},
		{"KabushikiKaisha", "T4011001098993"},
		{"NTAWorkedExample", "T7123456789012"},
		// Constructed with the algorithm.
		{"ConstructedTokyo", withCheckDigit("011001234567")},
		{"ConstructedOsaka", withCheckDigit("120001077015")},
		{"ConstructedCheck9", withCheckDigit("000000000000")}, // sum 0 -> 9, never 0
		{"ConstructedAllNines", withCheckDigit("999999999999")},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			if err := billing.ValidateRegistrationNumber(tt.number); err != nil {
				t.Errorf("ValidateRegistrationNumber(%q): %v", tt.number, err)
			}
		})
	}
	if got := withCheckDigit("000000000000"); got != "T9000000000000" {
		t.Fatalf("check digit of zeros: %s, want T9000000000000", got)
	}

	invalid := []struct {
		name, number, want string
	}{
		{"Empty", "", "empty"},
		{"MissingT", "7010705000725", "must start with T"},
		{"LowerCaseT", "t7010705000725", "upper-case T"},
		{"OtherLetter", "X7010705000725", "must start with T"},
		{"FullWidthDigits", "T７０１０７０５０００７２５", "full-width"},
		{"FullWidthT", "Ｔ7010705000725", "full-width"},
		{"IdeographicSpace", "T7010705000725\u3000", "full-width"},
		{"TooShort", "T701070500072", "12 digits after T: want 13"},
		{"TooLong", "T70107050007250", "14 digits after T: want 13"},
		{"OnlyT", "T", "0 digits after T"},
		{"Hyphens", "T7-0107-0500-0725", `non-digit '-' at position 3`},
		{"Space", "T 7010705000725", `non-digit ' ' at position 2`},
		{"Letter", "T701070500072X", `non-digit 'X' at position 14`},
		{"WrongCheckDigit", "T8010705000725", "the first digit after T is 8, expected 7"},
		{"TypoInBase", "T7010705000752", "expected 4"},
		{"CheckDigitZero", "T0000000000000", "expected 9"},
		{"InvalidUTF8", "T\xff", "UTF-8"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			err := billing.ValidateRegistrationNumber(tt.number)
			if err == nil {
				t.Fatalf("ValidateRegistrationNumber(%q) = nil, want an error", tt.number)
			}
			if code := app.ErrorCode(err); code != app.EINVALID {
				t.Errorf("code = %q, want %q", code, app.EINVALID)
			}
			if msg := app.ErrorMessage(err); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not contain %q", msg, tt.want)
			}
		})
	}
}

// TestRegistrationNumberSingleDigitTypos checks the scheme catches a typo in any one digit of a
// valid number, except 0 <-> 9, which it cannot see (both are 0 mod 9).
func TestRegistrationNumberSingleDigitTypos(t *testing.T) {
	const good = "T7010705000725"
	for pos := 1; pos < len(good); pos++ {
		for d := byte('0'); d <= '9'; d++ {
			if d == good[pos] {
				continue
			}
			typo := good[:pos] + string(d) + good[pos+1:]
			err := billing.ValidateRegistrationNumber(typo)
			blind := (d == '0' && good[pos] == '9') || (d == '9' && good[pos] == '0')
			if pos > 1 && blind {
				continue // the one typo the scheme cannot detect
			}
			if err == nil {
				t.Errorf("typo %s of %s was accepted", typo, good)
			}
		}
	}
}
