// client.mjs drives the gateway with the official OpenAI Node SDK, unchanged but for base URL
// and key, for e2e/node_sdk_test.go. It runs one scenario and prints one JSON line of what the
// SDK saw; the Go test asserts on it (and on the upstream fake and the ledger).
//
//   node client.mjs <scenario> [baseURL] [apiKey]
//
// baseURL and apiKey default to $YOSAN_BASE_URL and $YOSAN_API_KEY. Scenarios:
//
//   chat          a chat completion: model, content, usage, the gateway's x-yosan-* headers
//   stream        stream: true with stream_options.include_usage: the deltas and the final usage
//   tools         tool definitions and a finished tool call round (assistant tool_calls + tool
//                 result) sent through the gateway; the fake upstream never answers with a tool
//                 call, so only the request half of a round trip is exercised
//   embeddings    two inputs; the SDK asks for base64 and decodes the float32 vectors itself
//   auth_error    expects AuthenticationError (401) for the key given
//   budget_error  expects RateLimitError (429, budget_exceeded), plain and streamed
//   route         the route alias "auto": a completion, a stream, and "auto" in models.list
//
// An unexpected failure goes to stderr with exit status 1; stdout carries only the JSON line.
import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const [scenario, argBaseURL, argKey] = process.argv.slice(2);
const baseURL = argBaseURL || process.env.YOSAN_BASE_URL;
const apiKey = argKey || process.env.YOSAN_API_KEY;
if (!scenario || !baseURL || !apiKey) {
  console.error('usage: node client.mjs <scenario> [baseURL] [apiKey] (or YOSAN_BASE_URL, YOSAN_API_KEY)');
  process.exit(2);
}

// maxRetries: 0 because the SDK retries 429s and 5xx by default: a budget refusal must reach
// the test as the first answer, and a retry would hide a gateway that fails once.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });

const messages = [{ role: 'user', content: 'Hello, budget!' }];

// yosanHeaders keeps the gateway's own headers of an answer.
function yosanHeaders(response) {
  const out = {};
  for (const [k, v] of response.headers) {
    if (k.startsWith('x-yosan-')) out[k] = v;
  }
  return out;
}

// apiError describes an error the SDK threw, with the class it chose.
function apiError(err) {
  if (!(err instanceof OpenAI.APIError)) throw err;
  return {
    class: err.constructor.name,
    is_api_error: true,
    is_authentication_error: err instanceof OpenAI.AuthenticationError,
    is_rate_limit_error: err instanceof OpenAI.RateLimitError,
    status: err.status ?? null,
    message: err.error?.message ?? null,
    sdk_message: err.message,
    type: err.type ?? null,
    code: err.code ?? null,
    param: err.param ?? null,
  };
}

// expectError runs fn and returns the API error it throws; succeeding is a failure.
async function expectError(what, fn) {
  try {
    await fn();
  } catch (err) {
    return apiError(err);
  }
  throw new Error(`${what}: succeeded, want an error`);
}

// collect reads a chat completion stream into its text, chunk count and final usage.
async function collect(stream) {
  let content = '';
  let chunks = 0;
  let finishReason = null;
  let usage = null;
  let usageChunkChoices = null;
  for await (const chunk of stream) {
    chunks++;
    for (const choice of chunk.choices) {
      content += choice.delta?.content ?? '';
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    if (chunk.usage) {
      usage = chunk.usage;
      usageChunkChoices = chunk.choices.length;
    }
  }
  return { chunks, content, finish_reason: finishReason, usage, usage_chunk_choices: usageChunkChoices };
}

const scenarios = {
  async chat() {
    const { data, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages, max_tokens: 50 })
      .withResponse();
    return {
      object: data.object,
      model: data.model,
      choices: data.choices.length,
      content: data.choices[0]?.message?.content ?? null,
      finish_reason: data.choices[0]?.finish_reason ?? null,
      usage: data.usage,
      request_id: data._request_id ?? null,
      headers: yosanHeaders(response),
    };
  },

  async stream() {
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages, max_tokens: 50, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    return { ...(await collect(stream)), headers: yosanHeaders(response) };
  },

  async tools() {
    const data = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 50,
      tools: [{
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'The weather in a city.',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      }],
      tool_choice: 'auto',
      messages: [
        { role: 'user', content: 'What is the weather in Osaka?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_yosan_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Osaka"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_yosan_1', content: '{"forecast":"sunny","celsius":21}' },
      ],
    });
    return {
      content: data.choices[0]?.message?.content ?? null,
      tool_calls: data.choices[0]?.message?.tool_calls ?? null,
      finish_reason: data.choices[0]?.finish_reason ?? null,
      usage: data.usage,
    };
  },

  async embeddings() {
    // No encoding_format: the SDK asks for base64 and decodes the float32 vectors.
    const data = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['yen', 'budget'] });
    return {
      object: data.object,
      model: data.model,
      data: data.data.map((d) => ({ index: d.index, embedding: d.embedding })),
      usage: data.usage,
    };
  },

  async auth_error() {
    return {
      chat: await expectError('chat with a bad key', () =>
        client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 50 })),
    };
  },

  async budget_error() {
    return {
      chat: await expectError('chat over budget', () =>
        client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 50 })),
      // A refused stream throws before the first chunk (the answer is a 429, not an event).
      stream: await expectError('stream over budget', async () => {
        const stream = await client.chat.completions.create({
          model: 'gpt-4o-mini', messages, max_tokens: 50, stream: true, stream_options: { include_usage: true },
        });
        for await (const _ of stream) throw new Error('stream over budget: a refused stream produced a chunk');
      }),
    };
  },

  async route() {
    const { data, response } = await client.chat.completions
      .create({ model: 'auto', messages, max_tokens: 50 })
      .withResponse();
    const { data: stream, response: streamResponse } = await client.chat.completions
      .create({ model: 'auto', messages, max_tokens: 50, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    return {
      chat: {
        model: data.model,
        content: data.choices[0]?.message?.content ?? null,
        usage: data.usage,
        headers: yosanHeaders(response),
      },
      stream: { ...(await collect(stream)), headers: yosanHeaders(streamResponse) },
      models,
    };
  },
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${JSON.stringify(scenario)}; one of: ${Object.keys(scenarios).join(', ')}`);
  process.exit(2);
}
try {
  const result = await run();
  process.stdout.write(JSON.stringify({ scenario, sdk_version: VERSION, node: process.version, result }) + '\n');
} catch (err) {
  console.error(`${scenario}: ${err?.stack ?? err}`);
  process.exit(1);
}
