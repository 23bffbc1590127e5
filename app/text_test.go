package app_test

import (
	"testing"
	"unicode/utf8"

	"yosan/app"
)

func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"a\n\tb  c\r\n", 100, "a b c"},
		{"残高が不足しています", 10, "残高が"}, // 3 bytes a rune: the cut falls between runes
		{"ok\xffgo", 100, "okgo"},
		{"  lead and trail  ", 100, "lead and trail"},
		{"abc def", 5, "abc d"},
	} {
		got := app.OneLine(tc.in, tc.max)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.max {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
