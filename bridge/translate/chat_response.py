"""Reading a Chat Completions answer: what every pair with a Chat upstream shares (pure functions).

An answer in OpenAI's shape, as OpenAI-compatible servers really send it: exactly one choice
(Chat `choices` are alternative answers, which no client of another protocol can take);
`content` a string or an array of text and thinking parts (Mistral); reasoning as
`reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (Groq, OpenRouter, Ollama);
tool `arguments` a JSON string, or the object itself (llama-server, TGI); usage with its
cache and reasoning counts where the server gives them (DeepSeek's `prompt_cache_hit_tokens`
too).
"""

import collections

from ..protocols import json_codec, shapes
from ..protocols.errors import BridgeError, from_openai

Answer = collections.namedtuple("Answer", "choice reasoning text refusal calls")
Call = collections.namedtuple("Call", "id name arguments")


def read_answer(completion):
    """A non-streamed completion as its Answer: the one choice, its reasoning, text and refusal,
    and its tool calls (Call, `arguments` as JSON text). An error in a 200 is raised; a call
    without a name is a 502, as no client can run it."""
    if not isinstance(completion, dict):
        raise BridgeError("api_error", "upstream answered with JSON that is not an object", status=502)
    if completion.get("error"):
        raise from_openai(completion)
    shapes.chat_completion(completion)
    choice = only_choice(completion.get("choices"))
    message = json_object(choice.get("message"))
    texts = {"text": [], "thinking": []}
    for kind, text in content_parts(message.get("content")):
        texts[kind].append(text)
    calls = []
    for position, call in enumerate(call for call in message.get("tool_calls") or [] if isinstance(call, dict)):
        function = json_object(call.get("function"))
        if not function.get("name"):
            raise BridgeError("api_error", f"upstream returned tool call {position} without a name", status=502)
        calls.append(Call(call.get("id"), function["name"], arguments_text(function.get("arguments"))))
    return Answer(
        choice=choice,
        reasoning=reasoning_text(message) + "".join(texts["thinking"]),
        text="".join(texts["text"]),
        refusal=message.get("refusal") if isinstance(message.get("refusal"), str) else "",
        calls=calls,
    )


def only_choice(choices):
    """The single choice of an answer; alternatives cannot be one answer of the client's."""
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        count = len(choices) if isinstance(choices, list) else 0
        raise BridgeError(
            "api_error",
            f"upstream returned {count} choices; the client's answer carries "
            "exactly one (the bridge never asks for n>1)",
            status=502,
        )
    return choices[0]


def content_parts(content):
    """(kind, text) pairs of a Chat `content`: a string, or an array of text/thinking parts (Mistral)."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    parts = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(("text", part["text"]))
        elif part.get("type") == "thinking":
            inner = part.get("thinking")
            if isinstance(inner, list):
                inner = "".join(p.get("text", "") for p in inner if isinstance(p, dict))
            if isinstance(inner, str) and inner:
                parts.append(("thinking", inner))
    return [(kind, text) for kind, text in parts if text]


def json_object(value):
    """`value` if it is a JSON object, else {}: a malformed part of an answer carries nothing."""
    return value if isinstance(value, dict) else {}


def reasoning_text(message):
    """`reasoning_content` (DeepSeek, vLLM, llama.cpp) or else `reasoning` (Groq, OpenRouter, Ollama)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def arguments_text(arguments):
    """`arguments` as JSON text: OpenAI sends a string, llama-server and TGI have sent the object itself."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json_codec.dumps_text(arguments)


UsageCounts = collections.namedtuple("UsageCounts", "prompt cached written output reasoning")


def usage_counts(openai_usage):
    """Chat usage as counts: `prompt` includes what was read from (`cached`) or written to
    (`written`) cache, `output` what was reasoned (`reasoning`); what a server leaves out is 0."""
    openai_usage = json_object(openai_usage)
    prompt_details = json_object(openai_usage.get("prompt_tokens_details"))
    output_details = json_object(openai_usage.get("completion_tokens_details"))
    return UsageCounts(
        prompt=_count(openai_usage.get("prompt_tokens")),
        cached=_count(prompt_details.get("cached_tokens")) or _count(openai_usage.get("prompt_cache_hit_tokens")),
        written=_count(prompt_details.get("cache_write_tokens")),
        output=_count(openai_usage.get("completion_tokens")),
        reasoning=_count(output_details.get("reasoning_tokens")),
    )


def _count(value):
    return value if type(value) is int and value > 0 else 0  # JSON's integers, not true
