"""The stream relay: events forwarded as they arrive, keep-alives in silence, errors in-band, prompt close."""

import json
import threading
import time

import pytest
import requests

from bench.processes import wait_for
from bridge import sse, streaming, translator
from bridge.chat_to_messages.stream import StreamTranslator
from bridge.errors import ANTHROPIC, OPENAI
from bridge.streaming import CHAT_SSE, relay
from bridge.translator import DONE
from tests.fake_upstream import Flood, Reply, messages_stream
from tests.helpers import FRAMING, Echo, chat_to_messages_context, decoded, openai_fold, settled, socket_buffers


def open_stream(fake, *events, **reply):
    fake.reply(Reply(events=[sse.encode(e, event="x") for e in events], **reply))
    return requests.get(f"{fake.url}/stream", stream=True)


def test_each_event_is_translated_and_framed_in_order(fake):
    translator = Echo()
    response = open_stream(fake, '{"type":"a","n":1}', '{"type":"b","n":2}')
    events = decoded(relay(response, translator, FRAMING[ANTHROPIC], ping_interval=5))
    assert [(e.event, e.data) for e in events] == [("a", '{"type":"a","n":1}'), ("b", '{"type":"b","n":2}')]
    assert translator.finished


def test_openai_framing_is_data_only_and_done_is_passed_as_is(fake):
    response = open_stream(fake, '{"type":"a"}', "[DONE]")
    events = decoded(relay(response, Echo(OPENAI), FRAMING[OPENAI], ping_interval=5))
    assert [e.event for e in events] == [None, None] and events[-1].data == "[DONE]"


def test_a_silent_upstream_gets_keepalives_in_the_clients_protocol(fake):
    response = open_stream(fake, '{"type":"late"}', pace=0.5)
    chunks = list(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=0.1))
    assert chunks[0].startswith(b"event: ping")
    assert decoded(chunks)[-1].event == "late"
    response = open_stream(fake, '{"type":"late"}', pace=0.5)
    assert list(relay(response, Echo(OPENAI), FRAMING[OPENAI], ping_interval=0.1))[0].startswith(b": ")


@pytest.mark.parametrize(
    "protocol, check",
    [
        (ANTHROPIC, lambda e: e.event == "error" and '"api_error"' in e.data),
        (OPENAI, lambda e: e.event is None and e.data.startswith('{"error"')),
    ],
)
def test_an_upstream_dropped_mid_stream_ends_with_an_error_event(fake, protocol, check):
    response = open_stream(fake, '{"type":"a"}', '{"type":"b"}', drop_after=1)
    translator = Echo(protocol)
    events = decoded(relay(response, translator, FRAMING[protocol], ping_interval=5))
    assert events[0].data == '{"type":"a"}' and check(events[-1])
    assert not translator.finished


def test_a_translator_error_ends_the_stream_with_that_error(fake):
    response = open_stream(fake, '{"type":"boom"}', '{"type":"never"}')
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert len(events) == 1 and "translator gave up" in events[0].data


def test_non_json_data_is_an_error_event_not_a_crash(fake):
    response = open_stream(fake, "<html>oops</html>")
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert events[-1].event == "error" and "not JSON" in events[-1].data


def test_an_event_nested_past_the_parsers_limit_is_an_upstream_error_event_not_a_crash(fake):
    response = open_stream(fake, '{"type":"a","x":' + "[" * 5000 + "]" * 5000 + "}")
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert events[-1].event == "error" and "nested too deeply" in events[-1].data


def test_closing_the_client_side_closes_the_upstream_at_once(fake):
    response = open_stream(fake, *['{"type":"a"}'] * 50, pace=0.05)
    stream = relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5)
    next(stream)
    stream.close()
    deadline = time.monotonic() + 2
    while not fake.closed_streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.closed_streams and fake.closed_streams[0][1] < 50


def test_a_reader_thread_serves_the_next_stream_once_its_own_has_ended(fake):
    """Starting a thread per stream costs more CPU than relaying a short stream's events."""

    def readers():
        return {t for t in threading.enumerate() if t.name == "upstream-reader"}

    list(relay(open_stream(fake, '{"type":"a"}'), Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    wait_for(lambda: streaming.READERS.busy() == 0, "the reader to go back to its pool")
    pooled = readers()
    assert pooled, "the reader outlives its stream"
    for _ in range(3):
        events = decoded(relay(open_stream(fake, '{"type":"b"}'), Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
        assert [e.event for e in events] == ["b"]
        wait_for(lambda: streaming.READERS.busy() == 0, "the reader to go back to its pool")
    assert readers() == pooled


def test_an_upstream_that_only_pings_still_gets_the_client_keepalives(fake):
    """A ping keeps the upstream's side alive; the client's side, which sees none, needs its own."""
    start = '{"type":"message_start","message":{"id":"msg_1","usage":{}}}'
    fake.reply(
        Reply(
            events=[sse.encode(start, event="message_start")] + [sse.encode('{"type":"ping"}', event="ping")] * 6,
            pace=0.1,
        )
    )
    response = requests.get(f"{fake.url}/stream", stream=True)
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    chunks = list(relay(response, translator, CHAT_SSE, ping_interval=0.25))
    assert chunks[0].startswith(b"data: {")  # the role chunk
    assert CHAT_SSE.keepalive in chunks[1:], chunks


class Silent(translator.StreamTranslator):
    """A translator for which the upstream's events hold nothing for the client (unshown thinking)."""

    protocol = ANTHROPIC

    def feed(self, name, payload):
        return []

    def finish(self):
        return []


def test_a_client_is_probed_while_upstream_events_bring_it_nothing(fake):
    """Events that arrive but produce no write must not stop the probes that notice a client gone."""
    response = open_stream(fake, *['{"type":"thinking"}'] * 8, pace=0.1)
    chunks = list(relay(response, Silent(), FRAMING[ANTHROPIC], ping_interval=30))
    assert streaming._PROBE in chunks, chunks


def waiting(call):
    """Run `call` in a thread; the thread, and a list that gets its result."""
    result = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    return thread, result


def test_the_reader_waits_while_a_reads_worth_is_not_taken():
    handover = streaming._Handover(limit=10)
    assert handover.put(["a"], 5, timeout=60)
    thread, result = waiting(lambda: handover.put(["b"], 5, timeout=60))
    thread.join(0.3)
    assert thread.is_alive() and not result, "the reader went on with the hand-over full"
    assert handover.take(timeout=5) == [["a"], ["b"]]
    thread.join(5)
    assert result == [True]


def test_closing_the_hand_over_releases_a_reader_waiting_for_room():
    handover = streaming._Handover(limit=10)
    thread, result = waiting(lambda: handover.put(["a"], 10, timeout=60))
    thread.join(0.3)
    handover.close()
    thread.join(5)
    assert result == [False] and not handover.stalled


def test_a_reader_that_waits_out_the_stall_timeout_stops_and_says_so():
    handover = streaming._Handover(limit=10)
    assert not handover.put(["a"], 10, timeout=0.1)
    assert handover.stalled


def test_closing_the_client_side_releases_a_reader_waiting_on_a_full_hand_over(fake):
    """The pooled reader must come back even when it is not in recv() but waiting for the client."""
    upstream = Flood()
    fake.reply(Reply(events=upstream))
    response = requests.get(f"{fake.url}/stream", stream=True)
    stream = relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5, client_stall_timeout=60)
    next(stream)
    settled(upstream, socket_buffers())  # the reader waits: the upstream can send no more
    stream.close()
    wait_for(lambda: streaming.READERS.busy() == 0, "the reader to go back to its pool")
    wait_for(lambda: fake.closed_streams, "the upstream to be closed")


def test_a_slow_client_gets_every_event_in_order_though_the_reader_waits_for_it(fake):
    """The reader fills the hand-over and waits many times over (half a MiB of events, a 64 KiB bound):
    the SDK's accumulator still gets each piece of text once, in order."""
    pieces = [f"<{n}>" + "." * 1000 for n in range(500)]
    fake.reply(messages_stream(pieces))
    response = requests.get(f"{fake.url}/stream", stream=True)
    chunks = []
    for chunk in relay(response, StreamTranslator(chat_to_messages_context(stream=True)), CHAT_SSE, ping_interval=5):
        chunks.append(chunk)
        time.sleep(0.02)  # slower than the upstream: the reader reaches the bound meanwhile
    completion = openai_fold(json.loads(event.data) for event in decoded(chunks) if event.data != DONE)
    assert completion["choices"][0]["message"]["content"] == "".join(pieces)
