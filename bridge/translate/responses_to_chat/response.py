"""Chat Completions answer -> OpenAI Responses `response` object (pure functions).

The answer is read as every Chat pair reads one (chat_response.py: exactly one choice,
content parts, reasoning fields); the response object and its items are responses_events.py's.
`output` holds, in this order:

- the reasoning (`reasoning_content`, `reasoning`, Mistral's thinking parts) -> a `reasoning`
  item whose `encrypted_content` carries the text in bridge's form (protocols/reasoning.py),
  for the next request to send back to upstreams that want it; the text is shown as
  `summary_text` only when the request asked for a summary.
- `content` -> an `output_text` part of a `message` item; `refusal` -> a `refusal` part of
  it; finish_reason `content_filter` with no refusal given -> a refusal part saying so.
- each tool call -> a `function_call` whose `arguments` are the upstream's text as it came
  (`{}` for none), `call_id` the upstream's id (a fresh `call_` one when it sent none),
  `namespace` for a namespaced tool; for a custom tool, a `custom_tool_call` whose `input`
  is the text of the `{"input": "..."}` the upstream wrote (custom_call_input). A call
  without a name is a 502.

finish_reason `length` -> `status: "incomplete"`, `incomplete_details.reason:
"max_output_tokens"` and the last item `incomplete`; everything else is `completed`. Usage
follows OpenAI: `input_tokens` the upstream's prompt tokens (cache reads included),
`cached_tokens` (DeepSeek's `prompt_cache_hit_tokens` too), `cache_write_tokens`,
`output_tokens` with `reasoning_tokens`. The stream translator (stream.py) builds its items
and the final response from these same helpers.

A context overflow, however the server words it (overflow.py), is a 400 with
`code: "context_length_exceeded"` and `param: "input"` (responses_overflow), what Codex
stops on and says the context window is full; the message stays the server's.
"""

import json

from ...protocols import ids, overflow
from ...protocols.reasoning import chat_reasoning
from ..chat_response import read_answer, usage_counts
from ..responses_events import (
    InputText,
    call_item,
    client_tool,
    custom_input,
    envelope,
    item_id,
    mark_incomplete,
    message_item,
    outcome,
    output_text,
    reasoning_item,
    refusal_part,
    usage,
)

# The refusal part of an answer the upstream's content filter stopped without saying more.
FILTERED = "The upstream's content filter stopped the answer."


def to_response(completion, context):
    """One Chat completion as one Response."""
    answer = read_answer(completion)
    choice, reasoning, text, refusal = answer.choice, answer.reasoning, answer.text, answer.refusal
    if not refusal and choice.get("finish_reason") == "content_filter":
        refusal = FILTERED
    output = []
    if reasoning:
        output.append(reasoning_output(context, 0, reasoning))
    if text or refusal:
        content = ([output_text(text)] if text else []) + ([refusal_part(refusal)] if refusal else [])
        output.append(message_item(item_id(context, "message", len(output)), content))
    for call in answer.calls:
        output.append(call_output(context, len(output), call.id, call.name, call.arguments))
    status, incomplete_details = outcome(choice.get("finish_reason"))
    if status == "incomplete":
        mark_incomplete(output)
    answer_usage = chat_usage(completion.get("usage"))
    return envelope(context, status, output, usage=answer_usage, incomplete_details=incomplete_details)


def reasoning_output(context, output_index, text):
    """The reasoning item for a Chat upstream's reasoning text."""
    return reasoning_item(item_id(context, "reasoning", output_index), text, chat_reasoning(text), context.summary)


def call_output(context, output_index, upstream_id, upstream_name, arguments, status="completed"):
    """A tool call as a function_call (its arguments as the upstream wrote them) or, for a custom
    tool, a custom_tool_call (the text of its `{"input": ...}`)."""
    call_id = upstream_id if isinstance(upstream_id, str) and upstream_id else f"call_{ids.random_hex()}"
    if client_tool(context, upstream_name)["kind"] == "custom":
        value = custom_call_input(arguments)
    else:
        value = arguments if arguments.strip() else "{}"
    return call_item(context, output_index, call_id, upstream_name, value, status)


def custom_call_input(arguments):
    """A custom tool's input text from the `{"input": "..."}` the upstream wrote: read whole, or,
    cut short, decoded as far as it goes (as the stream decodes it); arguments in another form
    are the input as they are."""
    try:
        return custom_input(json.loads(arguments))
    except (ValueError, RecursionError):
        pass
    decoder = InputText()
    text = decoder.feed(arguments)
    return text if decoder.start is not None else arguments


def chat_usage(openai_usage):
    """Chat usage in the Responses shape (input includes cached tokens in both)."""
    counts = usage_counts(openai_usage)
    return usage(counts.prompt, counts.cached, counts.written, counts.output, counts.reasoning)


def responses_overflow(error):
    """A Chat server's context overflow as OpenAI reports one; any other error as it came."""
    if overflow.reported(error) is None:
        return error
    return error.replaced(kind="invalid_request", status=400, code="context_length_exceeded", param="input")
