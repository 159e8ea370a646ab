"""End to end, rule by rule: what the openai SDK sends -> what reaches the fake Anthropic upstream.

Each case sends one request through the official SDK and the live bridge,
then reads the body the fake upstream received and the
x-bridge-dropped-params header the client got.
"""

import json
import re

import openai
import pytest

from bridge.translate.anthropic_request import opaque_user_id
from tests.fake_upstream import fixture

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
USER = {"role": "user", "content": "Hello"}
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


@pytest.fixture
def rules_sdk(start_bridge):
    """The rules as translated, without the cache marks added by default (test_prompt_cache.py)."""
    live = start_bridge(BRIDGE_PROMPT_CACHE="off")
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)


def text(value):
    return {"type": "text", "text": value}


def user_turn(*blocks):
    return {"role": "user", "content": list(blocks)}


def history_with_parallel_calls(first_id, second_id):
    return [
        USER,
        {
            "role": "assistant",
            "content": "Looking both up.",
            "tool_calls": [
                {"id": first_id, "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}},
                {"id": second_id, "type": "function", "function": {"name": "lookup", "arguments": '{"q": "b"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": first_id, "content": "alpha"},
        {"role": "tool", "tool_call_id": second_id, "content": "beta"},
        {"role": "user", "content": "Which is longer?"},
    ]


# id -> (create() keyword arguments, expected top-level fields of the upstream body, fields that must be
#        absent, parameters the x-bridge-dropped-params header must name)
RULES = {
    "system and developer hoisted to system blocks": (
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [text("Metric units."), text("Cite sources.")]},
                USER,
            ]
        },
        {
            "system": [text("Be brief."), text("Metric units."), text("Cite sources.")],
            "messages": [user_turn(text("Hello"))],
        },
        (),
        (),
    ),
    "one system part is the system string": (
        {"messages": [{"role": "developer", "content": "Be brief."}, USER]},
        {"system": "Be brief.", "messages": [user_turn(text("Hello"))]},
        (),
        (),
    ),
    "image data URL becomes a base64 image": (
        {
            "messages": [
                {"role": "user", "content": [text("What is it?"), {"type": "image_url", "image_url": {"url": PNG}}]}
            ]
        },
        {
            "messages": [
                user_turn(
                    text("What is it?"),
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",", 1)[1]},
                    },
                )
            ]
        },
        (),
        (),
    ),
    "https image becomes a URL image": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://example.com/bird.jpg"}}],
                }
            ]
        },
        {"messages": [user_turn({"type": "image", "source": {"type": "url", "url": "https://example.com/bird.jpg"}})]},
        (),
        (),
    ),
    "PDF file part becomes a document": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "file", "file": {"file_data": PDF, "filename": "report.pdf"}},
                        text("Summarise"),
                    ],
                }
            ]
        },
        {
            "messages": [
                user_turn(
                    {
                        "type": "document",
                        "title": "report.pdf",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF.split(",", 1)[1]},
                    },
                    text("Summarise"),
                )
            ]
        },
        (),
        (),
    ),
    "tool calls become tool_use, tool messages one user turn": (
        {"messages": history_with_parallel_calls("call_1", "call_2"), "tools": [LOOKUP]},
        {
            "messages": [
                user_turn(text("Hello")),
                {
                    "role": "assistant",
                    "content": [
                        text("Looking both up."),
                        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "a"}},
                        {"type": "tool_use", "id": "call_2", "name": "lookup", "input": {"q": "b"}},
                    ],
                },
                user_turn(
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "alpha"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "beta"},
                    text("Which is longer?"),
                ),
            ]
        },
        (),
        (),
    ),
    "function tools become Anthropic tools": (
        {"messages": [USER], "tools": [LOOKUP]},
        {
            "tools": [
                {"name": "lookup", "description": "Look a word up", "input_schema": LOOKUP["function"]["parameters"]}
            ]
        },
        ("tool_choice",),
        (),
    ),
    "tool_choice required is any": (
        {"messages": [USER], "tools": [LOOKUP], "tool_choice": "required"},
        {"tool_choice": {"type": "any"}},
        (),
        (),
    ),
    "tool_choice none": (
        {"messages": [USER], "tools": [LOOKUP], "tool_choice": "none"},
        {"tool_choice": {"type": "none"}},
        (),
        (),
    ),
    "named tool_choice is a tool choice": (
        {"messages": [USER], "tools": [LOOKUP], "tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        {"tool_choice": {"type": "tool", "name": "lookup"}},
        (),
        (),
    ),
    "parallel_tool_calls false": (
        {"messages": [USER], "tools": [LOOKUP], "tool_choice": "auto", "parallel_tool_calls": False},
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
        (),
        (),
    ),
    "tool_choice without tools is dropped": (
        {"messages": [USER], "tool_choice": "required"},
        {},
        ("tool_choice", "tools"),
        (),
    ),
    "stop string": ({"messages": [USER], "stop": "END"}, {"stop_sequences": ["END"]}, (), ()),
    "stop list": ({"messages": [USER], "stop": ["END", "###"]}, {"stop_sequences": ["END", "###"]}, (), ()),
    "max_completion_tokens wins over max_tokens": (
        {"messages": [USER], "max_completion_tokens": 300, "max_tokens": 200},
        {"max_tokens": 300},
        (),
        (),
    ),
    "max_tokens": ({"messages": [USER], "max_tokens": 200}, {"max_tokens": 200}, (), ()),
    "max_tokens default": ({"messages": [USER]}, {"max_tokens": 8192}, (), ()),
    "temperature capped to 1": ({"messages": [USER], "temperature": 1.7}, {"temperature": 1.0}, (), ()),
    "top_p beside temperature dropped": (
        {"messages": [USER], "temperature": 0.4, "top_p": 0.8},
        {"temperature": 0.4},
        ("top_p",),
        ("top_p",),
    ),
    "top_p alone kept": ({"messages": [USER], "top_p": 0.8}, {"top_p": 0.8}, (), ()),
    "user is an opaque metadata.user_id": (
        {"messages": [USER], "user": "ann@example.com"},
        {"metadata": {"user_id": opaque_user_id("ann@example.com")}},
        (),
        (),
    ),
    "safety_identifier is an opaque metadata.user_id": (
        {"messages": [USER], "user": "u-42", "safety_identifier": "s-42"},
        {"metadata": {"user_id": opaque_user_id("s-42")}},
        (),
        (),
    ),
    "reasoning_effort is a thinking budget that fits": (
        {"messages": [USER], "reasoning_effort": "medium", "max_completion_tokens": 20000, "temperature": 0.2},
        {"thinking": {"type": "enabled", "budget_tokens": 8192}, "max_tokens": 20000},
        ("temperature",),
        ("temperature",),
    ),
    "thinking and top_k from extra_body": (
        {
            "messages": [USER],
            "extra_body": {"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_k": 5},
            "max_tokens": 4000,
        },
        {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 4000},
        ("top_k",),
        ("top_k",),
    ),
    "top_k from extra_body": ({"messages": [USER], "extra_body": {"top_k": 5}}, {"top_k": 5}, (), ()),
    "json_object is a forced tool": (
        {"messages": [USER], "response_format": {"type": "json_object"}},
        {"tool_choice": {"type": "tool", "name": "json_response"}},
        (),
        (),
    ),
    "hint-only parameters dropped and named": (
        {
            "messages": [USER],
            "seed": 1,
            "frequency_penalty": 0.2,
            "presence_penalty": 0.1,
            "logit_bias": {"1": 1},
            "service_tier": "auto",
            "store": False,
            "metadata": {"k": "v"},
        },
        {"messages": [user_turn(text("Hello"))]},
        ("seed", "frequency_penalty", "presence_penalty", "logit_bias", "service_tier", "store"),
        ("seed", "frequency_penalty", "presence_penalty", "logit_bias", "service_tier", "store", "metadata"),
    ),
    "model passes through unmapped": ({"messages": [USER]}, {"model": "gpt-4o"}, (), ()),
}


@pytest.mark.parametrize("kwargs, expected, absent, dropped", RULES.values(), ids=RULES.keys())
def test_rule_reaches_the_upstream(rules_sdk, fake, kwargs, expected, absent, dropped):
    fake.reply(fixture("anthropic/text.json"))
    raw = rules_sdk.chat.completions.with_raw_response.create(model="gpt-4o", **kwargs)
    assert raw.parse().choices[0].message.content
    sent = fake.last.body
    assert {key: sent.get(key) for key in expected} == expected
    assert not set(absent) & set(sent)
    header = raw.headers.get("x-bridge-dropped-params")
    assert set(header.split(", ") if header else ()) == set(dropped)


def test_tool_ids_anthropic_refuses_are_cleaned_identically_for_the_call_and_its_result(rules_sdk, fake):
    fake.reply(fixture("anthropic/text.json"))
    rules_sdk.chat.completions.create(
        model="gpt-4o", tools=[LOOKUP], messages=history_with_parallel_calls("functions.lookup:0", "call 2")
    )
    assistant, results = fake.last.body["messages"][1:3]
    uses = [b["id"] for b in assistant["content"] if b["type"] == "tool_use"]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses) and len(set(uses)) == 2
    assert [b["tool_use_id"] for b in results["content"] if b["type"] == "tool_result"] == uses


def test_model_map_applies_to_the_upstream_request_and_not_to_the_response(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=json.dumps({"gpt-4o": "claude-sonnet-4-5-20250929"}))
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/text.json"))
    completion = client.chat.completions.create(model="gpt-4o", messages=[USER])
    assert fake.last.body["model"] == "claude-sonnet-4-5-20250929" and completion.model == "gpt-4o"


def test_streaming_request_asks_the_upstream_to_stream(rules_sdk, fake):
    fake.reply(fixture("anthropic/text.sse"))
    list(
        rules_sdk.chat.completions.create(
            model="gpt-4o", messages=[USER], stream=True, stream_options={"include_usage": True}
        )
    )
    assert fake.last.body["stream"] is True and "stream_options" not in fake.last.body
