"""Prompt and completion content for a request's span, only when an operator turns it on
(settings.trace_content): the GenAI conventions' gen_ai.system_instructions,
gen_ai.input.messages and gen_ai.output.messages, each a JSON string cut at
settings.trace_content_limit characters.

Read from the client's request and the answer as the client got it, in any of the three
protocols; text is kept, other parts (images, documents, tool calls) only by their type and
tool names, so a span carries no file's bytes.
"""

from ..protocols import json_codec

CUT = "…[cut]"  # ends an attribute that was longer than the limit (then no longer valid JSON)


def cut(text, limit):
    """`text` within `limit` characters, marked when it had more."""
    return text if len(text) <= limit else text[: max(limit - len(CUT), 0)] + CUT


def attribute(value, limit):
    return cut(json_codec.dumps_text(value), limit)


def system_instructions(body):
    """Anthropic's `system` or Responses' `instructions` as the conventions' parts, or None."""
    system = body.get("system", body.get("instructions"))
    if system is None:
        return None
    return _parts(system) or None


def input_messages(body):
    """The request's messages (Chat, Messages) or input (Responses) as the conventions' messages."""
    messages = body.get("messages", body.get("input"))
    if isinstance(messages, str):
        return [{"role": "user", "parts": [{"type": "text", "content": messages}]}]
    if not isinstance(messages, list):
        return []
    found = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role") or message.get("type") or "user"
        found.append({"role": role if isinstance(role, str) else "user", "parts": _parts(message.get("content"))})
    return found


def output_text(item):
    """The text an answer, or a stream event or chunk, adds to what the client reads ("" if none)."""
    choices = item.get("choices")
    if isinstance(choices, list):  # Chat: a chunk's delta, an answer's message
        texts = []
        for choice in choices:
            if isinstance(choice, dict):
                said = choice.get("delta") or choice.get("message")
                if isinstance(said, dict) and isinstance(said.get("content"), str):
                    texts.append(said["content"])
        return "".join(texts)
    kind = item.get("type")
    if kind == "content_block_delta":  # Messages stream
        delta = item.get("delta")
        return delta["text"] if isinstance(delta, dict) and isinstance(delta.get("text"), str) else ""
    if kind == "response.output_text.delta":  # Responses stream
        return item["delta"] if isinstance(item.get("delta"), str) else ""
    if kind == "message" and isinstance(item.get("content"), list):  # a Messages answer
        return "".join(_texts(item["content"]))
    if isinstance(item.get("output"), list) and kind is None:  # a Responses answer (object: response)
        return "".join(
            text
            for output in item["output"]
            if isinstance(output, dict) and output.get("type") == "message"
            for text in _texts(output.get("content"))
        )
    return ""


def output_messages(text, finish_reason):
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    if finish_reason:
        message["finish_reason"] = finish_reason
    return [message]


def _parts(content):
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, list):
        return []
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "content": part})
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                parts.append({"type": "text", "content": part["text"]})
            elif part.get("type") in ("tool_use", "function_call"):
                parts.append({"type": "tool_call", "name": part.get("name")})
            else:
                parts.append({"type": str(part.get("type"))})
    return parts


def _texts(content):
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]
