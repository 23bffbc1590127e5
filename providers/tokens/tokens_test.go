package tokens_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"yosan/providers/tokens"
)

func TestCountText(t *testing.T) {
	c := tokens.New()
	tests := []struct {
		name, model, text string
		want              int64
	}{
		{"Empty", "gpt-4o", "", 0},
		{"O200kHelloWorld", "gpt-4o-mini", "hello world", 2},
		{"Cl100kHelloWorld", "gpt-4", "hello world", 2},
		{"Cl100kEmbedding", "text-embedding-3-small", "hello world", 2},
		{"DemoModel", "demo-mini", "hello world", 2},
		{"ReasoningModel", "o3-mini", "hello world", 2},
		{"ProviderPrefix", "openai/gpt-4.1", "hello world", 2},
		{"FineTuned", "ft:gpt-4o-mini:acme::abc123", "hello world", 2},
		// "tiktoken is great!" is 6 tokens in cl100k_base (OpenAI cookbook).
		{"Cl100kCookbook", "gpt-3.5-turbo", "tiktoken is great!", 6},
		{"Fallback", "llama3.2", "hello world", 4},      // 11 ASCII chars: ceil(11/3)
		{"FallbackCJK", "glm-4.6", "こんにちは", 8},          // 5 runes x 1.5 = 7.5
		{"FallbackMixed", "claude-sonnet-4", "ab日本", 4}, // 2/3 + 3 = 3.67
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.CountText(tt.model, tt.text); got != tt.want {
				t.Fatalf("CountText(%q, %q) = %d, want %d", tt.model, tt.text, got, tt.want)
			}
		})
	}
}

// TestCountTextSegmentedIsExact checks that cutting ordinary text into segments does not
// change the count against one tiktoken call over the whole text.
func TestCountTextSegmentedIsExact(t *testing.T) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	text := strings.Repeat("The quick brown fox, aged 1234, jumps over the lazy dog's bed.\n\tIt's 3.14 o'clock!  ", 400)
	for _, tc := range []struct{ model, enc string }{{"gpt-4o", "o200k_base"}, {"gpt-4", "cl100k_base"}} {
		tk, err := tiktoken.GetEncoding(tc.enc)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(len(tk.EncodeOrdinary(text)))
		if got := tokens.New().CountText(tc.model, text); got != want {
			t.Errorf("%s: CountText = %d, tiktoken = %d", tc.model, got, want)
		}
	}
}

// TestCountTextLongRun checks that a pathological single piece (no spaces) is counted fast and
// errs high, never low.
func TestCountTextLongRun(t *testing.T) {
	c := tokens.New()
	for _, text := range []string{strings.Repeat("a", 200_000), strings.Repeat(" ", 200_000), strings.Repeat("日本語", 50_000)} {
		got := c.CountText("gpt-4o", text)
		if got <= 0 || got > int64(len(text)) {
			t.Errorf("CountText(%d bytes) = %d", len(text), got)
		}
	}
}

func TestCountTextConcurrent(t *testing.T) {
	c := tokens.New()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			model := "gpt-4o"
			if i%2 == 1 {
				model = "gpt-4"
			}
			if got := c.CountText(model, "hello world"); got != 2 {
				t.Errorf("CountText = %d, want 2", got)
			}
		})
	}
	wg.Wait()
}

func TestPreload(t *testing.T) {
	if err := tokens.New().Preload(); err != nil {
		t.Fatal(err)
	}
}

func TestEstimateText(t *testing.T) {
	tests := []struct {
		text string
		want int64
	}{
		{"", 0},
		{"a", 1},
		{"abc", 1},
		{"abcd", 2},
		{"é", 2},
		{"日本", 3},
		{strings.Repeat("x", 300), 100},
	}
	for _, tt := range tests {
		if got := tokens.EstimateText(tt.text); got != tt.want {
			t.Errorf("EstimateText(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

var sink int64

func BenchmarkCountText(b *testing.B) {
	c := tokens.New()
	if err := c.Preload(); err != nil {
		b.Fatal(err)
	}
	short := "Write a haiku about the sea, please. Keep it under twenty words."
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200) // ~9 KB
	for _, bc := range []struct{ name, model, text string }{
		{"O200kShort", "gpt-4o", short},
		{"O200k9KB", "gpt-4o", long},
		{"Cl100kShort", "gpt-4", short},
		{"EstimateShort", "llama3", short},
		{"Estimate9KB", "llama3", long},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				sink = c.CountText(bc.model, bc.text)
			}
		})
	}
	b.Run("O200kShortParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sink = c.CountText("gpt-4o", short)
			}
		})
	})
}
