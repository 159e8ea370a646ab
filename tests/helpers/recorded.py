"""Recorded fixtures, named by their path under tests/fixtures ("anthropic/text.json"), as
`fake_upstream.fixture` names them, and what tests read out of them."""

import json

import openai
import requests

from bridge.protocols import sse
from bridge.protocols.overflow import Overflow
from bridge.translate.translator import DONE
from tests.fake_upstream import FIXTURES

# The recorded Chat Completions streams whose answer completes; the others end in an `event: error`,
# or carry several answers (multi_choice.sse), which the bridge refuses. The Responses API's
# recordings (openai/responses_*) are RESPONSES_STREAMS.
ANTHROPIC_STREAMS = sorted(
    f"anthropic/{path.name}"
    for path in (FIXTURES / "anthropic").glob("*.sse")
    if path.name != "error_midstream_overloaded.sse"
)
OPENAI_STREAMS = sorted(
    f"openai/{path.name}"
    for path in (FIXTURES / "openai").glob("*.sse")
    if path.name not in ("groq_midstream_error.sse", "multi_choice.sse") and not path.name.startswith("responses_")
)
RESPONSES_STREAMS = sorted(f"openai/{path.name}" for path in (FIXTURES / "openai").glob("responses_*.sse"))


def recorded(name):
    """A recorded JSON body."""
    return json.loads((FIXTURES / name).read_text())


def replay(url, capture):
    """Send a client capture (tests/fixtures/clients) as the client did: same path (with
    ?beta=true), same headers, same body."""
    headers = {
        k: v
        for k, v in capture["headers"].items()
        if k not in ("content-length", "host", "connection", "accept-encoding")
    }
    return requests.post(
        url + capture["path"],
        data=json.dumps(capture["body"]),
        headers=headers,
        stream=bool(capture["body"].get("stream")),
    )


def decoded(chunks):
    """The SSE events in a body (bytes, or the byte chunks it came in), decoded by bridge.protocols.sse to its end."""
    decoder = sse.Decoder()
    events = [event for chunk in ([chunks] if isinstance(chunks, bytes) else chunks) for event in decoder.feed(chunk)]
    return events + decoder.close()


def recorded_events(name):
    """A recorded stream as (event name, payload) pairs, decoded as the relay decodes it; the
    payload is the parsed JSON, or DONE for OpenAI's `[DONE]`."""
    return [
        (event.event, DONE if event.data.strip() == DONE else json.loads(event.data))
        for event in decoded((FIXTURES / name).read_bytes())
    ]


# (what the upstream's error object says, what it reports). Wordings as the servers print them.
OVERFLOWS = {
    "openai": (
        {
            "message": "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
        Overflow(limit=128000, prompt=130512),
    ),
    "openai, the code alone": (
        {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        },
        Overflow(),
    ),
    "openai, older, with the completion": (
        {
            "message": "This model's maximum context length is 4097 tokens, however you requested 4231 tokens "
            "(3975 in your prompt; 256 for the completion). Please reduce your prompt; or completion length."
        },
        Overflow(limit=4097, prompt=3975, output=256),
    ),
    "vllm, messages and completion": (
        {
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
            "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages "
            "or completion.",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=4096, prompt=4000, output=1000),
    ),
    "vllm 0.10-0.17, input alone": (
        {
            "message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
            "tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=32768, prompt=40000),
    ),
    "vllm 0.10-0.17, max_tokens": (
        {
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
            "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=4096, prompt=2778, output=8000),
    ),
    "vllm 0.18+": (
        {
            "message": "This model's maximum context length is 8192 tokens. However, you requested 64 output tokens "
            "and your prompt contains at least 10000 input tokens, for a total of at least 10064 tokens. "
            "Please reduce the length of the input prompt or the number of requested output tokens. "
            "(parameter=input_tokens, value=10000)",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=8192, prompt=10000, output=64),
    ),
    "vllm 0.18+, max_tokens over the window": (
        {
            "message": "max_tokens=32000 cannot be greater than max_model_len=max_total_tokens=16384. Please request "
            "fewer output tokens. (parameter=max_tokens, value=32000)",
            "type": "BadRequestError",
        },
        Overflow(limit=16384, output=32000),
    ),
    "deepseek": (
        {
            "message": "This model's maximum context length is 65536 tokens. However, you requested 70000 "
            "tokens (70000 in the messages, 0 in the completion). Please reduce the length of the "
            "messages or completion.",
            "type": "invalid_request_error",
        },
        Overflow(limit=65536, prompt=70000, output=0),
    ),
    "openrouter": (
        {
            "message": "This endpoint's maximum context length is 8192 tokens. However, you requested about "
            "12000 tokens (10000 of text input, 2000 in the output). Please reduce the length of "
            'either one, or use the "middle-out" transform to compress your prompt automatically.',
            "code": 400,
        },
        Overflow(limit=8192, prompt=10000, output=2000),
    ),
    "llama.cpp": (
        {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        },
        Overflow(limit=4096, prompt=5000),
    ),
    "llama.cpp, older": (
        {
            "code": 400,
            "message": "the request exceeds the available context size. try increasing "
            "the context size or enable context shift",
            "type": "invalid_request_error",
        },
        Overflow(),
    ),
    "ollama": ({"message": "the input length exceeds the context length"}, Overflow()),
    "lm studio": (
        {
            "message": "Trying to keep the first 6269 tokens when context the overflows. However, the model "
            "is loaded with context length of only 4096 tokens, which is not enough."
        },
        Overflow(limit=4096),
    ),
    "mistral": (
        {
            "message": "Prompt contains 10000 tokens and 0 draft tokens, too large for model with 8192 maximum "
            "context length"
        },
        Overflow(limit=8192, prompt=10000),
    ),
    "anthropic, prompt": (
        {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
        Overflow(limit=200000, prompt=210000),
    ),
    "anthropic, prompt and max_tokens": (
        {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 188240 + "
            "21333 > 200000, decrease input length or `max_tokens` and try again",
        },
        Overflow(limit=200000, prompt=188240, output=21333),
    ),
}


# The recorded non-streamed Anthropic answers every OpenAI front translates.
ANTHROPIC_BODIES = [
    "text.json",
    "tool_use.json",
    "thinking.json",
    "redacted_thinking.json",
    "refusal.json",
    "stop_sequence.json",
    "max_tokens.json",
    "cache_usage.json",
    "pause_turn.json",
]
# An Anthropic upstream's recorded errors, and what an OpenAI client's SDK raises for each, at what status.
OPENAI_CLIENT_ERRORS = [
    ("error_400.json", openai.BadRequestError, 400),
    ("error_401.json", openai.AuthenticationError, 401),
    ("error_404.json", openai.NotFoundError, 404),
    ("error_429.json", openai.RateLimitError, 429),
    ("error_500.json", openai.InternalServerError, 500),
    ("error_529.json", openai.InternalServerError, 503),
]
