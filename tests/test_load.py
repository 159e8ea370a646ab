"""Load: what running many streams at once found, pinned.
"""
import threading

import urllib3

from bridge import settings as settings_module, sse
from bridge.errors import ANTHROPIC
from bridge.streaming import relay
from bridge.upstream import Upstream
from tests.conftest import bridge_env
from tests.fake_upstream import fixture


class DoneAtMessageStop:
    """A translator that is done at message_stop, before the upstream body's last bytes, and
    whose finish() runs a step of the test: the moment between "done" and the relay's close."""

    def __init__(self, at_finish):
        self.done = False
        self.at_finish = at_finish

    def feed(self, name, payload):
        self.done = payload["type"] == "message_stop"
        return [payload]

    def finish(self):
        self.at_finish()
        return []


def test_a_stream_ended_early_never_closes_a_connection_the_pool_gave_to_another(fake, monkeypatch):
    """Found under load: 'upstream request failed: AttributeError' in streams of both directions.

    urllib3 gives a connection back to the pool from inside the reader's read, as the body
    ends: first into the pool, then off the response. A relay closing its response in
    between (its translator done at message_stop, or its client gone at the very end) closed
    the connection the pool had meanwhile handed to the next stream. The window is made wide
    here: giving back waits after putting the connection in the pool, and the next stream
    takes it then.
    """
    upstream = Upstream(settings_module.load(bridge_env(fake)))
    back_in_pool, first_closed = threading.Event(), threading.Event()
    put_conn = urllib3.HTTPConnectionPool._put_conn

    def put_conn_and_linger(pool, conn):
        put_conn(pool, conn)
        back_in_pool.set()
        first_closed.wait(0.5)  # still the first response's connection, for a moment

    monkeypatch.setattr(urllib3.HTTPConnectionPool, "_put_conn", put_conn_and_linger)
    second = []

    def start_the_next_stream():
        assert back_in_pool.wait(5)
        second.append(upstream.request("POST", f"{fake.url}/v1/messages", {}, {}, stream=True))

    fake.reply(fixture("anthropic/text.sse"), fixture("anthropic/text.sse", pace=0.05))
    list(relay(upstream.request("POST", f"{fake.url}/v1/messages", {}, {}, stream=True),
               DoneAtMessageStop(start_the_next_stream), ANTHROPIC, ping_interval=5))
    first_closed.set()
    decoder = sse.Decoder()
    events = [e for chunk in relay(second[0], DoneAtMessageStop(lambda: None), ANTHROPIC, 5)
              for e in decoder.feed(chunk)]
    sent = sse.Decoder().feed(b"".join(fixture("anthropic/text.sse").events))
    assert [e.event for e in events] == [e.event for e in sent], "the second stream arrives whole"
    assert len(fake.requests) == 2
