package classify

import (
	"testing"

	"yosan/app"
)

func ollamaCases() []tc {
	return []tc{
		// A model that is not pulled: an operator must run `ollama pull` (routes fall back).
		{name: "NativeModelNotFound404", kind: Ollama, status: 404, body: `{"error":"model \"llama9\" not found, try pulling it first"}`,
			class: app.ClassManualAction},
		{name: "CompatibleModelNotFound404", kind: Ollama, status: 404,
			body:  `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`,
			class: app.ClassManualAction, code: "not_found_error"},
		{name: "CompatibleModelNotFoundNewer404", kind: Ollama, status: 404,
			body:  `{"error":{"message":"model 'qwen3:32b' not found","type":"not_found_error","param":null,"code":null}}` + "\n",
			class: app.ClassManualAction, code: "not_found_error"},
		// The same 404 from an OpenAI-compatible server that is not Ollama is the caller's.
		{name: "OpenAICompatibleModelNotFound404", kind: OpenAI, status: 404,
			body:  `{"error":{"message":"model 'qwen3:32b' not found","type":"not_found_error","param":null,"code":null}}`,
			class: app.ClassClientError, code: "not_found_error"},
		{name: "CompatibleInvalidRequest400", kind: Ollama, status: 400,
			body:  `{"error":{"message":"invalid message format","type":"invalid_request_error","param":null,"code":null}}`,
			class: app.ClassClientError, code: "invalid_request_error"},
		{name: "CompatibleAPIError500", kind: Ollama, status: 500,
			body:  `{"error":{"message":"llama runner process has terminated: signal: killed","type":"api_error","param":null,"code":null}}`,
			class: app.ClassBackendError, code: "api_error"},
		{name: "NativeServerError500", kind: Ollama, status: 500, body: `{"error":"model requires more system memory (12.5 GiB) than is available (4.1 GiB)"}`,
			class: app.ClassBackendError},
		{name: "ServerBusy503", kind: Ollama, status: 503, body: `{"error":"server busy, please try again.  maximum pending requests exceeded"}`,
			class: app.ClassBackendError},
		{name: "InputExceedsContextLength", kind: Ollama, status: 400, body: `{"error":"the input length exceeds the context length"}`,
			class: app.ClassRequestTooLarge},
	}
}

func TestClassifyOllama(t *testing.T) { runCases(t, ollamaCases()) }
