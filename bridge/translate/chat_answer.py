"""A Chat Completions answer's pieces, as every pair with a Chat client builds them (pure
functions): the answer around its message, its id, a tool call, and usage as OpenAI counts it."""

from ..protocols import json_codec


def completion(upstream_id, context, message, finish_reason, usage):
    """A non-streamed Chat answer of one choice, under the model name the client asked for."""
    return {
        "id": completion_id(upstream_id),
        "object": "chat.completion",
        "created": context.created,
        "model": context.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": usage,
    }


def chunk_head(upstream_id, context):
    """What every chunk of a streamed Chat answer repeats: its id, object, time and model."""
    return {
        "id": completion_id(upstream_id),
        "object": "chat.completion.chunk",
        "created": context.created,
        "model": context.model,
    }


def chunk(head, delta, finish_reason=None):
    """One chunk of the answer's one choice."""
    return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def text_chunk_frame(head):
    """A text chunk as the relay frames it for a Chat client (serve/streaming.py), as the bytes
    before and after its text: a plain text (json_codec.plain) goes between as it is (the fast
    path, translator.py)."""
    data = json_codec.dumps(chunk(head, {"content": ""}))
    before, _, after = data.rpartition(b'"content":""')
    return b"data: " + before + b'"content":"', b'"' + after + b"\n\n"


def completion_id(upstream_id):
    """The upstream answer's own id under Chat's prefix: the same answer, the same id, streamed or not."""
    return f"chatcmpl-{upstream_id or 'bridge'}"


def tool_call(call_id, name, arguments):
    """A Chat tool call; `arguments` is JSON text."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def usage_of(prompt, completion, cached, reasoning=None):
    """Chat's usage: `prompt` includes the `cached` tokens, `completion` the `reasoning` ones
    (None: the upstream did not say)."""
    out = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out
