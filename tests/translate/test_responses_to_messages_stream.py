"""Messages events -> Responses events (bridge/translate/responses_to_messages/stream.py), fed every recorded stream.

What a client ends up with is folded by the openai SDK's own Responses stream state,
each event parsed (and validated) as the SDK's ResponseStreamEvent. What it must end
up with is response.py's answer for the same message non-streamed, the message built
from the recording by the anthropic SDK's own fold of it.
"""

import copy
import json
import re

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import thinking_block
from bridge.translate.responses_to_messages.response import to_response
from bridge.translate.responses_to_messages.stream import StreamTranslator
from tests.fake_upstream import FIXTURES
from tests.helpers.accumulators import RESPONSES_EVENT as EVENT
from tests.helpers.accumulators import responses_fold as sdk_fold
from tests.helpers.contexts import responses_to_messages_context
from tests.helpers.recorded import recorded_events

STREAMS = sorted(path.name for path in (FIXTURES / "anthropic").glob("*.sse"))
COMPLETE = [name for name in STREAMS if name != "error_midstream_overloaded.sse"]
CUT_OFF = ["cache_read.sse", "cache_write.sse", "max_tokens_mid_tool.sse"]  # stop_reason max_tokens
CUSTOM = {"apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": None}}
# Codex 0.171 reads the retry delay of a rate_limit_exceeded failure with this pattern.
CODEX_RETRY_DELAY = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)")


def context(**overrides):
    return responses_to_messages_context(**{"stream": True, "summary": True, **overrides})


def run(upstream, **overrides):
    """Every outgoing event for a recorded stream's name or a list of (event, data) pairs."""
    translator = StreamTranslator(context(**overrides))
    out = []
    for event, data in recorded_events(f"anthropic/{upstream}") if isinstance(upstream, str) else upstream:
        out.extend(translator.feed(event, data))
    return out + translator.finish()


def non_streamed(upstream):
    """The same answer as one message: the anthropic SDK's own fold of the stream."""
    snapshot, buffers, usage = None, {}, {}
    for _, data in recorded_events(f"anthropic/{upstream}") if isinstance(upstream, str) else upstream:
        if data["type"] in ("ping", "error"):
            continue
        snapshot = accumulate_event(event=copy.deepcopy(data), current_snapshot=snapshot, json_bufs=buffers)
        usage = data.get("usage") or usage
    message = snapshot.to_dict(warnings=False)  # (compaction blocks are newer than the SDK's types)
    if "iterations" in usage:  # a body carries every billed iteration; the SDK's fold keeps only known fields
        message["usage"]["iterations"] = usage["iterations"]
    return message


def of_type(out, kind):
    return [event for event in out if event["type"] == kind]


def with_tool(name, tool_name, fragments):
    """tool_use.sse with its tool renamed and its input streamed as `fragments`."""
    pairs = recorded_events("anthropic/tool_use.sse")
    starts = [
        i
        for i, (_, d) in enumerate(pairs)
        if d["type"] == "content_block_start" and d["content_block"]["type"] == "tool_use"
    ]
    index = pairs[starts[0]][1]["index"]
    pairs[starts[0]][1]["content_block"]["name"] = tool_name
    kept = [pair for pair in pairs if not (pair[1]["type"] == "content_block_delta" and pair[1]["index"] == index)]
    position = kept.index(pairs[starts[0]]) + 1
    deltas = [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            },
        )
        for fragment in fragments
    ]
    return kept[:position] + deltas + kept[position:]


def before_message_stop(name):
    return [pair for pair in recorded_events(f"anthropic/{name}") if pair[1]["type"] != "message_stop"]


# -- the final response ----------------------------------------------------------------------------


@pytest.mark.parametrize("summary", [True, False])
@pytest.mark.parametrize("rebuild", [False, True], ids=["final-output", "rebuilt-from-items"])
@pytest.mark.parametrize("name", COMPLETE)
def test_the_openai_sdks_fold_of_every_completed_stream_is_the_non_streamed_response(name, rebuild, summary):
    """But for a call max_tokens cut short: its arguments are what the stream sent of them."""
    out = run(name, summary=summary)
    final, _ = sdk_fold(out, rebuild)
    assert final == as_streamed(to_response(non_streamed(name), context(summary=summary)), out)


def as_streamed(response, out):
    """A response with its cut-off calls' arguments as the stream's deltas sent them."""
    sent = {}
    for event in of_type(out, "response.function_call_arguments.delta"):
        sent[event["output_index"]] = sent.get(event["output_index"], "") + event["delta"]
    for index, item in enumerate(response["output"]):
        if item["type"] == "function_call" and item["status"] == "incomplete":
            item["arguments"] = sent.get(index, "")
    return response


@pytest.mark.parametrize("name", COMPLETE)
def test_the_deltas_add_up_to_what_the_done_events_carry(name):
    """Exactly, for every piece but a finished call's arguments: those are the same JSON, re-written whole."""
    out = run(name)
    cut = {
        e["output_index"] for e in of_type(out, "response.output_item.done") if e["item"].get("status") == "incomplete"
    }
    sent = {}
    for event in out:
        if event["type"].endswith(".delta"):
            key = (event["type"].rsplit(".", 1)[0], event["output_index"], event.get("content_index"))
            sent[key] = sent.get(key, "") + event["delta"]
    done = {}
    for event in out:
        if event["type"].endswith(".done") and event["type"] != "response.output_item.done":
            kind = event["type"].rsplit(".", 1)[0]
            value = event.get("text", event.get("arguments", event.get("input", event.get("refusal"))))
            if isinstance(value, str):
                done[(kind, event["output_index"], event.get("content_index"))] = value
    assert set(sent) <= set(done)
    for key, value in sent.items():
        if key[0] == "response.function_call_arguments" and key[1] not in cut:
            assert json.loads(value) == json.loads(done[key])  # the fragments' JSON, re-written whole
        else:
            assert value == done[key]


@pytest.mark.parametrize("name", COMPLETE)
def test_sequence_numbers_count_from_zero_one_by_one_and_the_response_opens_and_ends_as_openai_does(name):
    out = run(name)
    assert [event["sequence_number"] for event in out] == list(range(len(out)))
    assert [event["type"] for event in out[:2]] == ["response.created", "response.in_progress"]
    assert out[0]["response"]["status"] == "in_progress" and out[0]["response"]["output"] == []
    assert out[-1]["type"] in ("response.completed", "response.incomplete")
    assert not [event for event in out[:-1] if event["type"] in ("response.completed", "response.incomplete")]


@pytest.mark.parametrize("name", COMPLETE)
def test_every_item_is_added_before_its_deltas_and_done_after_them(name):
    out = run(name)
    added, done = {}, {}
    for position, event in enumerate(out):
        if event["type"] == "response.output_item.added":
            added[event["output_index"]] = position
        elif event["type"] == "response.output_item.done":
            done[event["output_index"]] = position
        elif "output_index" in event:
            index = event["output_index"]
            assert index in added and index not in done, event
            assert event["item_id"] == out[added[index]]["item"]["id"]
    assert sorted(added) == sorted(done) == list(range(len(added)))
    assert all(added[index] < done[index] for index in added)
    assert [out[done[i]]["item"] for i in sorted(done)] == out[-1]["response"]["output"]


def test_each_upstream_fragment_goes_out_as_it_arrives():
    for name, kinds in [("thinking.sse", ("text_delta", "thinking_delta")), ("tool_use.sse", ("input_json_delta",))]:
        translator = StreamTranslator(context())
        for event, data in recorded_events(f"anthropic/{name}"):
            out = translator.feed(event, data)
            delta = data.get("delta") or {}
            fragment = delta.get("text") or delta.get("thinking") or delta.get("partial_json")
            if data["type"] == "content_block_delta" and delta["type"] in kinds and fragment:
                assert [event["delta"] for event in out if event["type"].endswith(".delta")] == [fragment]


def test_an_upstream_ping_produces_nothing():
    translator = StreamTranslator(context())
    translator.feed("message_start", recorded_events("anthropic/text.sse")[0][1])
    assert translator.feed("ping", {"type": "ping"}) == []


def test_the_final_usage_counts_cache_reads_and_writes_as_input_and_thinking_as_reasoning():
    usage = run("thinking_tool_use.sse")[-1]["response"]["usage"]
    assert usage["output_tokens_details"] == {"reasoning_tokens": 53}
    cached = run("cache_read.sse")[-1]["response"]["usage"]
    assert (cached["input_tokens"], cached["input_tokens_details"]) == (
        11 + 1031,
        {"cached_tokens": 1031, "cache_write_tokens": 0},
    )
    written = run("cache_write.sse")[-1]["response"]["usage"]
    assert (written["input_tokens"], written["input_tokens_details"]) == (
        18 + 1031,
        {"cached_tokens": 0, "cache_write_tokens": 1031},
    )


def test_a_null_usage_count_in_message_delta_leaves_the_earlier_count_standing():
    pairs = recorded_events("anthropic/cache_read.sse")
    [delta] = [data for _, data in pairs if data["type"] == "message_delta"]
    delta["usage"].update(input_tokens=None, cache_read_input_tokens=None)
    usage = run(pairs)[-1]["response"]["usage"]
    assert (usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]) == (11 + 1031, 1031)
    assert usage == to_response(non_streamed(pairs), context())["usage"], "as the anthropic SDK folds it"


# -- items -----------------------------------------------------------------------------------------


def test_tool_use_streams_as_a_function_call_under_the_clients_name_and_namespace():
    tools = {"get_weather": {"kind": "function", "name": "get_weather", "namespace": "weather"}}
    out = run("tool_use.sse", tools=tools)
    [added] = [e["item"] for e in of_type(out, "response.output_item.added") if e["item"]["type"] == "function_call"]
    assert (added["call_id"], added["name"], added["namespace"], added["arguments"]) == (
        "toolu_01NRLabsLyVHZPKxbKvkfSMn",
        "get_weather",
        "weather",
        "",
    )
    [done] = of_type(out, "response.function_call_arguments.done")
    assert json.loads(done["arguments"]) == {"location": "Paris"}
    assert (
        "".join(e["delta"] for e in of_type(out, "response.function_call_arguments.delta")) == '{"location": "Paris"}'
    )


PATCH = '*** Begin Patch\n*** Add File: "a b".txt\n+caf\u00e9 \U0001f600 \\ tab\t\n*** End Patch\n'


def test_a_custom_tools_input_text_is_decoded_and_forwarded_as_its_fragments_arrive():
    raw = json.dumps({"input": PATCH})  # escapes: \n \" \u00e9 \ud83d\ude00 \\ \t
    opening, content = '{"input": "', raw[len('{"input": "') : -2]
    fragments = [raw[i : i + 3] for i in range(0, len(raw), 3)]  # cuts inside every kind of escape
    translator = StreamTranslator(context(tools=CUSTOM))
    arrived, sent = "", []
    for event, data in with_tool("tool_use.sse", "apply_patch", fragments):
        out = translator.feed(event, data)
        if data["type"] == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            arrived += data["delta"]["partial_json"]
            sent += [e["delta"] for e in out if e["type"] == "response.custom_tool_call_input.delta"]
            assert "".join(sent) == whole_text(arrived[len(opening) :][: len(content)]), "all that is whole, at once"
    final = out[-1]["response"]  # message_stop came last
    [call] = [item for item in final["output"] if item["type"] == "custom_tool_call"]
    assert (call["name"], call["input"], call["call_id"]) == ("apply_patch", PATCH, "toolu_01NRLabsLyVHZPKxbKvkfSMn")
    assert "".join(sent) == PATCH


def whole_text(content):
    """The text of the longest start of JSON string content that ends on a whole character."""
    for end in range(len(content), -1, -1):
        try:
            text = json.loads(f'"{content[:end]}"')
        except ValueError:
            continue
        if not text or not "\ud800" <= text[-1] <= "\udbff":
            return text
    return ""


@given(text=st.text(), cuts=st.lists(st.integers(0, 400)))
@settings(max_examples=150, deadline=None)
def test_a_custom_tools_input_deltas_always_join_to_its_text(text, cuts):
    raw = json.dumps({"input": text}, ensure_ascii=bool(len(cuts) % 2))
    points = sorted({0, len(raw), *[cut for cut in cuts if cut < len(raw)]})
    out = run(
        with_tool("tool_use.sse", "apply_patch", [raw[a:b] for a, b in zip(points, points[1:], strict=False)]),
        tools=CUSTOM,
    )
    assert "".join(e["delta"] for e in of_type(out, "response.custom_tool_call_input.delta")) == text
    assert [e["input"] for e in of_type(out, "response.custom_tool_call_input.done")] == [text]


def test_a_custom_tools_input_in_another_shape_is_sent_whole_at_the_blocks_end():
    out = run(with_tool("tool_use.sse", "apply_patch", ['{"note": 1, ', '"input": "x"}']), tools=CUSTOM)
    assert [e["delta"] for e in of_type(out, "response.custom_tool_call_input.delta")] == ["x"]


def test_the_json_format_tool_streams_as_the_messages_output_text():
    out = run(with_tool("tool_use.sse", "json_answer", ['{"city": ', '"Paris"}']), json_tool="json_answer")
    assert not of_type(out, "response.function_call_arguments.delta")
    assert [e["delta"] for e in of_type(out, "response.output_text.delta")][-2:] == ['{"city": ', '"Paris"}']
    final = out[-1]["response"]
    assert final["status"] == "completed" and [item["type"] for item in final["output"]] == ["message"]
    assert json.loads(final["output"][0]["content"][-1]["text"]) == {"city": "Paris"}


def test_thinking_streams_as_summary_text_only_when_a_summary_was_asked_for():
    shown, hidden = run("thinking.sse", summary=True), run("thinking.sse", summary=False)
    assert of_type(shown, "response.reasoning_summary_part.added")
    assert (
        "".join(e["delta"] for e in of_type(shown, "response.reasoning_summary_text.delta"))
        == of_type(shown, "response.reasoning_summary_text.done")[0]["text"]
    )
    assert not [e for e in hidden if e["type"].startswith("response.reasoning_summary")]
    for out in (shown, hidden):
        [reasoning] = [e["item"] for e in of_type(out, "response.output_item.done") if e["item"]["type"] == "reasoning"]
        block = thinking_block(reasoning["encrypted_content"])
        assert block["type"] == "thinking" and block["signature"].startswith("EuYDCm"), "the signed block, always"


def test_redacted_thinking_streams_as_a_reasoning_item_carrying_its_data():
    out = run("redacted_thinking.sse")
    items = [e["item"] for e in of_type(out, "response.output_item.done") if e["item"]["type"] == "reasoning"]
    starts = [
        d["content_block"]
        for _, d in recorded_events("anthropic/redacted_thinking.sse")
        if d["type"] == "content_block_start" and d["content_block"]["type"] == "redacted_thinking"
    ]
    assert [thinking_block(item["encrypted_content"]) for item in items] == starts
    assert all(item["summary"] == [] for item in items)


def test_a_refusal_streams_as_a_refusal_part_of_the_message():
    out = run("refusal.sse")
    [stop_details] = [
        d["delta"]["stop_details"] for _, d in recorded_events("anthropic/refusal.sse") if d["type"] == "message_delta"
    ]
    assert [e["delta"] for e in of_type(out, "response.refusal.delta")] == [stop_details["explanation"]]
    assert out[-1]["type"] == "response.completed"
    assert out[-1]["response"]["output"][0]["content"] == [{"type": "refusal", "refusal": stop_details["explanation"]}]


# -- cut off, broken, failed -----------------------------------------------------------------------


@pytest.mark.parametrize("name", CUT_OFF)
def test_max_tokens_ends_with_response_incomplete_reason_max_output_tokens(name):
    last = run(name)[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["response"]["output"][-1]["status"] == "incomplete"


def test_a_tool_call_cut_off_by_max_tokens_is_an_incomplete_item_whose_arguments_are_its_deltas_text():
    """Not a re-written partial parse: the raw text the deltas sent, in the .done event and the item."""
    out = run("max_tokens_mid_tool.sse")
    raw = "".join(
        data["delta"]["partial_json"]
        for _, data in recorded_events("anthropic/max_tokens_mid_tool.sse")
        if data["type"] == "content_block_delta" and data["delta"]["type"] == "input_json_delta"
    )
    assert raw.startswith('{"filename": "taxes.txt", "lines_of_text": [\n"# COMPREHENSIVE TAX GUIDE')
    assert "".join(e["delta"] for e in of_type(out, "response.function_call_arguments.delta")) == raw
    [done] = of_type(out, "response.function_call_arguments.done")
    [call] = [e["item"] for e in of_type(out, "response.output_item.done") if e["item"]["type"] == "function_call"]
    [final] = [item for item in out[-1]["response"]["output"] if item["type"] == "function_call"]
    assert done["arguments"] == call["arguments"] == final["arguments"] == raw
    assert call["status"] == final["status"] == "incomplete"


def test_a_custom_tool_call_cut_off_by_max_tokens_carries_the_input_text_its_deltas_sent():
    fragments = ['{"input": "*** Begin Patch\\n', "*** Add File: a.txt\\n+caf\\u00"]
    events = with_tool("tool_use.sse", "apply_patch", fragments)
    stop = next(data for _, data in events if data["type"] == "message_delta")
    stop["delta"]["stop_reason"] = "max_tokens"
    out = run(events, tools=CUSTOM)
    sent = "".join(e["delta"] for e in of_type(out, "response.custom_tool_call_input.delta"))
    assert sent == "*** Begin Patch\n*** Add File: a.txt\n+caf"
    [done] = of_type(out, "response.custom_tool_call_input.done")
    [final] = [item for item in out[-1]["response"]["output"] if item["type"] == "custom_tool_call"]
    assert done["input"] == final["input"] == sent and final["status"] == "incomplete"


@pytest.mark.parametrize("name", COMPLETE)
def test_a_stream_that_ends_before_message_stop_raises_and_completes_nothing(name):
    translator = StreamTranslator(context())
    out = [event for pair in before_message_stop(name) for event in translator.feed(*pair)]
    with pytest.raises(BridgeError) as raised:
        translator.finish()
    assert raised.value.status == 502 and not translator.done
    assert not [e for e in out if e["type"] in ("response.completed", "response.incomplete")]


def fail_midway(error, name="text.sse"):
    """Feed a stream up to its message_delta, then fail it: the events that end the client's stream."""
    translator = StreamTranslator(context())
    out = []
    for pair in recorded_events(f"anthropic/{name}"):
        if pair[1]["type"] == "message_delta":
            break
        out += translator.feed(*pair)
    ending = translator.fail(error)
    assert translator.done and translator.feed("message_stop", {"type": "message_stop"}) == []
    return out, ending


def test_an_upstream_error_event_raises_and_the_stream_ends_in_response_failed_server_error():
    translator = StreamTranslator(context())
    out = []
    with pytest.raises(BridgeError) as raised:
        for pair in recorded_events("anthropic/error_midstream_overloaded.sse"):
            out += translator.feed(*pair)
    assert raised.value.kind == "overloaded"
    [failed] = translator.fail(raised.value)
    out.append(failed)
    assert failed["type"] == "response.failed" and failed["sequence_number"] == len(out) - 1
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "Overloaded"}
    assert failed["response"]["output"] == [], "no half-finished item is handed over as done"
    assert translator.done and translator.finish() == []


def test_a_failure_keeps_the_items_already_done():
    out, [failed] = fail_midway(BridgeError("api_error", "boom"), "tool_use.sse")
    done = [e["item"] for e in of_type(out, "response.output_item.done")]
    assert [item["type"] for item in done] == ["message"]
    assert failed["response"]["output"] == done


def test_a_rate_limit_with_a_known_delay_fails_with_rate_limit_exceeded_and_the_delay_codex_reads():
    _, [failed] = fail_midway(
        BridgeError(
            "rate_limit",
            "Number of request tokens has exceeded your rate limit.",
            upstream_headers={"retry-after": "2"},
        )
    )
    error = failed["response"]["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert CODEX_RETRY_DELAY.search(error["message"]).group(1) == "2"
    _, [without_delay] = fail_midway(BridgeError("rate_limit", "Rate limited"))
    assert without_delay["response"]["error"] == {"code": "rate_limit_exceeded", "message": "Rate limited"}


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 208310 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 180000 + 40000 > 200000, "
        "decrease input length or `max_tokens` and try again",
        "This model's maximum context length is 200000 tokens. However, you requested 210000 tokens.",
    ],
)
def test_a_prompt_too_long_fails_with_context_length_exceeded(message):
    """Recognised as the other fronts recognise an overflow (bridge/protocols/overflow.py), whoever worded it."""
    detail = {"type": "invalid_request_error", "message": message}
    _, [failed] = fail_midway(BridgeError("invalid_request", message, upstream_detail=detail))
    assert failed["response"]["error"] == {"code": "context_length_exceeded", "message": message}


def test_a_failure_before_message_start_still_opens_the_response_first():
    translator = StreamTranslator(context())
    out = translator.fail(BridgeError("overloaded", "Overloaded"))
    assert [e["type"] for e in out] == ["response.created", "response.in_progress", "response.failed"]
    assert [e["sequence_number"] for e in out] == [0, 1, 2]
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in out:
        state.handle_event(EVENT.validate_python(event))


def test_nothing_goes_out_after_the_last_event():
    translator = StreamTranslator(context())
    for pair in recorded_events("anthropic/text.sse"):
        translator.feed(*pair)
    assert translator.done
    assert translator.feed("message_stop", {"type": "message_stop"}) == []
    assert translator.fail(BridgeError("api_error", "late")) == [] and translator.finish() == []


def test_a_failure_in_the_last_events_still_ends_the_stream_with_response_failed():
    """message_stop's own events can fail (a tool input that is no JSON): fail() must still answer."""
    translator = StreamTranslator(context())
    start = recorded_events("anthropic/text.sse")[0]
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    translator.feed(*start)
    translator.feed("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
    translator.feed(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "]]garbage"}},
    )
    translator.feed("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}})
    with pytest.raises(BridgeError) as caught:
        translator.feed("message_stop", {"type": "message_stop"})
    out = translator.fail(caught.value)
    assert [e["type"] for e in out] == ["response.failed"] and translator.done
