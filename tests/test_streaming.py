"""The stream relay: events forwarded as they arrive, keep-alives in silence, errors in-band, prompt close."""

import threading
import time

import pytest
import requests

from bench.processes import wait_for
from bridge import sse, streaming, translator
from bridge.chat_to_messages.stream import StreamTranslator
from bridge.errors import ANTHROPIC, OPENAI
from bridge.streaming import CHAT_SSE, relay
from tests.fake_upstream import Reply
from tests.helpers import FRAMING, Echo, chat_to_messages_context, decoded


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
