"""OpenAI Responses answer -> Chat Completions answer (pure functions).

The stream translator (stream.py) builds its chunks from the same helpers, so a streamed
answer accumulates to exactly what the non-streamed one is; what the Messages client's pair
reads the same way (reasoning text, why an answer stopped, a failure, usage) is
responses_response.py.

- `output_text` parts of the assistant's messages are `content` (joined), `refusal` parts
  `refusal`; `function_call` items are `tool_calls` (id the `call_id`, arguments as the
  model wrote them) and then the finish reason is `tool_calls`.
- Reasoning items: their text (summaries) is `reasoning_content`, a blank line between
  parts and items; each one with `encrypted_content` is also a `thinking_blocks` entry
  whose `signature` is bridge's form of the whole item (protocols/reasoning.py), which the
  client echoes in its history and the next request sends back as that item.
- An incomplete answer ends in `length` (`max_output_tokens`) or `content_filter`; a failed
  one is its error (responses_response.failure), and so is an `{"error": ...}` body in a 200.
  Other output items (hosted tools bridge never asks for) are left out.
- Usage: `prompt_tokens` (cached included, as OpenAI counts), `completion_tokens`
  (reasoning included), `prompt_tokens_details.cached_tokens` (and `cache_write_tokens`
  where the upstream reports them) and `completion_tokens_details.reasoning_tokens`.
- A context overflow is a 400 with `code: "context_length_exceeded"` and `param:
  "messages"` (anthropic_response.openai_overflow, which reads any protocol's overflow).
"""

from ...protocols import shapes
from ...protocols.errors import from_openai
from ...protocols.reasoning import reasoning_signature
from ..chat_answer import completion, tool_call, usage_of
from ..responses_response import PART_SEPARATOR, failure, incomplete_reason, reasoning_text, token_counts

# Why an incomplete Response stopped -> Chat's finish_reason.
FINISH_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def to_chat_completion(response, context):
    """One Response as one Chat choice."""
    if isinstance(response, dict) and isinstance(response.get("error"), dict) and "status" not in response:
        raise from_openai(response)  # an error body in a 200, not a Response
    shapes.responses_body(response)
    if response.get("status") == "failed":
        raise failure(response.get("error"))
    text, refusal, reasoning, signed, calls = [], [], [], [], []
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    text.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    refusal.append(part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(tool_call(item.get("call_id") or "", item.get("name") or "", item.get("arguments") or ""))
        elif kind == "reasoning":
            reasoning.append(reasoning_text(item))
            if item.get("encrypted_content"):
                signed.append(thinking_entry(item, reasoning[-1]))
    message = {
        "role": "assistant",
        "content": "".join(text) if text else None,
        "refusal": "".join(refusal) if refusal else None,
    }
    if calls:
        message["tool_calls"] = calls
    if any(reasoning):
        message["reasoning_content"] = PART_SEPARATOR.join(filter(None, reasoning))
    if signed:
        message["thinking_blocks"] = signed
    return completion(
        response.get("id"), context, message, finish_reason(response, bool(calls)), chat_usage(response.get("usage"))
    )


def thinking_entry(item, text):
    """The `thinking_blocks` extension entry of a reasoning item: its text, and the item itself
    in the signature, for the client to echo back."""
    return {"type": "thinking", "thinking": text, "signature": reasoning_signature(item)}


def finish_reason(response, made_tool_calls):
    """Cut short wins over tool calls: a call cut by the limit is not a call to make."""
    reason = incomplete_reason(response)
    if reason is not None:
        return FINISH_REASONS.get(reason, "length")
    return "tool_calls" if made_tool_calls else "stop"


def chat_usage(usage):
    counts = token_counts(usage)
    out = usage_of(counts.input, counts.output, counts.cached, counts.reasoning)
    if counts.cache_write is not None:
        out["prompt_tokens_details"]["cache_write_tokens"] = counts.cache_write
    return out
