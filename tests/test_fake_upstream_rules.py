"""The fake Responses upstream, met with the official openai SDK pointed straight at it: its rules
refuse what OpenAI refuses, in OpenAI's words, and the recorded Responses streams replay into the
SDK's own accumulator."""

import openai
import pytest
import requests

from tests.fake_upstream import ResponsesRules, fixture, json_reply, responses_answer, responses_stream
from tests.helpers.recorded import RESPONSES_STREAMS, recorded, recorded_events

HI = [{"role": "user", "content": "Say hi"}]
REASONING_ITEM = {"type": "reasoning", "id": "rs_0123", "summary": [], "encrypted_content": "gAAAAB-opaque"}
# An answer's message as a client echoes it, its id with it.
ECHOED_MESSAGE = {
    "type": "message",
    "id": "msg_0123",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hi!", "annotations": []}],
}


@pytest.fixture
def client(fake):
    return openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=0)


@pytest.fixture
def ruled(fake):
    """The fake with the rules on, a good answer queued behind them."""
    fake.rules = ResponsesRules()
    fake.reply(json_reply(responses_answer("Hi!", model="gpt-4.1")))
    return fake


def test_a_request_within_the_rules_gets_the_queued_answer(ruled, client):
    response = client.responses.create(
        model="gpt-5",
        input=[*HI, REASONING_ITEM],
        instructions="Be brief.",
        store=True,
        include=["reasoning.encrypted_content"],
        max_output_tokens=16,
        tools=[{"type": "function", "name": "ls", "parameters": {"type": "object"}, "strict": False}],
    )

    assert response.output_text == "Hi!"
    assert ruled.last.path == "/v1/responses"
    assert ruled.last.body["input"][1] == REASONING_ITEM


# (request fields, the error class the SDK raises, status, OpenAI's message, param, code)
BROKEN = {
    "an unknown field": (
        {"model": "gpt-4.1", "input": "hi", "extra_body": {"stop": ["\n"]}},
        openai.BadRequestError,
        400,
        "Unknown parameter: 'stop'.",
        "stop",
        "unknown_parameter",
    ),
    "an item id with store false": (
        {"model": "gpt-5", "input": [*HI, ECHOED_MESSAGE], "store": False},
        openai.NotFoundError,
        404,
        "Item with id 'msg_0123' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        "input",
        None,
    ),
    "a reasoning item without its encrypted content, with store false": (
        {"model": "gpt-5", "input": [*HI, {**REASONING_ITEM, "encrypted_content": None}], "store": False},
        openai.NotFoundError,
        404,
        "Item with id 'rs_0123' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        "input",
        None,
    ),
    "an item reference with store false": (
        {"model": "gpt-5", "input": [{"type": "item_reference", "id": "fc_9"}], "store": False},
        openai.NotFoundError,
        404,
        "Item with id 'fc_9' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        "input",
        None,
    ),
    "encrypted reasoning from a model without it": (
        {"model": "gpt-4.1", "input": "hi", "include": ["reasoning.encrypted_content"]},
        openai.BadRequestError,
        400,
        "Encrypted content is not supported with this model.",
        "include",
        None,
    ),
    "max_output_tokens under 16": (
        {"model": "gpt-4.1", "input": "hi", "max_output_tokens": 15},
        openai.BadRequestError,
        400,
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 15 instead.",
        "max_output_tokens",
        "integer_below_min_value",
    ),
    "temperature on a reasoning model": (
        {"model": "o3", "input": "hi", "temperature": 0.2},
        openai.BadRequestError,
        400,
        recorded("openai/responses_error_400_temperature.json")["error"]["message"],
        "temperature",
        None,
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_rule_is_refused_in_openais_words_and_the_answer_stays_queued(ruled, client, case):
    fields, error, status, message, param, code = BROKEN[case]

    with pytest.raises(error) as refused:
        client.responses.create(**fields)

    assert refused.value.status_code == status
    assert refused.value.body == {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    assert ruled.last.body["model"] == fields["model"]
    assert client.responses.create(model="gpt-4.1", input="hi").output_text == "Hi!"
    assert len(ruled.requests) == 2


@pytest.mark.parametrize(
    "where, fields, param",
    [
        ("input", {"input": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}, "input[0].type"),
        ("tools", {"input": "hi", "tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools[0].type"),
    ],
)
def test_an_unknown_item_or_tool_type_is_an_invalid_value(ruled, client, where, fields, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="gpt-4.1", **fields)

    assert refused.value.body["param"] == param
    assert refused.value.body["code"] == "invalid_value"
    assert refused.value.body["message"].startswith(f"Invalid value: '{fields[where][0]['type']}'. Supported values")
    assert {"input": "'function_call_output'", "tools": "'function'"}[where] in refused.value.body["message"]


def test_a_reasoning_item_carrying_its_encrypted_content_goes_with_its_id_under_store_false(ruled, client):
    """As Codex sends it back: OpenAI's stateless reasoning needs the item whole, id included."""
    response = client.responses.create(model="gpt-5", input=[*HI, REASONING_ITEM], store=False)
    assert response.output_text == "Hi!" and ruled.last.body["input"][1] == REASONING_ITEM


def test_store_true_keeps_item_ids_and_other_models_keep_temperature(ruled, client):
    client.responses.create(model="gpt-5", input=[*HI, REASONING_ITEM], store=True)
    ruled.reply(json_reply(responses_answer("Again")))

    assert client.responses.create(model="gpt-4.1", input="hi", temperature=0.2).output_text == "Again"


def test_which_models_reason_is_the_rules_parameter(fake, client):
    fake.rules = ResponsesRules(reasoning_models=("house-reasoner",))
    fake.reply(json_reply(responses_answer("Thought")))
    include = ["reasoning.encrypted_content"]

    assert client.responses.create(model="house-reasoner-2", input="hi", include=include).output_text == "Thought"
    with pytest.raises(openai.BadRequestError, match="Encrypted content is not supported"):
        client.responses.create(model="gpt-5", input="hi", include=include)


def test_the_rules_hold_on_azure_paths_and_nowhere_but_responses(ruled):
    refused = requests.post(
        f"{ruled.url}/openai/v1/responses?api-version=preview", json={"model": "gpt-4.1", "input": "hi", "n": 2}
    )
    chat = requests.post(f"{ruled.url}/v1/chat/completions", json={"model": "gpt-4.1", "messages": HI, "bogus": 1})

    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "Unknown parameter: 'n'."
    assert chat.status_code == 200  # the queued answer: Chat requests are not the Responses rules' business


def test_without_rules_the_fake_answers_anything(fake, client):
    fake.reply(json_reply(responses_answer("Anything")))

    assert client.responses.create(model="o3", input="hi", temperature=0.2).output_text == "Anything"


# Recorded streams whose .json is the same prompt answered unstreamed: the same output and usage.
SAME_ANSWER = ("openai/responses_text.sse", "openai/responses_tool_call.sse")
# Recorded streams with an `error` event: the SDK raises it, with its message.
ERRORS = ("openai/responses_error_event.sse", "openai/responses_failed.sse")


def plain(response):
    """A response as its JSON says it, without what the SDK's stream helper parsed."""
    body = response.to_dict()
    for item in body["output"]:
        item.pop("parsed_arguments", None)
        for part in item.get("content") or ():
            part.pop("parsed", None)
    return body


def without_ids(output):
    return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in output]


def streamed(client, reply, fake):
    """The SDK's accumulated final response of a stream the fake replays, from its last event."""
    fake.reply(reply)
    with client.responses.stream(model="gpt-5", input="hi") as stream:
        events = list(stream)
    assert events[-1].type in ("response.completed", "response.incomplete", "response.failed")
    return events[-1].response


@pytest.mark.parametrize("name", [n for n in RESPONSES_STREAMS if n not in ERRORS])
def test_each_recorded_stream_accumulates_to_its_recorded_answer(fake, client, name):
    final = plain(streamed(client, fixture(name), fake))
    last = recorded_events(name)[-1][1]["response"]

    assert final["status"] == last["status"]
    assert [item["type"] for item in final["output"]] == [item["type"] for item in last["output"]]
    assert final["usage"] == last["usage"]
    if name in SAME_ANSWER:
        unstreamed = recorded(name.removesuffix(".sse") + ".json")
        assert without_ids(final["output"]) == without_ids(unstreamed["output"])
        assert final["usage"] == unstreamed["usage"]


@pytest.mark.parametrize("name", ERRORS)
def test_a_recorded_error_event_is_raised_by_the_sdk(fake, client, name):
    error = next(data["error"] for event, data in recorded_events(name) if event == "error")
    fake.reply(fixture(name))

    with pytest.raises(openai.APIError) as raised, client.responses.stream(model="gpt-5", input="hi") as stream:
        list(stream)

    assert raised.value.message == error["message"]


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "Hello there"},
        {"function_calls": [("call_1", "ls", {"path": "."}), ("call_2", "cat", {"file": "a.txt"})]},
        {"reasoning": ("Thinking it over", "gAAAAB-opaque"), "text": "Done"},
        {"text": "Cut sh", "status": "incomplete"},
    ],
)
def test_a_built_stream_accumulates_to_the_built_answer(fake, client, answer):
    final = plain(streamed(client, responses_stream(**answer), fake))
    fake.reply(json_reply(responses_answer(**answer)))

    assert final == client.responses.create(model="gpt-5", input="hi").to_dict()
    assert final["usage"]["total_tokens"] == 110
