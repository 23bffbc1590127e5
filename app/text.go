package app

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// OneLine makes s one line of at most max bytes of valid UTF-8: runs of spaces and control
// characters become one space, invalid bytes go, the cut falls on a rune boundary.
func OneLine(s string, max int) string {
	var b strings.Builder
	b.Grow(min(len(s), max))
	pending := false
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			continue
		case unicode.IsSpace(r) || unicode.IsControl(r):
			pending = true
			continue
		}
		n := utf8.RuneLen(r)
		if pending && b.Len() > 0 {
			n++
		}
		if b.Len()+n > max {
			break
		}
		if pending && b.Len() > 0 {
			b.WriteByte(' ')
		}
		pending = false
		b.WriteRune(r)
	}
	return b.String()
}
