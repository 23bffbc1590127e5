package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

// TestOpenAIGoSDK drives the gateway with the official Go SDK, unchanged but for base URL and
// key: chat, streaming, tools, embeddings, models, and its typed error on 429.
func TestOpenAIGoSDK(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{PromptTokens: 12, CompletionTokens: 6})
	g := startGateway(t, dbtest.NewURL(t), fakeConfig(fu.URL))
	tn := g.newTenant(t, "free")
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(tn.Key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello, budget!")},
		MaxTokens: openai.Int(50),
	}

	t.Run("Chat", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 6 || resp.Usage.PromptTokens != 12 {
			t.Fatalf("unexpected completion: %+v", resp)
		}
		// The upstream got the upstream model name and no stream options.
		if req := fu.fake().LastRequest(); req.Model != "gpt-4o-mini" || req.Stream {
			t.Errorf("upstream request: %+v", req)
		}
	})
	t.Run("ToolsPassThrough", func(t *testing.T) {
		p := params
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}}
		if _, err := client.Chat.Completions.New(ctx, p, option.WithJSONSet("x_custom_field", map[string]any{"keep": true})); err != nil {
			t.Fatal(err)
		}
		body := string(fu.fake().LastRequest().Body)
		for _, want := range []string{`"get_weather"`, `"response_format":{"type":"json_object"}`, `"x_custom_field":{"keep":true}`} {
			if !strings.Contains(body, want) {
				t.Errorf("upstream body lacks %s: %s", want, body)
			}
		}
	})
	t.Run("Streaming", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		chunks := 0
		sawUsage := false
		for stream.Next() {
			c := stream.Current()
			chunks++
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
			if c.JSON.Usage.Valid() && c.Usage.TotalTokens > 0 {
				sawUsage = true
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 3 || text.Len() == 0 {
			t.Fatalf("got %d chunks, text %q", chunks, text.String())
		}
		if sawUsage {
			t.Error("the usage chunk reached a client that did not ask for it")
		}
		if req := fu.fake().LastRequest(); !req.Stream || !req.IncludeUsage {
			t.Errorf("upstream was not asked for usage: %+v", req)
		}
	})
	t.Run("StreamingWithUsage", func(t *testing.T) {
		p := params
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.CompletionTokens != 6 || acc.Usage.PromptTokens != 12 {
			t.Fatalf("usage %+v", acc.Usage)
		}
	})
	t.Run("Embeddings", func(t *testing.T) {
		resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"yen", "budget"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Data) != 2 || len(resp.Data[0].Embedding) == 0 || resp.Usage.PromptTokens == 0 {
			t.Fatalf("embeddings %+v", resp)
		}
	})
	t.Run("Models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if got := strings.Join(ids, ","); got != "gpt-4o-mini,text-embedding-3-small" {
			t.Errorf("free plan sees %s, want only free-tier models", got)
		}
	})
	t.Run("ErrForbiddenModel", func(t *testing.T) {
		p := params
		p.Model = "big"
		_, err := client.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || !strings.Contains(apiErr.Message, "enterprise") {
			t.Fatalf("got %v, want a 403 naming the tier", err)
		}
	})
	t.Run("ErrBudgetExceeded", func(t *testing.T) {
		k := g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/keys", map[string]any{"name": "capped", "team_id": tn.Team, "plan": "free"}, 201)
		g.mustAdmin(t, "PUT", "/budgets/key/"+k["id"].(string), map[string]any{"cap": "0"}, 200)
		client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(k["key"].(string)), option.WithMaxRetries(0))
		_, err := client.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "budget_exceeded" || apiErr.Param != "key:"+k["id"].(string) {
			t.Fatalf("got %v, want the typed 429 budget_exceeded naming the key", err)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		for stream.Next() {
			t.Fatal("a refused stream produced a chunk")
		}
		if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 429 {
			t.Fatalf("stream error %v, want 429", stream.Err())
		}
	})
	mustLedgerSums(t, mustPool(t, g.DBURL))
}
