// Command yosan-mock serves a fake OpenAI upstream (providers/openaifake) over HTTP, so load
// tests can put a real network hop between the gateway and its upstream. Answers are
// precomputed per model, so the mock costs little per request.
//
//	yosan-mock -addr 127.0.0.1:9099 -completion-tokens 64 -latency 200ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"yosan/providers/openaifake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		log.Fatal(err)
	}
}

// run serves until ctx ends; ready, when set, is called with the listening address.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("yosan-mock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9099", "listen address")
	prompt := fs.Int64("prompt-tokens", 10, "prompt_tokens reported in usage")
	completion := fs.Int64("completion-tokens", 16, "completion tokens of each answer (words; one stream chunk each)")
	latency := fs.Duration("latency", 0, "wait before the first byte of each answer")
	chunkDelay := fs.Duration("chunk-delay", 0, "wait between stream chunks")
	dims := fs.Int("embedding-dims", 8, "embedding vector length")
	apiKey := fs.String("api-key", "", "require this Bearer key when set")
	if err := fs.Parse(args); err != nil {
		return err
	}

	fake := openaifake.New(openaifake.Options{
		PromptTokens: *prompt, CompletionTokens: *completion, Latency: *latency, ChunkDelay: *chunkDelay,
		EmbeddingDims: *dims, APIKey: *apiKey, NoRecord: true,
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	fmt.Fprintf(stderr, "yosan-mock: serving a fake OpenAI API on http://%s/v1\n", ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fake.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}
