"""x-bridge-dropped-params: every dropped parameter and reasoning item named, in a header of
bounded size (bridge/fronts/http.py dropped_header), over HTTP through the official openai SDK."""

import base64
import json

from bridge.fronts.http import DROPPED_HEADER_BYTES, DROPPED_NAME_BYTES, dropped_header
from tests.fake_upstream import fixture
from tests.helpers.upstream_requests import foreign_reasoning_session

HEADER = "x-bridge-dropped-params"


def reasoning_names(header):
    """(the reasoning items a header names, the count it gives of the rest)."""
    *names, last = header.split(", ")
    more = int(last.removeprefix("...and ").removesuffix(" more")) if last.startswith("...and ") else 0
    return (names if more else [*names, last]), more


# -- the header -----------------------------------------------------------------------------------


def test_a_few_names_are_the_header_as_they_are():
    assert dropped_header(["seed", "top_p"]) == {HEADER: "seed, top_p"}
    assert dropped_header([]) == {}


def test_names_past_the_byte_limit_are_counted_not_listed():
    names = [f"input.{3 * number + 1}.encrypted_content" for number in range(150)]
    header = dropped_header(names)[HEADER]
    assert len(header) <= DROPPED_HEADER_BYTES
    shown, more = reasoning_names(header)
    assert shown == names[: len(shown)] and more == 150 - len(shown) and more > 0


def test_a_long_name_is_cut_and_no_name_can_break_the_header():
    """Percent-encoded, no name holds a comma, a newline or a character outside Latin-1; cut,
    it ends in `...`, never in half an escape."""
    for name in ["x" * 60_000, "é" * 60_000, "a,\r\nb" * 10_000, "ab" + "€" * 100]:
        [entry] = dropped_header([name])[HEADER].split(", ")
        assert len(entry) <= DROPPED_NAME_BYTES and entry.endswith("...")
        assert entry.encode("latin-1").isascii() and "," not in entry and "\n" not in entry
        assert not entry.removesuffix("...")[-2:].startswith("%") and not entry.removesuffix("...").endswith("%")


# -- over HTTP -----------------------------------------------------------------------------------


def test_a_60000_character_unknown_chat_field_is_named_in_a_bounded_header(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.json"))
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "hi"}], extra_body={"x" * 60_000: 1}
    )
    assert raw.parse().choices[0].message.content
    assert raw.headers[HEADER] == "x" * (DROPPED_NAME_BYTES - 3) + "..."


def test_150_reasoning_items_from_another_model_are_each_named_or_counted(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.json"))
    raw = openai_sdk.responses.with_raw_response.create(model="claude-sonnet-4-5", input=foreign_reasoning_session(150))
    assert raw.parse().status == "completed"
    header = raw.headers[HEADER]
    assert len(header) <= DROPPED_HEADER_BYTES
    shown, more = reasoning_names(header)
    assert shown == [f"input.{3 * number + 1}.encrypted_content" for number in range(len(shown))]
    assert len(shown) + more == 150
    assert not any(block["type"] == "thinking" for m in fake.requests[0].body["messages"] for block in m["content"])


def bridge_payload(value):
    """An encrypted_content in bridge's own form (reasoning.py) carrying `value`, as JSON text."""
    return "bridge.v1." + base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


def test_a_reasoning_item_that_carries_no_thinking_block_is_named_not_lost(openai_sdk, fake):
    """Another model's reasoning, bridge's prefix on what is not base64 JSON, on JSON that is no
    thinking block, on JSON nested deeper than the parser goes, and no encrypted_content at all."""
    carried = [
        "gAAAAABo-openai-reasoning",
        "bridge.v1.not base64 at all!",
        bridge_payload(json.dumps([{}] * 10)),
        bridge_payload("[" * 50_000 + "]" * 50_000),
        None,
    ]
    items = [{"role": "user", "content": "hi"}]
    for content in carried:
        items += [
            {"type": "reasoning", "summary": [], "encrypted_content": content},
            {"role": "assistant", "content": "ok"},
        ]
    items.append({"role": "user", "content": "and now?"})
    fake.reply(fixture("anthropic/text.json"))
    raw = openai_sdk.responses.with_raw_response.create(model="claude-sonnet-4-5", input=items)
    assert raw.parse().status == "completed"
    assert raw.headers[HEADER].split(", ") == [f"input.{2 * n + 1}.encrypted_content" for n in range(len(carried))]
