package web_test

import (
	"context"
	"net/http"
	"testing"

	"yosan/app"
)

// panicky is an upstream that panics: in the call itself, or in the middle of a stream.
type panicky struct{}

func (panicky) ChatCompletion(context.Context, *app.ProviderRequest) (*app.ProviderResponse, error) {
	panic("upstream adapter bug")
}

func (panicky) ChatCompletionStream(context.Context, *app.ProviderRequest) (app.Stream, error) {
	return &panickyStream{}, nil
}

func (panicky) Embeddings(context.Context, *app.ProviderRequest) (*app.ProviderResponse, error) {
	panic("upstream adapter bug")
}

type panickyStream struct{ n int }

func (s *panickyStream) Next() (app.StreamChunk, error) {
	s.n++
	if s.n > 2 {
		panic("stream adapter bug")
	}
	return app.StreamChunk{Data: []byte(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`), Text: "hi"}, nil
}

func (s *panickyStream) Close() error { return nil }

// TestHandlerPanicSettles: a panic after the reservation still settles it (charged at the
// reserved amount, since the upstream was called), and the client gets a 500 when nothing was
// sent yet.
func TestHandlerPanicSettles(t *testing.T) {
	m := &app.CatalogModel{Model: app.Model{Name: "panicky", Provider: "panicky", UpstreamName: "panicky", Tier: "free",
		Kind: app.KindChat, MaxOutputTokens: 100}, Upstream: panicky{},
		Prices: []app.DatedPrice{{Price: app.Price{InputPerM: 1_000_000, OutputPerM: 2_000_000}}}}
	s := mustServerWith(t, m)
	tn := s.mustTenant(t, "free")
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"Call", `{"model":"panicky","messages":[{"role":"user","content":"hi"}]}`, http.StatusInternalServerError},
		{"MidStream", `{"model":"panicky","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.do(t, "POST", "/v1/chat/completions", tn.secret, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			row := s.mustRow(t, resp.Header.Get("x-request-id"))
			if row.status != "committed" || row.source != "unsettled" || row.actual != row.amount {
				t.Fatalf("ledger row %+v, want committed at the reserved amount", row)
			}
			if got := s.sumReserved(t); got != 0 {
				t.Fatalf("reserved = %d after the panic, want 0", got)
			}
		})
	}
}
