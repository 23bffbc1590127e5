// Package upstream is the HTTP plumbing every provider client shares: bounded reads of an
// answer, the *app.UpstreamError of a failed call (an HTTP error answer or a transport
// failure), and the line reader of a server-sent event stream.
package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"

	"yosan/app"
)

// ErrTooLarge is returned by ReadAll and LineReader for an answer or a line over the bound.
var ErrTooLarge = errors.New("answer too large")

// ReadAll reads r up to max bytes into one buffer sized from the Content-Length when known
// (size, -1 when unknown). For more than max bytes it returns the first max and ErrTooLarge.
func ReadAll(r io.Reader, size int64, max int) ([]byte, error) {
	var b []byte
	if size >= 0 && size <= int64(max) {
		b = make([]byte, 0, size+1) // +1: see EOF without growing
	} else {
		b = make([]byte, 0, 4096)
	}
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(cap(b), max+1-len(b)))
		}
		n, err := r.Read(b[len(b):min(cap(b), max+1)])
		b = b[:len(b)+n]
		if len(b) > max {
			return b[:max], ErrTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// TransportError wraps a failure of provider's call; Timeout tells a deadline (the call's
// context or a network timeout) from other failures.
func TransportError(provider string, ctx context.Context, err error) *app.UpstreamError {
	var ne net.Error
	timeout := errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
	return &app.UpstreamError{Provider: provider, Timeout: timeout, Err: err}
}

// StatusError is the error of a non-2xx answer: its status, headers and the first maxBody
// bytes of its body, exactly as received. It closes the body.
func StatusError(provider string, resp *http.Response, maxBody int) *app.UpstreamError {
	defer resp.Body.Close()
	b, _ := ReadAll(resp.Body, resp.ContentLength, maxBody) // what arrived is enough
	return &app.UpstreamError{Provider: provider, Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// LineReader reads the lines of an event stream, without their line endings, with lines up to
// Max bytes (longer ones give ErrTooLarge).
type LineReader struct {
	R    *bufio.Reader
	Max  int
	long []byte // holds a line longer than the reader's buffer
}

// ReadLine returns the next line; the slice is valid until the next call. The last line may
// lack its newline: it is returned, and io.EOF comes next.
func (lr *LineReader) ReadLine() ([]byte, error) {
	line, err := lr.R.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		lr.long = append(lr.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = lr.R.ReadSlice('\n')
			if len(lr.long)+len(line) > lr.Max {
				return nil, ErrTooLarge
			}
			lr.long = append(lr.long, line...)
		}
		line = lr.long
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return trimEOL(line), nil
		}
		return nil, err
	}
	return trimEOL(line), nil
}

func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}
