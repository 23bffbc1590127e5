package ollamafake

import (
	"encoding/json"
	"net/http"
)

// Ollama's messages for the scripted failures.
const (
	// MsgRunnerTerminated is the 500 of a model runner that crashed (out of memory, bad GPU).
	MsgRunnerTerminated = "llama runner process has terminated: exit status 2"
	// MsgServerBusy is the 503 when the queue is full (OLLAMA_MAX_QUEUE); two spaces, as sent.
	MsgServerBusy = "server busy, please try again.  maximum pending requests exceeded"
)

// Body returns the error body Ollama's openai middleware writes for an error the server raised
// (model not found, runner failures): {"error":{"message","type","param":null,"code":null}}
// from json.Encoder, so with a trailing newline. The type follows status as Ollama's NewError
// sets it.
func Body(status int, message string) string {
	return ginBody(status, message) + "\n"
}

// ginBody is the same object written by gin's c.JSON (the middleware's own request checks):
// no trailing newline.
func ginBody(status int, message string) string {
	typ := "api_error"
	switch status {
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	}
	msg, _ := json.Marshal(message) // a string always marshals; HTML-escaped like Ollama's
	return `{"error":{"message":` + string(msg) + `,"type":"` + typ + `","param":null,"code":null}}`
}

// ginHeader is the Content-Type gin's c.JSON sets.
func ginHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return h
}

// errorHeader is the Content-Type the middleware's error writer sets.
func errorHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return h
}

// ErrorResponse returns an answer of Kind Error with status and Body(status, message).
func ErrorResponse(status int, message string) Response {
	return Response{Kind: Error, Status: status, Header: errorHeader(), Body: []byte(Body(status, message))}
}

// ModelNotFound returns the 404 for a model that is not pulled: "model 'name' not found".
func ModelNotFound(model string) Response {
	return ErrorResponse(http.StatusNotFound, "model '"+model+"' not found")
}

// ServerError returns a 500 api_error (the runner crashed).
func ServerError() Response {
	return ErrorResponse(http.StatusInternalServerError, MsgRunnerTerminated)
}

// ServerBusy returns the 503 api_error of a full request queue.
func ServerBusy() Response {
	return ErrorResponse(http.StatusServiceUnavailable, MsgServerBusy)
}

// BrokenStream returns an answer that sends after stream events, then drops the connection.
func BrokenStream(after int) Response { return Response{Kind: BreakStream, After: after} }
