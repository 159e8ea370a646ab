"""An Anthropic Messages answer in OpenAI's words: what the Chat and the Responses fronts
share (pure functions).

Anthropic's stop_reason as OpenAI's finish reason, a refusal's text, usage counted as
OpenAI counts it (input includes cache reads and writes; web searches kept under
Anthropic's own name, `server_tool_use.web_search_requests`), and a text block's web
page citations as (url, title) pairs. The Chat front (chat_to_messages/) and the
Responses front (responses_to_messages/) each shape these into their own answer.

A context overflow (`prompt is too long: ...`, `input length and `max_tokens`
exceed context limit: ...`) is a 400 with `code: "context_length_exceeded"`
and `param` naming the field that holds the conversation (`messages`, `input`),
what LangChain, the OpenAI Agents SDK and others look for to trim the
conversation; the message stays Anthropic's.
"""

import collections

from ..protocols import overflow

# Anthropic stop_reason -> OpenAI's finish_reason (Chat's; the Responses front reads length and
# content_filter from it). pause_turn (a server-tool loop that paused) has no OpenAI meaning
# beyond "the turn ended here": stop.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
STANDARD_REFUSAL = "The model declined to answer this request."


def openai_overflow(error, param="messages"):
    """An Anthropic context overflow with OpenAI's code for it; any other error as it came.
    `param` names the field that holds the conversation in the client's request."""
    if error.kind != "invalid_request" or overflow.find(error.upstream_detail) is None:
        return error
    return error.replaced(status=400, code="context_length_exceeded", param=param)


def url_citations(citations):
    """(url, title) of each web page a text block cites, once each: Anthropic's web search
    citations (`web_search_result_location`); citations of the client's own documents have no URL."""
    found = {}
    for citation in citations if isinstance(citations, list) else ():
        if isinstance(citation, dict) and citation.get("type") == "web_search_result_location":
            url, title = citation.get("url"), citation.get("title")
            if isinstance(url, str):
                found.setdefault((url, title if isinstance(title, str) else ""), None)
    return list(found)


def search_usage(usage):
    """Anthropic's count of web searches (each billed), which no OpenAI usage field holds: kept
    under Anthropic's own name, `server_tool_use.web_search_requests`, when there were any."""
    server_tools = usage.get("server_tool_use")
    searches = server_tools.get("web_search_requests") if isinstance(server_tools, dict) else None
    if type(searches) is not int or searches <= 0:
        return {}
    return {"server_tool_use": {"web_search_requests": searches}}


def refusal_text(stop_details):
    explanation = (stop_details or {}).get("explanation")
    return explanation if isinstance(explanation, str) and explanation else STANDARD_REFUSAL


TokenCounts = collections.namedtuple("TokenCounts", "input cache_read cache_write output thinking")


def token_counts(usage):
    """Anthropic usage as OpenAI counts it: input tokens include cache reads and writes.

    Anthropic's input_tokens exclude cached tokens; every OpenAI API counts them in.
    With server-side compaction the top-level counts are only the last
    iteration's; `iterations` holds every billed one, so those are summed.
    `thinking` is None when Anthropic does not say.
    """

    iterations = usage.get("iterations")
    parts = [part for part in (iterations if isinstance(iterations, list) else [usage]) if isinstance(part, dict)]

    def total(name):
        return sum([part.get(name) or 0 for part in parts])

    cache_read, cache_write = total("cache_read_input_tokens"), total("cache_creation_input_tokens")
    return TokenCounts(
        input=total("input_tokens") + cache_read + cache_write,
        cache_read=cache_read,
        cache_write=cache_write,
        output=total("output_tokens"),
        thinking=(usage.get("output_tokens_details") or {}).get("thinking_tokens"),
    )
