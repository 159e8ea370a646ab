"""response_format on a model with native structured output: Anthropic's output_config.format,
thinking kept, the answer as message content (streamed as delta.content) for the SDK's parse().

The fake upstream refuses a forced tool with thinking as Anthropic does (the recorded refusal,
tests/fixtures/anthropic/error_400_thinking_forced_tool.json): the bridge must never send it.
"""

import json

import pydantic

from tests.fake_upstream import fixture, json_reply, messages_stream
from tests.helpers.recorded import recorded

ANSWER = {"location": "Paris", "temperature_c": 21.5}


class Weather(pydantic.BaseModel):
    location: str
    temperature_c: float


def anthropic_rules(answer):
    """An upstream that answers with `answer` unless the request forces a tool with thinking on."""

    def reply(request):
        body = request.body
        forced = (body.get("tool_choice") or {}).get("type") in ("any", "tool")
        if forced and body.get("thinking", {}).get("type") in ("enabled", "adaptive"):
            return fixture("anthropic/error_400_thinking_forced_tool.json")
        if body.get("stream"):
            return messages_stream(text=[answer[:10], answer[10:]])
        return json_reply({**recorded("anthropic/text.json"), "content": [{"type": "text", "text": answer}]})

    return reply


def test_parse_with_reasoning_effort_on_a_2026_model_is_native_structured_output(openai_sdk, fake):
    fake.default = anthropic_rules(json.dumps(ANSWER))
    completion = openai_sdk.chat.completions.parse(
        model="claude-opus-4-7",
        messages=[{"role": "user", "content": "Paris?"}],
        response_format=Weather,
        reasoning_effort="high",
    )
    assert completion.choices[0].message.parsed == Weather(**ANSWER)
    sent = fake.last.body
    assert "tool_choice" not in sent and "tools" not in sent
    assert sent["thinking"] == {"type": "adaptive"}
    assert sent["output_config"]["effort"] == "high"
    assert sent["output_config"]["format"]["type"] == "json_schema"
    assert set(sent["output_config"]["format"]["schema"]["properties"]) == set(ANSWER)


def test_the_stream_helper_parses_the_streamed_answer(openai_sdk, fake):
    fake.default = anthropic_rules(json.dumps(ANSWER))
    with openai_sdk.chat.completions.stream(
        model="claude-opus-4-7",
        messages=[{"role": "user", "content": "Paris?"}],
        response_format=Weather,
        reasoning_effort="low",
    ) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        completion = stream.get_final_completion()
    assert "".join(deltas) == json.dumps(ANSWER)
    assert completion.choices[0].message.parsed == Weather(**ANSWER)
    assert fake.last.body["output_config"]["format"]["type"] == "json_schema"


def test_strict_is_honoured_not_dropped_on_a_model_that_takes_it(openai_sdk, fake):
    fake.default = anthropic_rules(json.dumps(ANSWER))
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="claude-sonnet-4-5",
        messages=[{"role": "user", "content": "Paris?"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "w", "strict": True, "schema": {"type": "object"}},
        },
        tools=[{"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object"}}}],
    )
    assert "x-bridge-dropped-params" not in raw.headers
    assert fake.last.body["tools"][0]["strict"] is True


def test_responses_parse_on_a_2026_model_is_native_structured_output(openai_sdk, fake):
    fake.default = anthropic_rules(json.dumps(ANSWER))
    response = openai_sdk.responses.parse(
        model="claude-opus-4-7", input="Paris?", text_format=Weather, reasoning={"effort": "medium"}
    )
    assert response.output_parsed == Weather(**ANSWER)
    sent = fake.last.body
    assert "tool_choice" not in sent and sent["thinking"] == {"type": "adaptive"}
    assert sent["output_config"]["format"]["type"] == "json_schema" and sent["output_config"]["effort"] == "medium"


def test_without_native_output_the_forced_tool_turns_thinking_off_and_names_it(openai_sdk, fake):
    """claude-3-7-sonnet takes no output_config.format: a forced tool, and the refusal avoided."""
    fake.default = lambda request: json_reply(
        {
            **recorded("anthropic/tool_use.json"),
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Weather", "input": ANSWER}],
        }
    )
    raw = openai_sdk.chat.completions.with_raw_response.parse(
        model="claude-3-7-sonnet-latest",
        messages=[{"role": "user", "content": "Paris?"}],
        response_format=Weather,
        reasoning_effort="high",
    )
    assert raw.parse().choices[0].message.parsed == Weather(**ANSWER)
    assert set(raw.headers["x-bridge-dropped-params"].split(", ")) == {"strict", "reasoning_effort"}
    assert "thinking" not in fake.last.body and fake.last.body["tool_choice"]["type"] == "tool"
