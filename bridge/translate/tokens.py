"""count_tokens for an upstream that has no counter of its own, and the same estimate of a
stream whose upstream reports no usage.

An estimate, computed locally (no network, no tokenizer download), that errs
high: counting late makes Claude Code compact too late and overflow the
context window, counting a little early only wastes a little context.

Method:
- Text is ceil(characters / 3) tokens; outside ASCII it is UTF-8 bytes / 3,
  so a CJK character counts about one token. Measured against the recorded
  OpenAI usage of known prompts: 12,549 characters of digit-heavy catalogue
  text were 4,020 tokens (3.1 characters a token; estimate 4,191, +4%);
  openai-python's two-tool request was 149 tokens (estimate 294, about 2x:
  OpenAI renders tool schemas more compactly than their JSON). English
  prose runs near 4 characters a token (estimate ~+30%).
- Everything the model sees counts: the system prompt (and role:"system"
  messages), every text block, tool_use names and inputs (as JSON),
  tool_result content, thinking text, each tool's name, description and
  input_schema (as JSON), the output_config JSON schema.
- Images count a fixed 1,600 tokens (Anthropic's size cap, ~1.15 MP; OpenAI
  bills a 1024x1024 high-detail image 765). A PDF counts 2,000 tokens a page
  (text plus a page image), pages found in the file; a text document counts
  its text.
- Framing: 4 tokens a message, 10 a tool, 3 for the reply's priming.
- A Chat request (chat_input_tokens) counts the same way; a stream's output
  (size_tokens) is the size of the text, thinking and tool arguments it
  carried, summed over its deltas and then divided (one token a delta would
  count a one-token delta three times).
"""

import binascii
import re

from ..protocols import json_codec

CHARS_PER_TOKEN = 3
IMAGE_TOKENS = 1600
PDF_PAGE_TOKENS = 2000
MESSAGE_TOKENS = 4
TOOL_TOKENS = 10
REPLY_TOKENS = 3
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def count_tokens(body):
    """Estimated input tokens of a Messages request (the body of /v1/messages or count_tokens)."""
    total = REPLY_TOKENS + content_tokens(body.get("system"))
    for message in body["messages"]:
        total += MESSAGE_TOKENS + content_tokens(message["content"])
    for tool in body.get("tools") or []:
        total += TOOL_TOKENS + _tool_tokens(tool)
    output_format = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if output_format:
        total += json_tokens(output_format)
    return total


def text_tokens(text):
    if not text:
        return 0
    # text_size, written out: this runs for every text delta of a stream translated to Anthropic
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // CHARS_PER_TOKEN)  # ceil, without a float


def text_size(text):
    """What a text weighs in the estimate: its characters, or outside ASCII its UTF-8 bytes."""
    # surrogatepass: an upstream's lone surrogate (half an emoji) counts its 3 bytes, not a crash
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def size_tokens(size):
    """Tokens of texts whose text_size adds up to `size`."""
    return -(-size // CHARS_PER_TOKEN)


def json_tokens(value):
    return text_tokens(json_codec.dumps_text(value))


def content_tokens(content):
    """Tokens of a string or a list of content blocks."""
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    return sum(_block_tokens(block) for block in content)


def _block_tokens(block):
    kind = block.get("type")
    if kind == "text":
        return text_tokens(block["text"])
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "document":
        return _document_tokens(block)
    if kind == "tool_use":
        return text_tokens(block["name"]) + json_tokens(block["input"])
    if kind == "tool_result":
        return content_tokens(block.get("content"))
    if kind == "thinking":
        return text_tokens(block["thinking"])
    if kind == "redacted_thinking":
        return text_tokens(block["data"])
    return json_tokens(block)


def _document_tokens(block):
    source = block["source"]
    title = text_tokens(block.get("title") or "") + text_tokens(block.get("context") or "")
    if source["type"] == "text":
        return title + text_tokens(source["data"])
    if source["type"] == "content":
        return title + content_tokens(source["content"])
    if source["type"] == "base64":
        return title + PDF_PAGE_TOKENS * _pdf_pages(source["data"])
    return title + PDF_PAGE_TOKENS


def chat_input_tokens(body):
    """Estimated input tokens of a Chat Completions request as its client wrote it (a passed-through
    stream's, unvalidated: what has not the expected shape counts as its JSON)."""
    total = REPLY_TOKENS
    for message in _listed(body.get("messages")):
        total += MESSAGE_TOKENS + (_chat_message_tokens(message) if isinstance(message, dict) else json_tokens(message))
    for tool in _listed(body.get("tools")):
        function = tool.get("function") if isinstance(tool, dict) else None
        total += TOOL_TOKENS + (_tool_tokens(function) if isinstance(function, dict) else json_tokens(tool))
    if body.get("response_format"):
        total += json_tokens(body["response_format"])
    return total


def responses_input_tokens(body):
    """Estimated input tokens of a Responses request as its client wrote it (unvalidated, as
    chat_input_tokens): instructions, input items and tools; an item or part of an unknown shape
    counts as its JSON."""
    total = REPLY_TOKENS + (text_tokens(body["instructions"]) if isinstance(body.get("instructions"), str) else 0)
    items = body.get("input")
    if isinstance(items, str):
        return total + MESSAGE_TOKENS + text_tokens(items) + _responses_tools_tokens(body)
    for item in _listed(items):
        total += MESSAGE_TOKENS + (_item_tokens(item) if isinstance(item, dict) else json_tokens(item))
    return total + _responses_tools_tokens(body)


def _responses_tools_tokens(body):
    total = sum(
        TOOL_TOKENS + (_tool_tokens(t) if isinstance(t, dict) else json_tokens(t)) for t in _listed(body.get("tools"))
    )
    text = body.get("text")
    return total + (json_tokens(text["format"]) if isinstance(text, dict) and text.get("format") else 0)


# A Responses input item's text fields, by item type (the rest of an item is ids and statuses).
_ITEM_TEXTS = {
    "function_call": ("name", "arguments"),
    "custom_tool_call": ("name", "input"),
    "function_call_output": ("output",),
    "custom_tool_call_output": ("output",),
}


def _item_tokens(item):
    kind = item.get("type", "message")
    if kind == "message":
        return _chat_content_tokens(item.get("content"))
    if kind == "reasoning":
        summary = [part.get("text") for part in _listed(item.get("summary")) if isinstance(part, dict)]
        encrypted = item.get("encrypted_content")
        # The encrypted reasoning stands for the reasoning the model wrote, about its own size again.
        return sum(text_tokens(text) for text in summary if isinstance(text, str)) + (
            text_tokens(encrypted) if isinstance(encrypted, str) else 0
        )
    fields = _ITEM_TEXTS.get(kind)
    if fields is None:
        return json_tokens(item)
    total = 0
    for value in map(item.get, fields):
        total += text_tokens(value) if isinstance(value, str) else _chat_content_tokens(value)
    return total


def _tool_tokens(tool):
    """An Anthropic tool, or a Chat tool's function: its name, description, and the rest (the
    schema) as JSON."""
    named = [tool.get(k) for k in ("name", "description")]
    total = sum(text_tokens(text) for text in named if isinstance(text, str))
    return total + json_tokens({k: v for k, v in tool.items() if k not in ("name", "description", "cache_control")})


def _listed(value):
    return value if isinstance(value, list) else ()


def _chat_message_tokens(message):
    total = _chat_content_tokens(message.get("content"))
    for field in ("reasoning_content", "refusal", "name"):
        if isinstance(message.get(field), str):
            total += text_tokens(message[field])
    for call in _listed(message.get("tool_calls")):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and all(isinstance(function.get(k), str) for k in ("name", "arguments")):
            total += text_tokens(function["name"]) + text_tokens(function["arguments"])
        else:
            total += json_tokens(call)
    return total


# Chat's text part, and the Responses API's.
_TEXT_PARTS = ("text", "input_text", "output_text")


def _chat_content_tokens(content):
    """Tokens of a Chat message's (or Responses item's) content: a string, or a list of parts."""
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    if not isinstance(content, list):
        return json_tokens(content)
    total = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            total += text_tokens(part["text"])
        elif kind in ("image_url", "input_image"):
            total += IMAGE_TOKENS
        elif kind == "file" and isinstance(part.get("file"), dict) and isinstance(part["file"].get("file_data"), str):
            total += PDF_PAGE_TOKENS * _pdf_pages(part["file"]["file_data"].partition("base64,")[2])
        else:
            total += json_tokens(part)
    return total


def _pdf_pages(data):
    """Pages found in a client's base64 PDF. It costs the decoded bytes alone (binascii reads the
    text in place, and the pages are counted, not listed), however many pages a file claims."""
    try:
        raw = binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return 1
    return max(1, sum(1 for _ in _PDF_PAGE.finditer(raw)))
