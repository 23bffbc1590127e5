package main

import (
	"time"

	"yosan/app"
	"yosan/providers/anthropic"
	"yosan/providers/classify"
	"yosan/providers/demo"
	"yosan/providers/gemini"
	"yosan/providers/openai"
	"yosan/providers/zhipu"
)

// newProvider builds the upstream of a configured provider: its wire family's client.
func newProvider(p providerConf, key string) app.Provider {
	switch p.Type {
	case "anthropic":
		return anthropic.New(anthropic.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: key})
	case "gemini":
		return gemini.New(gemini.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: key})
	case "zhipu":
		return zhipu.New(zhipu.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: key})
	}
	return openai.New(openai.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: key})
}

// classifier returns the gateway's classifier: each provider's failures read with the rules of
// its wire family.
func classifier(cfg *Config) func(provider string, e *app.UpstreamError, now time.Time) app.Classification {
	kinds := map[string]classify.Kind{demo.Name: "openai"}
	for _, p := range cfg.Providers {
		switch p.Type {
		case "anthropic", "gemini", "zhipu", "ollama":
			kinds[p.Name] = classify.Kind(p.Type)
		default:
			kinds[p.Name] = "openai"
		}
	}
	return func(provider string, e *app.UpstreamError, now time.Time) app.Classification {
		k, ok := kinds[provider]
		if !ok {
			k = "openai"
		}
		// An error event inside a stream (before its first byte reached the client) comes
		// without an HTTP status, with the event's JSON as the body.
		if e.Status == 0 && len(e.Body) > 0 && !e.Timeout {
			return classify.ClassifyStreamError(k, e.Body, now)
		}
		return classify.Classify(k, e, now)
	}
}
