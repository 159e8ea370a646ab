"""A Responses reasoning item carried in an Anthropic thinking block's signature, and back
(bridge/protocols/reasoning.py: reasoning_signature, reasoning_item)."""

import base64
import contextvars
import json

import pytest

from bridge.policy import limits
from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import encrypted_content, reasoning_item, reasoning_signature
from tests.fake_upstream import FIXTURES

ITEM = {
    "id": "rs_68c42d1d0878819d8266007cd3d1402c08fbf9b1584184ff",
    "type": "reasoning",
    "encrypted_content": "gAAAAABoxC0dvsKe9_yf1eFtIG4UOjaLmzFt3iGkRB08-5MK5q_cS_HXD3mqYjMcvWm4zNxLheKP==",
    "summary": [
        {"type": "summary_text", "text": "**Providing street crossing instructions**\n\nThe user…"},
        {"type": "summary_text", "text": "Zweiter Teil: 横断歩道 ✓"},
    ],
}


def recorded_reasoning_item():
    """The reasoning item of the recorded o3-mini answer."""
    body = json.loads((FIXTURES / "openai" / "responses_reasoning.json").read_text())
    return next(item for item in body["output"] if item["type"] == "reasoning")


def test_an_item_comes_back_byte_for_byte_in_the_upstreams_key_order():
    back = reasoning_item(reasoning_signature(ITEM))
    assert json.dumps(back, ensure_ascii=False) == json.dumps(ITEM, ensure_ascii=False)


def test_a_recorded_item_comes_back_without_its_output_status():
    item = recorded_reasoning_item()
    back = reasoning_item(reasoning_signature(item))
    assert back == {name: value for name, value in item.items() if name not in ("status", "content")}
    assert back["encrypted_content"] == item["encrypted_content"] and back["id"] == item["id"]


def test_the_raw_reasoning_text_is_not_carried():
    back = reasoning_item(reasoning_signature({**ITEM, "content": [{"type": "reasoning_text", "text": "raw"}]}))
    assert back == ITEM


@pytest.mark.parametrize("encrypted", [None, "", 5])
def test_an_item_without_encrypted_content_gets_no_signature(encrypted):
    assert reasoning_signature({**ITEM, "encrypted_content": encrypted}) == ""


def test_a_real_anthropic_signature_is_foreign():
    body = json.loads((FIXTURES / "anthropic" / "thinking.json").read_text())
    signature = next(block["signature"] for block in body["content"] if block["type"] == "thinking")
    assert signature and reasoning_item(signature) is None


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "sig",
        encrypted_content({"type": "thinking", "thinking": "t", "signature": "s"}),  # the other direction's form
        "bridge.rs.v1.!!!not base64",
        "bridge.rs.v1." + base64.urlsafe_b64encode(b"{not json").decode(),
    ],
)
def test_what_is_not_a_signature_of_ours_is_none(signature):
    assert reasoning_item(signature) is None


def signature_of(value):
    """bridge's prefix on any JSON, as a client could forge it."""
    return "bridge.rs.v1." + base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "value",
    [
        [ITEM],
        {**ITEM, "type": "message"},
        {**ITEM, "id": ""},
        {**ITEM, "encrypted_content": 7},
        {key: value for key, value in ITEM.items() if key != "encrypted_content"},
        {**ITEM, "summary": "text"},
        {**ITEM, "summary": [{"type": "summary_text", "text": 1}]},
        {**ITEM, "summary": [{"type": "reasoning_text", "text": "t"}]},
        {**ITEM, "status": "completed"},  # never written: not ours
    ],
)
def test_a_signature_that_carries_no_whole_item_is_none(value):
    assert reasoning_item(signature_of(value)) is None


def test_what_a_signature_decodes_to_counts_towards_the_requests_json_values():
    def run():
        limits.check_values(json.dumps({"pad": [1] * 698}).encode(), 1000)
        with pytest.raises(BridgeError) as refused:
            reasoning_item(signature_of({**ITEM, "summary": [{"type": "summary_text", "text": "t"}] * 200}))
        return refused.value

    refused = contextvars.copy_context().run(run)
    assert refused.status == 413 and "decoded from a thinking block's signature" in refused.message
