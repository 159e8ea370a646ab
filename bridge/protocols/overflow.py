"""A context overflow, recognised in whatever words the upstream used.

Clients act on an overflow only when it comes in their own protocol's words: Claude Code
compacts the conversation on Anthropic's `prompt is too long: N tokens > M maximum` and
otherwise fails the turn; LangChain, the OpenAI Agents SDK and others look for OpenAI's
`code: "context_length_exceeded"`. Servers say it in many ways, so this module only finds
the overflow and the numbers the upstream gave; each direction's response.py words it for
its client. Recognised:

- OpenAI: `code: "context_length_exceeded"` ("This model's maximum context length is N
  tokens. However, your messages resulted in T tokens...").
- vLLM, DeepSeek, OpenRouter, older OpenAI: "maximum context length is N tokens" with the
  prompt as "T in the messages, M in the completion", "your request has T input tokens",
  "your prompt contains [at least] T input tokens" with "you requested M output tokens", or
  "'max_tokens' ... is too large: M"; vLLM's "max_tokens=M cannot be greater than
  max_model_len=N".
- llama.cpp: `type: "exceed_context_size_error"` with `n_prompt_tokens` and `n_ctx`, or
  "exceeds the available context size"; Ollama: "exceeds the context length"; LM Studio:
  "context length of only N tokens"; Mistral: "too large for model with N maximum context
  length"; any "exceeds the context window".
- Anthropic (and gateways that relay it): "prompt is too long: T tokens > N maximum" and
  "input length and `max_tokens` exceed context limit: T + M > N".

Output limits (`max_tokens` above the model's output cap), per-minute token rate limits and
over-long single strings are not overflows and are not matched.
"""

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Overflow:
    limit: int = None  # the model's context window, in tokens
    prompt: int = None  # the prompt's size in tokens, as the upstream counted it
    output: int = None  # max_tokens, when the upstream counted it against the window


# Where an upstream reports an overflow: a 400, or a 413/422 from some local servers and
# gateways; None is an error inside a 200 body or a stream. A 429 that counts tokens is a rate limit.
_STATUSES = (None, 400, 413, 422)

_SAYS_OVERFLOW = re.compile(
    r"maximum context length|prompt is too long|exceed context limit|exceeds the available context size"
    r"|exceeds the context (?:length|window)|context length of only|cannot be greater than max_model_len",
    re.IGNORECASE,
)
# field -> patterns, the first that matches gives the number
_NUMBERS = {
    "limit": [
        re.compile(p, re.IGNORECASE)
        for p in (
            r"maximum context length is (\d+)",
            r"(\d+) maximum context length",
            r"tokens > (\d+) maximum",
            r"exceed context limit: \d+ \+ \d+ > (\d+)",
            r"max_model_len=(?:max_total_tokens=)?(\d+)",
            r"context length of only (\d+)",
        )
    ],
    "prompt": [
        re.compile(p, re.IGNORECASE)
        for p in (
            r"resulted in (?:over )?(\d+) tokens",
            r"(\d+) in (?:the messages|your prompt)",
            r"request has (\d+) input tokens",
            r"prompt contains (?:at least )?(\d+) input tokens",
            r"(\d+) of text input",
            r"prompt is too long: (\d+) tokens",
            r"exceed context limit: (\d+) \+",
            r"prompt contains (\d+) tokens",
        )
    ],
    "output": [
        re.compile(p, re.IGNORECASE)
        for p in (
            r"(\d+) (?:in|for) the completion",
            r"requested (\d+) output tokens",
            r"is too large: (\d+)",
            r"(\d+) in the output",
            r"exceed context limit: \d+ \+ (\d+)",
            r"max_tokens=(\d+) cannot",
        )
    ],
}


def find(detail):
    """The Overflow an upstream's error object reports (OpenAI's {"message", "type", "code", ...},
    Anthropic's {"type", "message"}, llama.cpp's with n_ctx), or None when it reports another error."""
    if not isinstance(detail, dict):
        return None
    message = detail.get("message") if isinstance(detail.get("message"), str) else ""
    if (
        detail.get("code") != "context_length_exceeded"
        and detail.get("type") != "exceed_context_size_error"
        and not _SAYS_OVERFLOW.search(message)
    ):
        return None
    numbers = {field: _first(patterns, message) for field, patterns in _NUMBERS.items()}
    for field, key in (("limit", "n_ctx"), ("prompt", "n_prompt_tokens")):
        if isinstance(detail.get(key), int) and not isinstance(detail.get(key), bool):
            numbers[field] = detail[key]
    return Overflow(**numbers)


def reported(error):
    """The Overflow an upstream's BridgeError reports, or None for another error."""
    return find(error.upstream_detail) if error.upstream_status in _STATUSES else None


def _first(patterns, message):
    for pattern in patterns:
        match = pattern.search(message)
        if match:
            return int(match.group(1))
    return None
