"""Bad input, generated: thousands of malformed bodies and headers against every endpoint.

Valid requests - the recorded Claude Code requests and small hand-written Messages and Chat
requests - are mutated at any depth (a value of the wrong type, a field removed or added, a
tag swapped, a subtree moved elsewhere, huge strings and numbers, deep nesting, NaN, lone
surrogates), so the fuzz reaches into the schemas and the translators, not only the top
level. Other examples break the wire form: invalid UTF-8, truncated or empty bodies, wrong
content types, chunked and oversized bodies, odd header values.

For every one: no 5xx; a 4xx is an error body in the client's protocol; a 2xx is a complete
answer (a stream ends with message_stop or [DONE], never with an error, since the fake
upstream answers every request that passes validation with a valid body); and the service
stays healthy.

CI runs a fixed, derandomized set (a few thousand examples). FUZZ_PROFILE=long runs
twenty-five times as many, randomized; a failure prints a blob that reproduces it.
"""

import copy
import json
import os
import urllib.parse

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge import settings as settings_module
from bridge.app import create_app
from tests.fake_upstream import FIXTURES, fixture, json_reply
from tests.helpers.recorded import decoded
from tests.helpers.servers import LiveBridge, bridge_env

pytestmark = pytest.mark.slow  # make test-fast leaves it out (setup.cfg)

settings.register_profile(
    "bridge-fuzz-ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
settings.register_profile("bridge-fuzz-long", parent=settings.get_profile("bridge-fuzz-ci"), derandomize=False)
PROFILE = os.environ.get("FUZZ_PROFILE", "ci")
SCALE = {"ci": 1, "long": 25}[PROFILE]


def examples(count):
    return settings(settings.get_profile(f"bridge-fuzz-{PROFILE}"), max_examples=count * SCALE)


MAX_BODY = 256 * 1024


# --- valid requests to start from --------------------------------------------------------------


def recorded_client_requests():
    for path in sorted((FIXTURES / "clients").glob("claude_code_*.json")):
        yield json.loads(path.read_text())


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

MESSAGES_SEEDS = [
    {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "stop_sequences": ["\n\nHuman:"],
        "metadata": {"user_id": "u-1"},
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER_SCHEMA}],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare these."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Paris first.", "signature": "c2lnbmF0dXJl"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "is_error": False,
                        "content": [
                            {"type": "text", "text": "18C"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                        ],
                    },
                    {"type": "text", "text": "And now?"},
                ],
            },
        ],
    },
    {
        "model": "claude-haiku-4-5",
        "max_tokens": 2048,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "system": "You are terse.",
        "tools": [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": "18C", "is_error": True}],
            },
        ],
    },
]
COUNT_TOKENS_SEEDS = [
    {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]},
    {key: value for key, value in MESSAGES_SEEDS[1].items() if key not in ("max_tokens", "stream")},
]
CHAT_SEEDS = [
    {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
    {
        "model": "gpt-4o",
        "temperature": 1.5,
        "max_completion_tokens": 300,
        "stop": ["END"],
        "seed": 7,
        "user": "u-1",
        "metadata": {"team": "a"},
        "frequency_penalty": 0.5,
        "parallel_tool_calls": False,
        "reasoning_effort": "low",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": WEATHER_SCHEMA,
                    "strict": True,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare these."},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "user", "content": "And now?", "name": "ann"},
        ],
    },
    {
        "model": "gpt-4o-mini",
        "max_tokens": 100,
        "n": 1,
        "top_p": 0.5,
        "tool_choice": "required",
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER_SCHEMA}},
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}],
        "messages": [{"role": "user", "content": "Weather?"}],
    },
]


def messages_seeds():
    recorded = [
        (r["path"], r["body"], r["headers"])
        for r in recorded_client_requests()
        if not r["path"].startswith("/v1/messages/count_tokens")
    ]
    return recorded + [("/v1/messages", body, ANTHROPIC_HEADERS) for body in MESSAGES_SEEDS]


def count_tokens_seeds():
    recorded = [
        (r["path"], r["body"], r["headers"])
        for r in recorded_client_requests()
        if r["path"].startswith("/v1/messages/count_tokens")
    ]
    return recorded + [("/v1/messages/count_tokens", body, ANTHROPIC_HEADERS) for body in COUNT_TOKENS_SEEDS]


def chat_seeds():
    return [("/v1/chat/completions", body, {"content-type": "application/json"}) for body in CHAT_SEEDS]


ANTHROPIC_HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
_NOT_FORWARDED = {"connection", "accept-encoding", "content-length", "host"}


def client_headers(recorded):
    return {k: v for k, v in recorded.items() if k not in _NOT_FORWARDED and not v.startswith("<redacted")}


# --- mutations ---------------------------------------------------------------------------------


class Raw(str):
    """A JSON token json.dumps cannot write (NaN, 1e400, a 5000-digit number, 900 nested
    arrays): a placeholder while serialising, put in place as raw text afterwards."""


RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" * 5000, "0." + "0" * 5000 + "1"]


def nested(depth, kind):
    return Raw(("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "0" + "}" * depth))


SPECIAL_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    0.5,
    -0.5,
    3.7,
    2**31,
    2**63,
    -(2**63),
    10**30,
    1e308,
    -1e308,
    5e-324,
    "",
    " ",
    "\x00",
    "\ud800",
    "\udfff",
    "\ud83d",
    "\u202e",
    "null",
    "true",
    "0",
    "1.5",
    "[]",
    "{}",
    [],
    {},
    [None],
    [[]],
    [{}],
    {"type": None},
]
TAGS = [
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "search_result",
    "image_url",
    "input_audio",
    "file",
    "refusal",
    "function",
    "tool",
    "any",
    "auto",
    "none",
    "base64",
    "url",
    "json_schema",
    "json_object",
    "enabled",
    "disabled",
    "adaptive",
    "ephemeral",
    "user",
    "assistant",
    "system",
    "developer",
    "",
    "TEXT",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
hostile_values = st.one_of(
    st.sampled_from(SPECIAL_VALUES),
    st.sampled_from(RAW_TOKENS).map(Raw),
    json_values,
    st.text(),
    st.integers(min_value=1000, max_value=100_000).map(lambda n: "\u00e9\U0001f600 " * (n // 7)),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.builds(nested, st.integers(min_value=2, max_value=990), st.sampled_from(["list", "dict"])),
)


def all_paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from all_paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from all_paths(child, prefix + (index,))


def node(doc, path):
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def mutation(draw, doc):
    """One change at a random place: replace, remove, add, retag or transplant."""
    doc = copy.deepcopy(doc)
    paths = list(all_paths(doc))
    path = draw(st.sampled_from(paths))
    target = node(doc, path)
    kind = draw(st.sampled_from(["replace", "replace", "remove", "add", "retag", "transplant"]))
    if kind == "remove" and path:
        del node(doc, path[:-1])[path[-1]]
    elif kind == "add" and isinstance(target, dict):
        target[
            draw(
                st.sampled_from(["type", "role", "content", "text", "id", "extra", "cache_control"])
                | st.text(max_size=10)
            )
        ] = draw(hostile_values)
    elif kind == "add" and isinstance(target, list):
        target.insert(draw(st.integers(0, len(target))), draw(hostile_values | st.sampled_from(target or [None])))
    elif kind == "retag" and isinstance(target, dict) and ({"type", "role"} & set(target)):
        key = "type" if "type" in target else "role"
        target[key] = draw(st.sampled_from(TAGS))
    elif kind == "transplant":
        donor = copy.deepcopy(node(doc, draw(st.sampled_from(paths))))
        doc = replaced(doc, path, donor)
    else:
        doc = replaced(doc, path, draw(hostile_values))
    return doc


def replaced(doc, path, value):
    if not path:
        return value
    node(doc, path[:-1])[path[-1]] = value
    return doc


@st.composite
def mutated(draw, seeds):
    path, body, headers = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 3))):
        body = draw(mutation(body))
    return path, body, headers


def dumps(body):
    """JSON text of a generated body, with Raw tokens written as they are."""
    raws = {}

    def placeholder(value):
        if isinstance(value, Raw):
            key = f"\u0001raw{len(raws)}\u0001"
            raws[json.dumps(key)] = str(value)
            return key
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        return value

    text = json.dumps(placeholder(body))
    for key, raw in raws.items():
        text = text.replace(key, raw)
    return text.encode()


# --- the wire ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_bridge(fake):
    live = LiveBridge(create_app(settings_module.load(bridge_env(fake, BRIDGE_MAX_BODY_BYTES=MAX_BODY))))
    yield live
    live.close()


def valid_answer(request):
    """What a healthy upstream answers to any request that passed validation."""
    stream = isinstance(request.body, dict) and request.body.get("stream") is True
    model = {
        "id": "some-model",
        "object": "model",
        "created": 0,
        "owned_by": "x",
        "type": "model",
        "created_at": "2026-01-01T00:00:00Z",
    }
    if request.path.endswith("/models") or "/models?" in request.path:
        return json_reply({"object": "list", "data": [model]})
    if "/models/" in request.path:
        return json_reply(model)
    upstream = "openai" if request.path.endswith("/chat/completions") else "anthropic"
    return fixture(f"{upstream}/text.sse" if stream else f"{upstream}/text.json")


@pytest.fixture
def http(fuzz_bridge, fake):
    fake.default = valid_answer
    with requests.Session() as session:
        yield Client(session, fuzz_bridge.url, fake)


ANTHROPIC_ERROR_TYPES = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
}


class Client:
    def __init__(self, session, url, fake):
        self.session, self.url, self.fake = session, url, fake

    def send(self, method, path, body, headers, chunked=False):
        """Send, read the whole answer, and check it; returns the response for more checks."""
        self.fake.requests.clear()
        response = self.session.request(
            method, self.url + path, headers=headers, timeout=60, data=iter([body]) if chunked else body
        )
        check_answer(response, answers_in_anthropic_shape(path, headers), len(body))
        for upstream in self.fake.requests:  # Python's parser reads NaN; the upstream's may not
            json.dumps(upstream.body, allow_nan=False)
        assert self.session.get(self.url + "/healthz", timeout=10).status_code == 200
        return response


def answers_in_anthropic_shape(path, headers):
    """Whether the answer must be in Anthropic's shape (README: Errors), with or without /v1."""
    path = path.split("?")[0].removeprefix("/v1")
    if path.startswith("/messages"):
        return True
    if path.startswith("/chat/"):
        return False
    headers = {k.lower(): v for k, v in headers.items()}
    if path == "/models" or path.startswith("/models/"):
        return bool(headers.get("anthropic-version"))
    return bool(headers.get("anthropic-version") or headers.get("x-api-key"))  # an unknown path: a guess


def check_answer(response, anthropic, sent):
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:2000]}"
    assert response.headers.get("request-id")
    if status >= 400:
        body = response.json()
        if anthropic:
            assert body["type"] == "error" and body["error"]["type"] in ANTHROPIC_ERROR_TYPES
        else:
            assert set(body["error"]) >= {"message", "type", "param", "code"}
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert len(response.content) <= sent + 4096, "an error may quote the input, never amplify it"
    elif response.headers["content-type"].startswith("text/event-stream"):
        check_complete_stream(response.content, anthropic)
    else:
        assert isinstance(response.json(), dict)


def check_complete_stream(raw, anthropic):
    events = decoded(raw)
    if anthropic:
        assert events[-1].event == "message_stop", events[-3:]
        assert all(e.event != "error" for e in events), [e for e in events if e.event == "error"]
    else:
        assert events[-1].data == "[DONE]", events[-3:]
        assert all('"error"' not in e.data[:12] for e in events)


# --- wire forms and headers ----------------------------------------------------------------

CONTENT_TYPES = [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/vnd.bridge+json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "",
    "json",
    "*/*",
    "application/json; charset=latin-1",
    "text/event-stream",
]
HEADER_NAMES = [
    "anthropic-version",
    "anthropic-beta",
    "x-api-key",
    "authorization",
    "x-request-id",
    "accept",
    "accept-encoding",
    "content-encoding",
    "user-agent",
    "cookie",
    "x-stainless-timeout",
    "openai-organization",
    "x-forwarded-for",
    "forwarded",
    "via",
    "te",
    "x-claude-code-session-id",
]
header_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=300
).map(lambda text: text.strip().encode("latin-1"))
endpoints = st.sampled_from([seed[:2] for seed in messages_seeds()[-3:] + count_tokens_seeds()[-2:] + chat_seeds()])


def _oversized(body):
    return body[:-1] + b', "padding": "' + b"x" * MAX_BODY + b'"}'


def _cut(body, data):
    return body[: data.draw(st.integers(0, len(body) - 1))]


def _corrupt(body, data):
    at = data.draw(st.integers(0, len(body)))
    junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xf0\x9f\x98", b"\x80\x80"]))
    return body[:at] + junk + body[at:]


WIRE_FORMS = {
    "as is": lambda body, data: body,
    "empty": lambda body, data: b"",
    "whitespace": lambda body, data: b" \r\n\t ",
    "truncated": _cut,
    "invalid UTF-8": _corrupt,
    "trailing garbage": lambda body, data: body + data.draw(st.sampled_from([b"x", b"{}", b"]", b"\x00"])),
    "byte order mark": lambda body, data: b"\xef\xbb\xbf" + body,
    "UTF-16": lambda body, data: body.decode().encode("utf-16"),
    "not an object": lambda body, data: data.draw(st.sampled_from([b"[]", b'"text"', b"1", b"null", b"true", b"[{}]"])),
    "oversized": lambda body, data: _oversized(body),
    "deeply nested": lambda body, data: b"[" * 5000 + b"]" * 5000,
    "huge number": lambda body, data: body[:-1] + b', "n": ' + b"9" * 5000 + b"}",
}


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, body, headers",
    messages_seeds() + count_tokens_seeds() + chat_seeds(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_seed_is_a_valid_request(http, path, body, headers):
    """The fuzz starts from requests the bridge accepts, so its mutations land deep inside them."""
    response = http.send("POST", path, dumps(body), client_headers(headers))
    assert response.status_code == 200, response.text[:500]


@given(case=mutated(messages_seeds()))
@examples(500)
def test_mutated_messages_requests(http, case):
    path, body, headers = case
    http.send("POST", path, dumps(body), client_headers(headers))


@given(case=mutated(count_tokens_seeds()))
@examples(400)
def test_mutated_count_tokens_requests(http, case):
    path, body, headers = case
    http.send("POST", path, dumps(body), client_headers(headers))


@given(case=mutated(chat_seeds()))
@examples(600)
def test_mutated_chat_requests(http, case):
    path, body, headers = case
    http.send("POST", path, dumps(body), client_headers(headers))


@given(data=st.data())
@examples(600)
def test_malformed_bodies_and_headers_on_every_post_endpoint(http, data):
    path, body = data.draw(endpoints)
    form = data.draw(st.sampled_from(sorted(WIRE_FORMS)))
    raw = WIRE_FORMS[form](dumps(body), data)
    headers = {"content-type": data.draw(st.sampled_from(CONTENT_TYPES))}
    headers.update(data.draw(st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=4)))
    method = data.draw(st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "PATCH"]))
    response = http.send(method, path, raw, headers, chunked=data.draw(st.booleans()))
    if form == "oversized" and method == "POST":
        assert response.status_code in (413, 415)  # 415 when the content type is wrong as well


@given(data=st.data())
@examples(200)
def test_models_with_generated_headers_and_queries(http, data):
    headers = data.draw(st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=5))
    query = data.draw(
        st.sampled_from(
            [
                "",
                "?limit=1000",
                "?beta=true",
                "?after_id=x&limit=-1",
                "?%ff=%00",
                "?after_id=some-model&limit=1",
                "?before_id=some-model",
                "?after_id=a&before_id=b",
                "?limit=%00",
            ]
        )
    )
    path = data.draw(
        st.sampled_from(
            [
                "/v1/models",
                "/v1/models/",
                "/v1/models/claude-x",
                "/v1/model",
                "/models",
                "/models/claude-x",
                "/v1/models/org%2Fmodel",
            ]
        )
    )
    http.send("GET", path + query, b"", headers)


# --- what the fuzz found, pinned ---------------------------------------------------------------

ENDPOINTS = [
    ("/v1/messages", MESSAGES_SEEDS[0]),
    ("/v1/messages/count_tokens", COUNT_TOKENS_SEEDS[0]),
    ("/v1/chat/completions", CHAT_SEEDS[0]),
]


@pytest.mark.parametrize("path, seed", ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
@pytest.mark.parametrize("where", [("model",), ("messages", 0, "content")], ids=["model", "content"])
def test_a_lone_surrogate_is_a_400_naming_the_field(http, path, seed, where):
    """JSON may escape half of a UTF-16 pair ("\\ud83d"); that is no Unicode text, cannot be
    encoded for the upstream, and both providers answer it with a 400 too."""
    body = replaced(copy.deepcopy(seed), where, "cut emoji \ud83d")
    response = http.send("POST", path, dumps(body), ANTHROPIC_HEADERS)
    field = ".".join(str(step) for step in where)
    assert response.status_code == 400 and response.json()["error"]["message"].startswith(f"{field}: ")
    assert not http.fake.requests


@pytest.mark.parametrize("path, seed", ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
@pytest.mark.parametrize("token", ["NaN", "-Infinity", "1e400"])
def test_numbers_json_cannot_carry_are_a_400_not_forwarded(http, path, seed, token):
    """Python's parser takes NaN, Infinity and 1e400 (as inf); a strict upstream would not,
    so they must not reach it as a field the schemas pass through (metadata, tool input)."""
    body = {**seed, "metadata": {"score": Raw(token)}}
    response = http.send("POST", path, dumps(body), ANTHROPIC_HEADERS)
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    assert not http.fake.requests


@pytest.mark.parametrize("path, seed", ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
def test_a_chunked_body_over_the_limit_is_a_413_not_a_cut_json_400(http, path, seed):
    """Without a Content-Length werkzeug stops reading at the limit and says nothing."""
    response = http.send("POST", path, _oversized(dumps(seed)), ANTHROPIC_HEADERS, chunked=True)
    assert response.status_code == 413 and "BRIDGE_MAX_BODY_BYTES" in response.text


def test_models_errors_take_the_shape_of_the_models_answer(http):
    """GET /v1/models answers in Anthropic's shape only with `anthropic-version` (README);
    its errors must not switch shape because the request also carries `x-api-key`."""
    http.fake.reply(fixture("anthropic/error_429.json"))
    response = http.send("GET", "/v1/models", b"", {"x-api-key": "sk-client"})
    assert response.status_code == 429 and set(response.json()["error"]) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize("path, seed", ENDPOINTS[::2], ids=[p for p, _ in ENDPOINTS[::2]])
def test_parameter_names_in_the_dropped_params_header_cannot_break_or_inject_headers(http, path, seed):
    """Found by the long fuzz: a Chat request's unknown keys are reported as dropped, and a key
    with a newline made a 500 and one outside Latin-1 left the client waiting for an answer
    werkzeug could not write."""
    odd = ["a\r\nSet-Cookie: x=1", "\U000947f8\tkey", "comma, inside", "del\x7f", "top_k"]
    response = http.send("POST", path, dumps({**seed, **{name: 1 for name in odd}}), ANTHROPIC_HEADERS)
    assert response.status_code == 200 and "set-cookie" not in response.headers
    reported = response.headers.get("x-bridge-dropped-params", "")
    assert reported.isascii() and reported.isprintable()
    assert set(map(urllib.parse.unquote, reported.split(", "))) <= set(odd)


@pytest.mark.parametrize("path, seed", ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
def test_a_lone_surrogate_in_a_key_is_a_400_that_can_name_it(http, path, seed):
    """Found by the long fuzz: the 400 quoting the key could not itself be encoded (a 500)."""
    response = http.send("POST", path, b'{"\\ud83dkey": 1, ' + dumps(seed)[1:], ANTHROPIC_HEADERS)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("\ud83dkey: ")
