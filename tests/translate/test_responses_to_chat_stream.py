"""Chat chunks -> Responses events (bridge/translate/responses_to_chat/stream.py), fed every recorded
Chat stream and the edge cases.

What a client ends up with is folded by the openai SDK's own Responses stream state, each event
validated as the SDK's ResponseStreamEvent; what it must end up with is response.py's answer
for the same completion not streamed, the completion the openai SDK's Chat accumulator makes of
the recording.
"""

import json
import re

import pytest

from bridge.protocols.errors import BridgeError, from_openai
from bridge.protocols.reasoning import carried
from bridge.translate.responses_to_chat.response import FILTERED, to_response
from bridge.translate.responses_to_chat.stream import StreamTranslator
from bridge.translate.translator import DONE
from tests.helpers.accumulators import openai_stream_completion, responses_fold
from tests.helpers.contexts import responses_to_chat_context, translated
from tests.helpers.recorded import OPENAI_STREAMS, recorded_events

CUSTOM = {"apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": None}}
PATCH = '*** Begin Patch\n*** Add File: "a b".txt\n+caf\u00e9 \U0001f600\n*** End Patch\n'
# Codex 0.171 reads the retry delay of a rate_limit_exceeded failure with this pattern.
CODEX_RETRY_DELAY = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)")


def context(**overrides):
    return responses_to_chat_context(**{"stream": True, "summary": True, **overrides})


def run(events, eof=True, **overrides):
    return translated(StreamTranslator(context(**overrides)), events, eof)


def chunk(delta=None, finish_reason=None, usage=None):
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk"}
    body["choices"] = (
        []
        if delta is None and finish_reason is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    )
    if usage is not None:
        body["usage"] = usage
    return (None, body)


def call(index=0, call_id=None, name=None, arguments=None):
    function = {key: value for key, value in (("name", name), ("arguments", arguments)) if value is not None}
    entry = {"index": index, "function": function}
    if call_id:
        entry.update(id=call_id, type="function")
    return {"tool_calls": [entry]}


USAGE = chunk(usage={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})


def answer(*deltas, finish_reason="stop"):
    """A stream: a role chunk, the deltas, the finish, the usage chunk, [DONE]."""
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk(delta) for delta in deltas),
        chunk({}, finish_reason),
        USAGE,
        (None, DONE),
    ]


def of_type(out, kind):
    return [event for event in out if event["type"] == kind]


def joined(out, kind):
    return "".join(event["delta"] for event in of_type(out, kind))


# -- every recorded stream -------------------------------------------------------------------------


# The openai SDK types delta.content as a string: warnings on Mistral's arrays, which it cannot fold.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("summary", [True, False])
@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_the_openai_sdks_fold_of_every_recorded_stream_is_the_non_streamed_response(name, summary):
    completion = openai_stream_completion(name)
    final, _ = responses_fold(run(recorded_events(name), summary=summary))
    plain = to_response(completion, context(summary=summary))
    if "usage" not in completion:
        # No usage came (or the SDK's accumulator took a later null one): a body says 0 where the
        # stream reports its estimate; test_without_any_usage_the_usage_is_the_estimate covers it.
        final["usage"] = plain["usage"] = None
    if name == "openai/mistral_thinking_content_array.sse":
        # The SDK's accumulator drops the content arrays that carry Mistral's thinking.
        final["output"] = [item for item in final["output"] if item["type"] != "reasoning"]
        plain["output"] = [{**item, "id": item["id"][:-1] + "1"} for item in plain["output"]]
    assert final == plain


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_sequence_numbers_count_from_zero_and_the_response_opens_and_ends_as_openai_does(name):
    out = run(recorded_events(name))
    assert [event["sequence_number"] for event in out] == list(range(len(out)))
    assert [event["type"] for event in out[:2]] == ["response.created", "response.in_progress"]
    assert out[0]["response"]["status"] == "in_progress" and out[0]["response"]["output"] == []
    assert out[-1]["type"] in ("response.completed", "response.incomplete")


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_the_deltas_add_up_to_exactly_what_the_done_events_carry(name):
    out = run(recorded_events(name))
    sent, done = {}, {}
    for event in out:
        kind, _, stage = event["type"].rpartition(".")
        key = (kind, event.get("output_index"), event.get("content_index"))
        if stage == "delta":
            sent[key] = sent.get(key, "") + event["delta"]
        elif stage == "done" and kind != "response.output_item":
            value = event.get("text", event.get("arguments", event.get("input", event.get("refusal"))))
            if isinstance(value, str):
                done[key] = value
    assert sent and sent == {key: value for key, value in done.items() if key in sent}


# -- pieces ----------------------------------------------------------------------------------------


def test_reasoning_is_a_reasoning_item_whose_summary_streams_only_when_asked():
    deltas = [{"reasoning_content": "Let me "}, {"reasoning_content": "think."}, {"content": "Hi"}]
    shown = run(answer(*deltas))
    assert joined(shown, "response.reasoning_summary_text.delta") == "Let me think."
    [item] = [e["item"] for e in of_type(shown, "response.output_item.done") if e["item"]["type"] == "reasoning"]
    assert carried(item["encrypted_content"]) == {"type": "reasoning_content", "text": "Let me think."}
    hidden = run(answer(*deltas), summary=False)
    assert not [e for e in hidden if "reasoning_summary" in e["type"]]
    assert hidden[-1]["response"]["output"][0]["encrypted_content"] == item["encrypted_content"]


def test_a_refusal_streams_as_a_refusal_part_of_the_message():
    out = run(answer({"content": "Well,"}, {"refusal": "I can't "}, {"refusal": "help."}))
    assert joined(out, "response.refusal.delta") == "I can't help."
    [message] = out[-1]["response"]["output"]
    assert message["content"][1] == {"type": "refusal", "refusal": "I can't help."}
    assert [e["content_index"] for e in of_type(out, "response.content_part.added")] == [0, 1]


def test_a_content_filter_stop_without_a_refusal_adds_one():
    out = run(answer({"content": "Part"}, finish_reason="content_filter"))
    [message] = out[-1]["response"]["output"]
    assert (
        message["content"][-1] == {"type": "refusal", "refusal": FILTERED} and out[-1]["type"] == "response.completed"
    )


def test_a_tool_calls_arguments_stream_as_they_come_and_end_as_their_raw_text():
    fragments = ['{"cmd": ', '"echo', ' hi"}']
    deltas = [call(0, "call_1", "exec_command", fragments[0]), *(call(0, arguments=f) for f in fragments[1:])]
    out = run(answer(*deltas, finish_reason="tool_calls"))
    assert [e["delta"] for e in of_type(out, "response.function_call_arguments.delta")] == fragments
    [done] = of_type(out, "response.function_call_arguments.done")
    assert (done["name"], done["arguments"]) == ("exec_command", "".join(fragments))
    [item] = out[-1]["response"]["output"]
    assert (item["call_id"], item["name"], item["arguments"], item["status"]) == (
        "call_1",
        "exec_command",
        "".join(fragments),
        "completed",
    )


def test_a_call_length_cut_short_is_incomplete_with_the_text_its_deltas_sent():
    out = run(answer(call(0, "call_1", "exec_command", '{"cmd": "ec'), finish_reason="length"))
    assert out[-1]["type"] == "response.incomplete"
    [item] = out[-1]["response"]["output"]
    assert item["arguments"] == '{"cmd": "ec' and item["status"] == "incomplete"
    assert of_type(out, "response.function_call_arguments.done")[0]["arguments"] == '{"cmd": "ec'


def test_a_custom_tools_input_is_decoded_as_its_fragments_arrive():
    raw = json.dumps({"input": PATCH})
    fragments = [raw[i : i + 3] for i in range(0, len(raw), 3)]  # cuts inside every kind of escape
    deltas = [call(0, "call_p", "apply_patch", fragments[0]), *(call(0, arguments=f) for f in fragments[1:])]
    out = run(answer(*deltas, finish_reason="tool_calls"), tools=CUSTOM)
    assert joined(out, "response.custom_tool_call_input.delta") == PATCH
    [done] = of_type(out, "response.custom_tool_call_input.done")
    [item] = out[-1]["response"]["output"]
    assert done["input"] == item["input"] == PATCH and item["type"] == "custom_tool_call"
    assert not of_type(out, "response.function_call_arguments.delta")


def test_a_namespaced_tools_call_carries_its_namespace():
    tools = {"ns__close": {"kind": "function", "name": "close", "namespace": "ns"}}
    out = run(answer(call(0, "c1", "ns__close", "{}"), finish_reason="tool_calls"), tools=tools)
    [added] = [e["item"] for e in of_type(out, "response.output_item.added")]
    [item] = out[-1]["response"]["output"]
    assert (added["name"], added["namespace"]) == (item["name"], item["namespace"]) == ("close", "ns")


def test_parallel_calls_are_items_in_order_each_done_before_the_next_is_added():
    deltas = [call(0, "call_a", "ls", "{}"), call(1, "call_b", "pwd", "{}")]
    out = run(answer(*deltas, finish_reason="tool_calls"))
    kinds = [(e["type"], e["output_index"]) for e in out if e["type"].startswith("response.output_item")]
    assert kinds == [
        ("response.output_item.added", 0),
        ("response.output_item.done", 0),
        ("response.output_item.added", 1),
        ("response.output_item.done", 1),
    ]


# -- the end ---------------------------------------------------------------------------------------


def test_the_items_are_done_at_the_finish_and_the_response_after_the_usage_that_follows():
    translator = StreamTranslator(context())
    events = answer({"content": "Hi"})
    before = translated(translator, events[:3], eof=False)
    assert before[-1]["type"] == "response.output_item.done" and not translator.done
    after = translated(translator, events[3:4], eof=False)
    assert [e["type"] for e in after] == ["response.completed"] and translator.done
    assert after[0]["response"]["usage"]["input_tokens"] == 9


def test_without_any_usage_the_usage_is_the_estimate():
    out = run([chunk({"content": "Hello there"}), chunk({}, "stop"), (None, DONE)])
    usage = out[-1]["response"]["usage"]
    assert usage["input_tokens"] == 42 and usage["output_tokens"] > 0


def test_a_stream_that_ends_before_a_finish_reason_raises_and_completes_nothing():
    translator = StreamTranslator(context())
    out = translated(translator, [chunk({"content": "Hel"})], eof=False)
    with pytest.raises(BridgeError) as raised:
        translator.finish()
    assert raised.value.status == 502 and not translator.done
    failed = translator.fail(raised.value)
    assert [e["type"] for e in out + failed][-1] == "response.failed"
    assert failed[-1]["response"]["error"]["code"] == "server_error"
    responses_fold(out + failed)  # every event one the SDK takes


@pytest.mark.parametrize(
    "error, code",
    [
        ({"message": "Rate limit reached", "type": "rate_limit_exceeded"}, "rate_limit_exceeded"),
        (
            {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error"},
            "context_length_exceeded",
        ),
        ({"message": "Internal error", "type": "server_error"}, "server_error"),
    ],
)
def test_an_error_mid_stream_ends_it_with_response_failed_and_a_code_codex_acts_on(error, code):
    translator = StreamTranslator(context())
    out = translated(translator, [chunk({"content": "Hel"})], eof=False)
    with pytest.raises(BridgeError) as raised:
        translator.feed(None, {"error": error})
    failed = translator.fail(raised.value.replaced(upstream_headers={"retry-after": "2"}))
    assert [e["type"] for e in failed] == ["response.failed"]
    assert failed[0]["response"]["error"]["code"] == code
    if code == "rate_limit_exceeded":
        assert CODEX_RETRY_DELAY.search(failed[0]["response"]["error"]["message"]).group(1) == "2"
    assert translator.fail(raised.value) == []  # once
    if code != "context_length_exceeded":  # a code Codex acts on (CODEX.md §5) the SDK's types do not list
        responses_fold(out + failed)


def test_a_failure_before_the_first_chunk_still_opens_the_response_first():
    out = StreamTranslator(context()).fail(from_openai({"error": {"message": "down", "type": "server_error"}}))
    assert [e["type"] for e in out] == ["response.created", "response.in_progress", "response.failed"]
