"""Web search for OpenAI clients: the openai SDK -> the bridge over HTTP -> the fake Anthropic upstream.

The upstream replays recorded web-search answers (tests/fixtures/anthropic/web_search.*):
Anthropic runs the searches itself, so the client must see cited text, never a tool call.
Web search costs per search, so it is on only where the operator turned it on
(BRIDGE_WEB_SEARCH, a deployment's `web_search`).
"""

import json

import openai
import pytest

from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.gateway.routes import load as load_routes
from bridge.settings import SettingsError
from tests.fake_upstream import fixture
from tests.helpers.accumulators import anthropic_stream_message
from tests.helpers.recorded import recorded
from tests.helpers.servers import bridge_env, metric

USER = {"role": "user", "content": "What is the weather in San Francisco today?"}
PLACE = {"city": "San Francisco", "region": "California", "country": "US", "timezone": "America/Los_Angeles"}
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
# The recorded answers, as the upstream sends them: a body, and a stream.
ANSWERS = {False: "anthropic/web_search.json", True: "anthropic/web_search.sse"}


def recorded_answer(streamed):
    name = ANSWERS[streamed]
    return anthropic_stream_message(name) if streamed else recorded(name)


def cited(message):
    """(text, url) of each text block of an Anthropic answer that cites a web page."""
    return {
        (block["text"], citation["url"])
        for block in message["content"]
        if block["type"] == "text"
        for citation in block.get("citations") or ()
    }


def queries(message):
    return [block["input"]["query"] for block in message["content"] if block["type"] == "server_tool_use"]


def upstream_tools(request):
    """The tools of a request the fake upstream received, without prompt caching's marks."""
    return [{k: v for k, v in tool.items() if k != "cache_control"} for tool in request.body.get("tools", ())]


def client_of(live):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)


@pytest.fixture
def search_bridge(start_bridge):
    """A bridge with web search on."""
    return start_bridge(BRIDGE_WEB_SEARCH="true")


@pytest.fixture
def searching(search_bridge):
    """An openai client of a bridge with web search on."""
    return client_of(search_bridge)


def counts_searches(live, direction, searches, before):
    """The searches an answer ran reach the metrics (once the request's record is written)."""
    wait_for(
        lambda: metric(live, "bridge_web_searches_total", direction=direction) == before + searches,
        "the web searches in the metrics",
    )


# -- Chat ------------------------------------------------------------------------------------


def chat_completion(client, streamed, **params):
    if not streamed:
        return client.chat.completions.create(model="gpt-4o", messages=[USER], **params)
    with client.chat.completions.stream(
        model="gpt-4o", messages=[USER], stream_options={"include_usage": True}, **params
    ) as stream:
        return stream.get_final_completion()


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_chat_sees_the_cited_text_as_url_citation_annotations_at_their_indexes(
    search_bridge, searching, fake, streamed
):
    before = metric(search_bridge, "bridge_web_searches_total", direction="chat_to_messages")
    fake.reply(fixture(ANSWERS[streamed]))
    completion = chat_completion(
        searching, streamed, web_search_options={"user_location": {"type": "approximate", "approximate": PLACE}}
    )
    answer = recorded_answer(streamed)
    [choice] = completion.choices
    message = choice.message
    assert message.content == "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    assert message.annotations and {a.type for a in message.annotations} == {"url_citation"}
    found = {
        (message.content[a.url_citation.start_index : a.url_citation.end_index], a.url_citation.url)
        for a in message.annotations
    }
    assert found == cited(answer), "each annotation spans the text its citation came with"
    assert all(a.url_citation.title for a in message.annotations)
    assert not message.tool_calls and choice.finish_reason == "stop", "a server-side search is no tool call"
    searches = answer["usage"]["server_tool_use"]["web_search_requests"]
    assert completion.usage.model_extra["server_tool_use"] == {"web_search_requests": searches}
    counts_searches(search_bridge, "chat_to_messages", searches, before)
    assert upstream_tools(fake.last) == [{**SEARCH, "user_location": {"type": "approximate", **PLACE}}]


def test_searches_count_in_the_metrics_also_when_a_chat_stream_carries_no_usage(search_bridge, searching, fake):
    before = metric(search_bridge, "bridge_web_searches_total", direction="chat_to_messages")
    fake.reply(fixture("anthropic/web_search.sse"))
    with searching.chat.completions.stream(model="gpt-4o", messages=[USER], web_search_options={}) as stream:
        assert stream.get_final_completion().usage is None
    searches = recorded_answer(True)["usage"]["server_tool_use"]["web_search_requests"]
    counts_searches(search_bridge, "chat_to_messages", searches, before)


def test_chat_names_what_anthropic_cannot_honour_and_a_bridge_without_web_search_drops_it(searching, openai_sdk, fake):
    fake.reply(fixture("anthropic/web_search.json"), fixture("anthropic/text.json"))
    options = {"search_context_size": "high"}
    raw = searching.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[USER], web_search_options=options
    )
    assert raw.headers["x-bridge-dropped-params"] == "web_search_options.search_context_size"
    assert upstream_tools(fake.last) == [SEARCH], "no location given, none sent"
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[USER], web_search_options=options
    )
    assert raw.headers["x-bridge-dropped-params"] == "web_search_options"
    assert "tools" not in fake.last.body, "a client cannot turn on what costs the operator per search"
    assert raw.parse().choices[0].message.content


def test_chat_without_web_search_options_sends_no_search_tool_even_where_it_is_on(searching, fake):
    fake.reply(fixture("anthropic/text.json"))
    searching.chat.completions.create(model="gpt-4o", messages=[USER])
    assert "tools" not in fake.last.body


@pytest.mark.parametrize(
    "options, field",
    [
        ("on", "web_search_options"),
        (
            {"user_location": {"type": "approximate", "approximate": "Paris"}},
            "web_search_options.user_location.approximate",
        ),
        ({"user_location": {"type": "exact", "approximate": PLACE}}, "web_search_options.user_location.type"),
    ],
    ids=["not an object", "location not an object", "location type"],
)
def test_bad_chat_web_search_options_are_a_400_in_openai_shape_and_the_service_stays_healthy(
    searching, fake, options, field
):
    with pytest.raises(openai.BadRequestError) as caught:
        searching.chat.completions.create(model="gpt-4o", messages=[USER], web_search_options=options)
    error = caught.value
    assert (error.status_code, error.param, error.type) == (400, field, "invalid_request_error")
    assert f"- {field}: " in error.message
    assert fake.requests == [], "nothing reaches the upstream"
    fake.reply(fixture("anthropic/web_search.json"))
    assert searching.chat.completions.create(model="gpt-4o", messages=[USER], web_search_options={}).choices


def test_a_function_named_like_the_search_tool_is_a_400_naming_the_clash(searching, fake):
    tool = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        searching.chat.completions.create(model="gpt-4o", messages=[USER], tools=[tool], web_search_options={})
    assert caught.value.param == "tools" and "web_search" in caught.value.message
    assert fake.requests == []


# -- Responses -------------------------------------------------------------------------------

HOSTED = {
    "type": "web_search",
    "filters": {"allowed_domains": ["weather.com", "accuweather.com"]},
    "user_location": {"type": "approximate", **PLACE},
}


def response_of(client, streamed, tools):
    if not streamed:
        return client.responses.create(
            model="gpt-5.5", input="What is the weather in San Francisco today?", tools=tools
        ), []
    with client.responses.stream(
        model="gpt-5.5", input="What is the weather in San Francisco today?", tools=tools
    ) as stream:
        events = list(stream)
        return stream.get_final_response(), events


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_responses_sees_cited_output_text_and_each_search_as_a_web_search_call(
    search_bridge, searching, fake, streamed
):
    before = metric(search_bridge, "bridge_web_searches_total", direction="responses_to_messages")
    fake.reply(fixture(ANSWERS[streamed]))
    response, events = response_of(searching, streamed, [HOSTED])
    answer = recorded_answer(streamed)
    kinds = [item.type for item in response.output]
    assert "function_call" not in kinds and kinds.count("web_search_call") == len(queries(answer))
    searches = [item for item in response.output if item.type == "web_search_call"]
    assert [(s.action.type, s.action.query, s.status) for s in searches] == [
        ("search", query, "completed") for query in queries(answer)
    ]
    parts = [part for item in response.output if item.type == "message" for part in item.content]
    found = {
        (part.text[note.start_index : note.end_index], note.url)
        for part in parts
        for note in part.annotations
        if note.type == "url_citation"
    }
    assert found == cited(answer)
    assert response.output_text == "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    searches_billed = answer["usage"]["server_tool_use"]["web_search_requests"]
    assert response.usage.model_extra["server_tool_use"] == {"web_search_requests": searches_billed}
    counts_searches(search_bridge, "responses_to_messages", searches_billed, before)
    assert upstream_tools(fake.last) == [
        SEARCH | {"allowed_domains": ["weather.com", "accuweather.com"], "user_location": HOSTED["user_location"]}
    ]
    if streamed:
        names = [event.type for event in events]
        assert names.count("response.output_text.annotation.added") == sum(len(p.annotations) for p in parts)
        for phase in ("in_progress", "searching", "completed"):
            assert names.count(f"response.web_search_call.{phase}") == len(searches)


def test_responses_without_web_search_drops_and_names_the_tool_and_one_asking_for_cached_results_too(
    searching, bridge, fake
):
    client = openai.OpenAI(base_url=f"{bridge.url}/v1", api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/text.json"), fixture("anthropic/text.json"))
    raw = client.responses.with_raw_response.create(model="gpt-5.5", input="Hi", tools=[HOSTED])
    assert raw.headers["x-bridge-dropped-params"] == "tools.web_search"
    assert "tools" not in fake.last.body
    cached = {"type": "web_search", "external_web_access": False, "search_context_size": "low"}
    raw = searching.responses.with_raw_response.create(model="gpt-5.5", input="Hi", tools=[cached])
    assert raw.headers["x-bridge-dropped-params"] == "tools.web_search.external_web_access"
    assert "tools" not in fake.last.body, "Anthropic searches live: a client asking for cached results gets none"


def test_a_bad_responses_web_search_tool_is_a_400_in_openai_shape_and_the_service_stays_healthy(searching, fake):
    bad = {"type": "web_search", "filters": {"allowed_domains": "weather.com"}}
    with pytest.raises(openai.BadRequestError) as caught:
        searching.responses.create(model="gpt-5.5", input="Hi", tools=[bad])
    assert caught.value.param == "tools.0.filters.allowed_domains" and fake.requests == []
    fake.reply(fixture("anthropic/web_search.json"))
    assert searching.responses.create(model="gpt-5.5", input="Hi", tools=[{"type": "web_search"}]).output_text


# -- where it is on --------------------------------------------------------------------------


def test_a_deployment_turns_web_search_on_for_its_route_only(start_bridge, fake):
    routes = {
        "routes": [
            {
                "models": ["claude-*"],
                "deployments": [{"name": "search", "protocol": "anthropic", "base_url": fake.url, "web_search": True}],
            }
        ]
    }
    client = client_of(start_bridge(BRIDGE_ROUTES=json.dumps(routes), BRIDGE_WEB_SEARCH_MAX_USES="2"))
    fake.reply(fixture("anthropic/web_search.json"), fixture("anthropic/text.json"))
    for model in ("claude-sonnet-4-5", "gpt-4o"):
        client.chat.completions.create(model=model, messages=[USER], web_search_options={})
    assert [upstream_tools(request) for request in fake.requests] == [[SEARCH | {"max_uses": 2}], []]


@pytest.mark.parametrize(
    "environ, words",
    [
        ({"BRIDGE_WEB_SEARCH": "maybe"}, "BRIDGE_WEB_SEARCH: must be true or false"),
        ({"BRIDGE_WEB_SEARCH_MAX_USES": "0"}, "BRIDGE_WEB_SEARCH_MAX_USES: must be at least 1"),
    ],
)
def test_a_bad_web_search_setting_stops_start_up_naming_it(fake, environ, words):
    with pytest.raises(SettingsError, match=words):
        settings_module.load(bridge_env(fake, **environ))


@pytest.mark.parametrize(
    "deployment, words",
    [
        ({"protocol": "anthropic", "web_search": "yes"}, "web_search must be true or false"),
        ({"protocol": "openai-chat", "web_search": True}, "web_search applies to anthropic deployments only"),
    ],
)
def test_a_bad_deployment_web_search_switch_is_refused_naming_it(fake, tmp_path, deployment, words):
    routes = {"routes": [{"models": ["m"], "deployments": [{"name": "d", "base_url": fake.url, **deployment}]}]}
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(routes))
    settings = settings_module.load(bridge_env(fake, BRIDGE_ROUTES=str(path)))
    with pytest.raises(SettingsError, match=words):
        load_routes(settings, {})
