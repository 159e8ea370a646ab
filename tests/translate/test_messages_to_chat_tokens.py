"""count_tokens: everything the model sees counts, and the estimate errs high.

The calibration tests rebuild two prompts whose true token counts are in the
recorded OpenAI responses (tests/fixtures/openai) and check the estimate is
at or above them, but not wildly so.
"""

import base64
import json
import tracemalloc
from typing import Literal

import openai
import pydantic
import pytest

from bridge.translate.tokens import (
    IMAGE_TOKENS,
    PDF_PAGE_TOKENS,
    chat_input_tokens,
    count_tokens,
    text_tokens,
)
from tests.fake_upstream import FIXTURES


def body(*messages, **extra):
    return {"model": "m", "messages": list(messages), **extra}


def user(content):
    return {"role": "user", "content": content}


def grows(base, richer):
    return count_tokens(richer) - count_tokens(base)


def test_text_is_counted_at_three_characters_a_token():
    assert text_tokens("a" * 300) == 100 and text_tokens("") == 0


def test_a_part_of_three_characters_counts_a_whole_token():
    """Rounded up (the estimate errs high): also for each text delta of a stream without usage."""
    assert [text_tokens("a" * size) for size in (1, 2, 3, 4, 301)] == [1, 1, 1, 2, 101]
    assert text_tokens("é") == 1  # 2 bytes


def test_non_ascii_text_counts_by_utf8_bytes_so_cjk_is_about_a_token_a_character():
    assert text_tokens("漢字" * 50) == 100


def test_system_counts():
    assert grows(body(user("x")), body(user("x"), system="s" * 300)) >= 100


def test_system_messages_inside_messages_count():
    assert grows(body(user("x")), body(user("x"), {"role": "system", "content": "s" * 300})) >= 100


def test_images_count_a_fixed_cost():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}
    assert grows(body(user("x")), body(user([{"type": "text", "text": "x"}, image]))) == IMAGE_TOKENS


def test_pdfs_count_per_page_found_in_the_file():
    pdf = base64.b64encode(b"%PDF-1.4 <</Type /Page>> <</Type /Page>> <</Type /Page>> <</Type /Pages>>").decode()
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}}
    assert grows(body(user("x")), body(user([{"type": "text", "text": "x"}, document]))) == 3 * PDF_PAGE_TOKENS


def test_tool_use_input_counts():
    call = {"type": "tool_use", "id": "t", "name": "Write", "input": {"content": "c" * 600}}
    assert (
        grows(
            body(user("x"), {"role": "assistant", "content": [call]}),
            body(user("x"), {"role": "assistant", "content": [call]}, user("y")),
        )
        < 10
    )
    assert count_tokens(body(user("x"), {"role": "assistant", "content": [call]})) > 200


def test_tool_result_content_counts_as_string_and_as_blocks():
    as_string = {"type": "tool_result", "tool_use_id": "t", "content": "r" * 600}
    as_blocks = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r" * 600}]}
    assert count_tokens(body(user([as_string]))) > 200
    assert count_tokens(body(user([as_blocks]))) == count_tokens(body(user([as_string])))


def test_thinking_counts():
    thinking = {"type": "thinking", "thinking": "t" * 600, "signature": "s"}
    assert count_tokens(body(user("x"), {"role": "assistant", "content": [thinking]})) > 200


def test_tool_names_descriptions_and_schemas_count():
    tool = {
        "name": "n" * 30,
        "description": "d" * 300,
        "input_schema": {"type": "object", "properties": {"p" * 300: {"type": "string"}}},
    }
    assert grows(body(user("x")), body(user("x"), tools=[tool])) >= 210


def test_recorded_claude_code_count_tokens_request_counts_its_tools():
    capture = json.loads((FIXTURES / "clients" / "claude_code_count_tokens_with_tools.json").read_text())
    request = capture["body"]
    schemas = sum(len(json.dumps(tool)) for tool in request["tools"])
    assert count_tokens(request) >= schemas / 4


def test_estimate_is_at_or_above_a_recorded_count_for_dense_text():
    """cached_tokens.json answered a 4,020-token prompt: pydantic-ai's prompt-cache catalogue."""
    recorded = json.loads((FIXTURES / "openai" / "cached_tokens.json").read_text())["usage"]["prompt_tokens"]
    catalogue = "\n".join(
        ["Reference catalogue for the prompt cache test corpus."]
        + [
            f"Entry {i:04d}: shelf {i % 23}, aisle {i % 7}, volume {i}, catalogued under subject heading {i % 11}."
            for i in range(160)
        ]
    )
    estimate = count_tokens(
        body(user([{"type": "text", "text": catalogue}, {"type": "text", "text": "Reply with exactly: OK"}]))
    )
    assert recorded <= estimate <= recorded * 1.25


class GetWeatherArgs(pydantic.BaseModel):
    """Get the temperature for the given country/city combo"""

    city: str
    country: str
    units: Literal["c", "f"] = "c"


class GetStockPrice(pydantic.BaseModel):
    ticker: str
    exchange: str


# openai-python's two-tool test request, which tool_calls_parallel.sse answered: its usage says 149 prompt tokens.
TWO_TOOLS = [
    openai.pydantic_function_tool(GetWeatherArgs),
    openai.pydantic_function_tool(
        GetStockPrice, name="get_stock_price", description="Fetch the latest price for a given ticker"
    ),
]
TWO_QUESTIONS = (user("What's the weather like in Edinburgh?"), user("What's the price of AAPL?"))


def two_tools_recorded():
    chunks = (FIXTURES / "openai" / "tool_calls_parallel.sse").read_text().split("\n\n")
    return next(json.loads(c[len("data: ") :])["usage"]["prompt_tokens"] for c in chunks if '"usage"' in c)


def two_tools_as_messages():
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "input_schema": t["function"]["parameters"],
        }
        for t in TWO_TOOLS
    ]
    return body(*TWO_QUESTIONS, tools=tools)


def test_estimate_is_at_or_above_a_recorded_count_for_a_request_with_tools():
    recorded = two_tools_recorded()
    assert recorded <= count_tokens(two_tools_as_messages()) <= recorded * 2


def test_a_chat_request_with_tools_counts_at_or_above_the_recorded_count():
    """The same request as openai-python sent it (a passed-through stream's input estimate): as its
    Messages form counts, give or take the fields Chat adds (`strict`)."""
    estimate = chat_input_tokens(body(*TWO_QUESTIONS, tools=TWO_TOOLS))
    assert two_tools_recorded() <= estimate <= count_tokens(two_tools_as_messages()) * 1.05


def test_a_chat_request_counts_what_count_tokens_counts_in_its_own_fields():
    plain = body(user("x"))
    assert chat_input_tokens(plain) == count_tokens(plain) == 3 + 4 + 1
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 90000}}
    assert chat_input_tokens(body(user([{"type": "text", "text": "x"}, image]))) == 8 + IMAGE_TOKENS
    pages = b"%PDF-1.4 /Type /Page /Type /Pages /Type /Page"
    pdf = {"type": "file", "file": {"file_data": "data:application/pdf;base64," + base64.b64encode(pages).decode()}}
    assert chat_input_tokens(body(user([pdf]))) == 7 + 2 * PDF_PAGE_TOKENS
    call = {"id": "c1", "type": "function", "function": {"name": "abc", "arguments": '{"q":"x"}'}}
    called = body(user("x"), {"role": "assistant", "content": None, "tool_calls": [call]})
    assert chat_input_tokens(called) == 8 + 4 + 1 + 3
    answered = body(user("x"), {"role": "tool", "tool_call_id": "c1", "content": "a" * 30})
    assert chat_input_tokens(answered) == 8 + 4 + 10
    assert chat_input_tokens({**plain, "response_format": {"type": "json_object"}}) > 8


@pytest.mark.parametrize(
    "request_body",
    [
        {"model": "m"},
        {"model": "m", "messages": "hi", "tools": {"a": 1}},
        {"model": "m", "messages": [1, None, ["x"], {"content": 5}, {"content": [7, {"type": "text", "text": 1}]}]},
        {"model": "m", "messages": [{"role": "assistant", "tool_calls": [1, {"function": "f"}, {"function": {}}]}]},
        {"model": "m", "messages": [{"content": [{"type": "file", "file": {"file_data": "not base64 %%%"}}]}]},
        {"model": "m", "messages": [{"content": "x", "name": 3, "reasoning_content": ["y"]}], "tools": [None]},
    ],
)
def test_a_passed_through_chat_body_of_any_shape_is_counted_without_error(request_body):
    """Pass-through leaves the body's shape to the upstream: what is not as expected counts as its JSON."""
    assert chat_input_tokens(request_body) >= 3


@pytest.mark.parametrize("path", sorted((FIXTURES / "clients").glob("*.json")), ids=lambda p: p.stem)
def test_every_recorded_request_is_counted_without_error(path):
    request = json.loads(path.read_text())["body"]
    assert count_tokens(request) > len(json.dumps(request.get("system", ""))) / 4


def test_a_structured_output_schema_counts_whichever_field_carries_it():
    """The deprecated output_format is translated like output_config.format, so it counts like it."""
    schema = {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}
    plain = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    with_config = count_tokens({**plain, "output_config": {"format": schema}})
    assert count_tokens({**plain, "output_format": schema}) == with_config > count_tokens(plain)


def test_a_pdf_claiming_many_pages_costs_its_decoded_bytes_alone():
    """Counted over its bytes, not listed: a PDF of 300,000 page markers peaked at four times its
    base64 text when the markers were listed, and the text was copied before it was decoded."""
    pdf = base64.b64encode(b"/Type /Page\n" * 300_000).decode()
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}}
    tracemalloc.start()
    try:
        tokens = count_tokens(body(user([document])))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tokens >= 300_000 * PDF_PAGE_TOKENS
    assert peak < len(pdf)  # the decoded bytes are three quarters of the text
