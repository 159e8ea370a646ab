"""An OpenAI Responses answer read for a client of another protocol: what the pairs with a
Responses upstream share (pure functions).

- A reasoning item's text is its summary (`summary_text` parts: what OpenAI's models show),
  else its raw `reasoning_text` content (what open-weight models served on the API show),
  its parts a blank line apart. Only an item with `encrypted_content` can be sent again
  under `store: false`.
- A Response ends `completed`, `incomplete` (`incomplete_details.reason`: `max_output_tokens`
  or `content_filter`) or `failed`, whose `error` ({code, message}) is the client's error:
  a rate limit, a context overflow (`context_length_exceeded`, which each client's
  translator words as its client acts on) and the codes about the input are the client's,
  any other the upstream's failure (a bad gateway).
- Usage: `input_tokens` include the cached ones (`input_tokens_details.cached_tokens`, and
  the `cache_write_tokens` newer models report), `output_tokens` the reasoning ones
  (`output_tokens_details.reasoning_tokens`).
"""

import collections

from ..protocols.errors import KINDS, from_openai, kind_for_type

# Between the parts of reasoning text (and, on the Chat front, between reasoning items).
PART_SEPARATOR = "\n\n"
REASONING_PARTS = {"summary": "summary_text", "content": "reasoning_text"}

# A failed Response's error code -> its kind; codes about the input are the client's
# (invalid_prompt, invalid_image..., image_too_large...), any other is what its type says.
_FAILURE_KINDS = {
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "rate_limit",
    "context_length_exceeded": "invalid_request",
    "invalid_prompt": "invalid_request",
    "server_error": "api_error",
    "vector_store_timeout": "api_error",
}
_INPUT_CODES = ("invalid_", "image_", "unsupported_image", "empty_image", "failed_to_download_image")


def reasoning_parts(item):
    """The texts of a reasoning item: its summary parts, else its reasoning_text parts."""
    for field, part_type in REASONING_PARTS.items():
        texts = [part.get("text") or "" for part in item.get(field) or () if part.get("type") == part_type]
        if texts:
            return texts
    return []


def reasoning_text(item):
    return PART_SEPARATOR.join(text for text in reasoning_parts(item) if text)


def incomplete_reason(response):
    """Why an incomplete Response stopped (max_output_tokens, content_filter), or None."""
    if response.get("status") != "incomplete":
        return None
    return (response.get("incomplete_details") or {}).get("reason") or "max_output_tokens"


def failure(error):
    """The BridgeError of a failed Response's `error` object (or of an `error` stream event)."""
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    kind = _FAILURE_KINDS.get(code)
    if kind is None and isinstance(code, str) and code.startswith(_INPUT_CODES):
        kind = "invalid_request"
    if kind is None:
        kind = kind_for_type(error.get("type"))  # an error event's own type, if any; else api_error
    return from_openai({"error": {**error, "type": KINDS[kind].openai}})


TokenCounts = collections.namedtuple("TokenCounts", "input cached cache_write output reasoning")


def token_counts(usage):
    """A Response's usage; a count it does not give is 0 (cache_write and reasoning: None)."""
    usage = usage or {}
    details = usage.get("input_tokens_details") or {}
    return TokenCounts(
        usage.get("input_tokens") or 0,
        details.get("cached_tokens") or 0,
        details.get("cache_write_tokens"),
        usage.get("output_tokens") or 0,
        (usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
    )
