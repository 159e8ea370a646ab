"""Request limits (bridge/policy/limits.py): JSON values counted before parsing, in the body and in what is
decoded from inside it (tool-call arguments, reasoning items), messages, content blocks and tools
counted before validation, and the large-body slots; each refusal a 413 (or 503) in the client's
own protocol, with the service healthy afterwards."""

import base64
import contextvars
import json
import socket

import pytest
import requests
from hypothesis import given, settings, strategies

from bench.processes import wait_for
from bridge.policy import limits
from bridge.protocols import json_values
from bridge.protocols.errors import BridgeError
from bridge.settings import Settings
from tests.fake_upstream import FIXTURES, fixture
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error

CLIENT_CAPTURES = FIXTURES / "clients"


def values_in(value):
    """The JSON values a parsed document holds, counted the slow way: the document itself and
    every value inside it."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return 1 + sum(values_in(child) for child in children)


# Strings full of what JSON's structure is made of, escapes included, so that every step of
# too_many_values is taken: keys and values with quotes, backslashes, commas and brackets.
_TEXT = strategies.text(alphabet=strategies.sampled_from(list('ab,:{}[]"\\ \n') + ["é"]), max_size=6)
_JSON = strategies.recursive(
    strategies.none() | strategies.booleans() | strategies.integers() | strategies.floats(allow_nan=False) | _TEXT,
    lambda inner: strategies.lists(inner, max_size=4) | strategies.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, strategies.sampled_from([None, 2]), strategies.booleans())
def test_too_many_values_is_exact_at_every_limit(value, indent, ascii_only):
    raw = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    count = values_in(value)
    for limit in {0, count // 3, count - 1, count, count + 1}:
        assert json_values.too_many_values(raw, limit) == (count > limit), (raw, count, limit)


def test_code_full_of_brackets_and_commas_in_strings_is_not_mistaken_for_values():
    """The count above the limit with what is inside strings, under it without."""
    code = "f(a, b)[0] = {x: [y, z]}, " * 40
    raw = json.dumps({"messages": [{"role": "user", "content": code}] * 5}).encode()
    limit = values_in(json.loads(raw))
    assert raw.count(b",") + raw.count(b"{") + raw.count(b"[") > 10 * limit
    assert not json_values.too_many_values(raw, limit)
    assert json_values.too_many_values(raw, limit - 1)


def test_more_strings_than_twice_the_limit_is_over_it():
    raw = json.dumps([":", "[", "{"] * 1000).encode()
    assert json_values.too_many_values(raw, 1000) and not json_values.too_many_values(raw, 3001)


# -- counts of the parsed request, per front ------------------------------------------------------

LOW = Settings(max_messages=4, max_content_blocks=6, max_tools=2, max_json_values=1000)
TEXT = {"type": "text", "text": "a"}


# (the front's list of messages, a body holding n of what a limit counts, the limit, its setting)
COUNTED = [
    ("messages", lambda n: {"messages": [{"role": "user", "content": "hi"}] * n}, 4, "BRIDGE_MAX_MESSAGES"),
    ("input", lambda n: {"input": [{"role": "user", "content": "hi"}] * n}, 4, "BRIDGE_MAX_MESSAGES"),
    ("messages", lambda n: {"messages": [{"role": "user", "content": [TEXT] * n}]}, 6, "BRIDGE_MAX_CONTENT_BLOCKS"),
    ("messages", lambda n: {"system": [TEXT] * n, "messages": []}, 6, "BRIDGE_MAX_CONTENT_BLOCKS"),
    (
        "messages",
        lambda n: {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": [TEXT] * (n - 1)}]}]},
        6,
        "BRIDGE_MAX_CONTENT_BLOCKS",
    ),
    ("input", lambda n: {"input": [{"type": "function_call_output", "output": [TEXT] * n}]}, 6, "CONTENT_BLOCKS"),
    ("messages", lambda n: {"messages": [], "tools": [{"name": "t"}] * n}, 2, "BRIDGE_MAX_TOOLS"),
]


@pytest.mark.parametrize("items, holding, limit, setting", COUNTED)
def test_a_request_at_a_limit_passes_and_one_over_is_refused_naming_the_setting(items, holding, limit, setting):
    limits.check_parsed(holding(limit), items, LOW)
    with pytest.raises(BridgeError) as refused:
        limits.check_parsed(holding(limit + 1), items, LOW)
    assert refused.value.status == 413 and refused.value.kind == "request_too_large"
    assert setting in refused.value.message


def captured_requests():
    """Every request body a real client sent (tests/fixtures/clients), by file name."""
    for path in sorted(CLIENT_CAPTURES.rglob("*.json")):
        capture = json.loads(path.read_text())
        if isinstance(capture, dict) and isinstance(capture.get("body"), dict):
            yield pytest.param(capture["body"], id=path.name)


@pytest.mark.parametrize("body", list(captured_requests()))
def test_every_real_client_request_is_within_a_hundredth_of_the_default_limits(body):
    hundredth = Settings(
        max_json_values=Settings.max_json_values // 100,
        max_messages=Settings.max_messages // 100,
        max_content_blocks=Settings.max_content_blocks // 100,
        max_tools=Settings.max_tools // 100,
    )
    assert not json_values.too_many_values(json.dumps(body).encode(), hundredth.max_json_values)
    assert values_in(body) <= hundredth.max_json_values
    limits.check_parsed(body, "input" if "input" in body else "messages", hundredth)


# -- over HTTP, in each client's protocol ---------------------------------------------------------

FRONTS = [
    ("/v1/chat/completions", "messages", "anthropic/text.json"),
    ("/v1/responses", "input", "anthropic/text.json"),
    ("/v1/messages", "messages", "openai/text.json"),
]


def request_body(path, items, count):
    body = {"model": "claude-sonnet-4-5", items: [{"role": "user", "content": "hi"}] * count}
    return body if items == "input" else {**body, "max_tokens": 16}


def refused_in_its_protocol(path, response, status):
    if path == "/v1/messages":
        kind = {413: "request_too_large", 503: "overloaded_error"}[status]
        return is_anthropic_error(response, status, kind)
    return is_openai_error(response, status)


@pytest.mark.parametrize("path, items, reply", FRONTS)
def test_over_http_each_front_answers_at_the_limit_and_refuses_one_more(start_bridge, fake, path, items, reply):
    bridge = start_bridge(BRIDGE_MAX_MESSAGES=3)
    fake.reply(fixture(reply))
    assert requests.post(f"{bridge.url}{path}", json=request_body(path, items, 3), headers=ANTHROPIC_HEADERS).ok
    over = requests.post(f"{bridge.url}{path}", json=request_body(path, items, 4), headers=ANTHROPIC_HEADERS)
    assert refused_in_its_protocol(path, over, 413)
    assert "4 " in over.json()["error"]["message"] and "BRIDGE_MAX_MESSAGES" in over.json()["error"]["message"]
    assert len(fake.requests) == 1  # nothing went upstream for the refused one
    fake.reply(fixture(reply))
    assert requests.post(f"{bridge.url}{path}", json=request_body(path, items, 1), headers=ANTHROPIC_HEADERS).ok


@pytest.mark.parametrize("path, items, reply", FRONTS)
def test_over_http_too_many_json_values_is_refused_before_parsing(start_bridge, fake, path, items, reply):
    bridge = start_bridge(BRIDGE_MAX_JSON_VALUES=1000)
    at = request_body(path, items, 1)
    at["padding"] = [1] * (1000 - values_in(at) - 1)
    fake.reply(fixture(reply))
    assert requests.post(f"{bridge.url}{path}", json=at, headers=ANTHROPIC_HEADERS).ok
    at["padding"].append(1)
    over = requests.post(f"{bridge.url}{path}", json=at, headers=ANTHROPIC_HEADERS)
    assert refused_in_its_protocol(path, over, 413)
    assert "BRIDGE_MAX_JSON_VALUES" in over.json()["error"]["message"]
    assert len(fake.requests) == 1


def slot_taken(bridge):
    """Whether the in-process bridge's one large-body slot is held, asked without holding it."""
    slots = bridge.app.extensions["bridge"].large_body_slots
    if slots.acquire(blocking=False):
        slots.release()
        return False
    return True


def test_a_large_body_that_finds_no_slot_free_is_a_503_with_retry_after_in_each_protocol(start_bridge, fake):
    """One slot, no wait: a large body still arriving holds it; the next is told to come back."""
    bridge = start_bridge(BRIDGE_LARGE_BODY_SLOTS=1, BRIDGE_LARGE_BODY_WAIT=0, BRIDGE_LARGE_BODY_BYTES=1024)
    large = json.dumps(request_body("/v1/chat/completions", "messages", 200)).encode()
    port = int(bridge.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(large)}\r\n\r\n".encode()
            + large[:100]
        )
        wait_for(lambda: slot_taken(bridge), "the slow request to take the slot")
        for path, items, _ in FRONTS:
            refused = requests.post(
                f"{bridge.url}{path}",
                data=json.dumps(request_body(path, items, 200)),
                headers={**ANTHROPIC_HEADERS, "content-type": "application/json"},
            )
            assert refused_in_its_protocol(path, refused, 503), refused.text
            assert refused.headers["retry-after"] == "1" and "BRIDGE_LARGE_BODY_SLOTS" in refused.text
        small = request_body("/v1/chat/completions", "messages", 1)
        fake.reply(fixture("anthropic/text.json"))
        assert requests.post(f"{bridge.url}/v1/chat/completions", json=small).ok  # small bodies take no slot
        fake.reply(fixture("anthropic/text.json"))
        slow.sendall(large[100:])
        assert slow.recv(12) == b"HTTP/1.1 200"
    fake.reply(fixture("anthropic/text.json"))
    assert requests.post(
        f"{bridge.url}/v1/chat/completions", data=large, headers={"content-type": "application/json"}
    ).ok


# -- what is decoded from inside a request --------------------------------------------------------


def padded(values):
    """A body holding `values` JSON values, its count exact: too many commas for a cheaper bound."""
    return json.dumps({"pad": [1] * (values - 2)}).encode()


def test_decoded_documents_share_the_limit_with_the_body_they_came_in():
    def run():
        limits.check_values(padded(700), 1000)
        assert json_values.loads_decoded(json.dumps([1] * 299), "one") == [1] * 299  # 300 values: 1,000 in all
        with pytest.raises(BridgeError) as refused:
            json_values.loads_decoded("1", "a tool call's arguments")
        return refused.value

    refused = contextvars.copy_context().run(run)
    assert refused.status == 413 and refused.kind == "request_too_large"
    assert "decoded from a tool call's arguments" in refused.message and "BRIDGE_MAX_JSON_VALUES" in refused.message


@pytest.mark.parametrize("size", [10, 999, 1500, 1999, 2400])
def test_a_body_counted_by_a_bound_leaves_its_documents_half_the_limit_at_least(size):
    """A body's count may be a bound above it (its length: two bytes a value), but never one that
    leaves what is decoded from it less than half of the limit."""

    def run():
        limits.check_values(json.dumps({"text": "x" * size}).encode(), 1000)
        json_values.loads_decoded(json.dumps([1] * 499), "half")

    contextvars.copy_context().run(run)


def test_a_decoded_document_nested_deeper_than_the_parser_goes_is_not_json():
    with pytest.raises(ValueError, match="nested too deeply"):
        json_values.loads_decoded("[" * 100_000 + "]" * 100_000, "deep", json.loads)


M = "claude-sonnet-4-5"
HI = {"role": "user", "content": "hi"}
# A front's body whose one tool call has `arguments` (JSON text), answered.
WITH_ARGUMENTS = {
    "/v1/chat/completions": lambda arguments: {
        "model": M,
        "max_tokens": 16,
        "messages": [
            HI,
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ],
    },
    "/v1/responses": lambda arguments: {
        "model": M,
        "input": [
            HI,
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": arguments},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
        ],
    },
}


def arguments_body(path, total):
    """A body whose own values and its arguments' (an object holding an array) are `total` together."""
    own = values_in(WITH_ARGUMENTS[path]("{}"))
    return WITH_ARGUMENTS[path](json.dumps({"a": [1] * (total - own - 2)}))


@pytest.mark.parametrize("path", list(WITH_ARGUMENTS))
def test_over_http_tool_call_arguments_count_towards_the_bodys_json_values(start_bridge, fake, path):
    bridge = start_bridge(BRIDGE_MAX_JSON_VALUES=1000)
    fake.reply(fixture("anthropic/text.json"))
    assert requests.post(f"{bridge.url}{path}", json=arguments_body(path, 1000)).ok
    over = requests.post(f"{bridge.url}{path}", json=arguments_body(path, 1001))
    assert is_openai_error(over, 413), over.text
    assert "arguments" in over.json()["error"]["message"] and "BRIDGE_MAX_JSON_VALUES" in over.text
    assert len(fake.requests) == 1  # nothing went upstream for the refused one
    fake.reply(fixture("anthropic/text.json"))
    assert requests.post(f"{bridge.url}{path}", json=arguments_body(path, 100)).ok


@pytest.mark.parametrize("path", list(WITH_ARGUMENTS))
def test_over_http_arguments_nested_deeper_than_the_parser_goes_are_a_400_naming_them(bridge, fake, path):
    deep = requests.post(f"{bridge.url}{path}", json=WITH_ARGUMENTS[path]("[" * 50_000 + "]" * 50_000))
    assert is_openai_error(deep, 400), deep.text
    assert "arguments" in deep.json()["error"]["param"] and "nested too deeply" in deep.text
    fake.reply(fixture("anthropic/text.json"))
    assert requests.post(f"{bridge.url}{path}", json=arguments_body(path, 100)).ok


def reasoning_payload(value):
    """An encrypted_content in bridge's own form carrying the JSON `value`, as a bomb would."""
    return "bridge.v1." + base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_over_http_a_reasoning_item_decoding_to_too_many_values_is_a_413(start_bridge, fake):
    bridge = start_bridge(BRIDGE_MAX_JSON_VALUES=1000)
    body = {"model": M, "input": [HI, {"type": "reasoning", "encrypted_content": reasoning_payload([{}] * 1000)}]}
    refused = requests.post(f"{bridge.url}/v1/responses", json=body)
    assert is_openai_error(refused, 413), refused.text
    assert "encrypted_content" in refused.text and "BRIDGE_MAX_JSON_VALUES" in refused.text
    assert not fake.requests
