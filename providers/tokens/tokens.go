// Package tokens counts input tokens before a call: exactly, with OpenAI's BPE encodings
// (bundled, no network), for OpenAI model families, and with a deliberately high estimate for
// everything else, so a budget reservation never under-counts.
package tokens

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Counter implements app.TokenCounter. Each encoding is loaded once, on first use; a Counter is
// safe for concurrent use. Create one per process: loading an encoding takes a few hundred
// milliseconds and tens of MB.
type Counter struct {
	o200k  encoding
	cl100k encoding
}

type encoding struct {
	name string
	once sync.Once
	tk   *tiktoken.Tiktoken
	err  error
}

// setLoader points tiktoken at the bundled BPE files instead of downloading them. tiktoken keeps
// the loader in a package variable, so this happens once per process.
var setLoader sync.Once

func (e *encoding) get() (*tiktoken.Tiktoken, error) {
	e.once.Do(func() {
		setLoader.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
		e.tk, e.err = tiktoken.GetEncoding(e.name)
	})
	return e.tk, e.err
}

// New returns a Counter; no encoding is loaded until it is needed (or Preload is called).
func New() *Counter {
	return &Counter{
		o200k:  encoding{name: tiktoken.MODEL_O200K_BASE},
		cl100k: encoding{name: tiktoken.MODEL_CL100K_BASE},
	}
}

// Preload loads both encodings now, so the first request does not pay for it. It returns the
// loader's error when a bundled encoding cannot be read (CountText then falls back to
// EstimateText).
func (c *Counter) Preload() error {
	if _, err := c.o200k.get(); err != nil {
		return err
	}
	_, err := c.cl100k.get()
	return err
}

// CountText returns the number of tokens text encodes to for the upstream model name: exact
// for OpenAI families (gpt-*, o1/o3/o4, chatgpt-*, text-embedding-*, and the demo-* models),
// EstimateText for any other model.
func (c *Counter) CountText(model, text string) int64 {
	if text == "" {
		return 0
	}
	enc := c.encodingFor(model)
	if enc == nil {
		return EstimateText(text)
	}
	tk, err := enc.get()
	if err != nil {
		return EstimateText(text)
	}
	return countBPE(tk, text)
}

// encodingFor picks the encoding of an OpenAI model family, nil for any other model.
func (c *Counter) encodingFor(model string) *encoding {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:] // "openai/gpt-4o"
	}
	model = strings.TrimPrefix(model, "ft:") // fine-tuned: "ft:gpt-4o-mini:org::id"
	switch {
	case strings.HasPrefix(model, "gpt-4o"), strings.HasPrefix(model, "gpt-4.1"),
		strings.HasPrefix(model, "gpt-4.5"):
		return &c.o200k
	case strings.HasPrefix(model, "gpt-4"), strings.HasPrefix(model, "gpt-3.5"),
		strings.HasPrefix(model, "text-embedding-"):
		return &c.cl100k
	case strings.HasPrefix(model, "gpt-"), strings.HasPrefix(model, "chatgpt"),
		strings.HasPrefix(model, "o1"), strings.HasPrefix(model, "o3"), strings.HasPrefix(model, "o4"),
		strings.HasPrefix(model, "demo-"):
		return &c.o200k
	}
	return nil
}

// Segment sizes for countBPE. tiktoken-go's merge is quadratic in the length of one regex piece
// and a run of letters or spaces is one piece, so a long run is cut every maxRun bytes (each cut
// adds at most a token: the count errs high, never low). Ordinary text is encoded in segments
// of about segTarget bytes, cut where a single space separates two non-space characters: no
// piece of o200k_base or cl100k_base spans such a point, so the count there is exact.
const (
	segTarget = 4096
	maxRun    = 256
)

func countBPE(tk *tiktoken.Tiktoken, text string) int64 {
	var n int64
	start, runStart := 0, 0
	for i := 1; i < len(text)-1; i++ {
		if text[i] == ' ' && !isSpace(text[i-1]) && !isSpace(text[i+1]) {
			if i-start >= segTarget {
				n += int64(len(tk.EncodeOrdinary(text[start:i])))
				start = i
			}
			runStart = i
			continue
		}
		if i-runStart >= maxRun && utf8.RuneStart(text[i]) {
			n += int64(len(tk.EncodeOrdinary(text[start:i])))
			start, runStart = i, i
		}
	}
	return n + int64(len(tk.EncodeOrdinary(text[start:])))
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// EstimateText is the fallback count for models whose tokenizer is unknown. It errs high on
// purpose: an ASCII character counts a third of a token (tokenizers average about a quarter),
// any other character 1.5 tokens; the total is rounded up.
func EstimateText(text string) int64 {
	var ascii, other int64
	for i := 0; i < len(text); i++ {
		b := text[i]
		switch {
		case b < utf8.RuneSelf:
			ascii++
		case utf8.RuneStart(b):
			other++
		}
	}
	// ceil(ascii/3 + 1.5*other) = ceil((2*ascii + 9*other) / 6)
	return (2*ascii + 9*other + 5) / 6
}
