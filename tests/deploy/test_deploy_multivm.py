"""Two bridges behind one nginx, as deploy/nginx/bridge.conf takes more VMs: a `server` line each.

Each bridge is gunicorn from the shipped config serving the installed package, on its own
loopback port and in front of its own fake upstream (`fake` for bridge a, `other_fake` for b), so
the fakes tell which bridge passed a call on, and how many times. nginx runs two workers. A VM
that dies is its gunicorn killed, master and workers at once (SIGKILL); one stopped for an
upgrade gets SIGTERM. Every client call carries a tag of its own in its message, so that a call
sent upstream twice, by either bridge, shows.
"""

import functools
import json
import os
import re
import signal
import threading

import anthropic
import httpx2
import openai
import pytest

from bench.processes import accepts, wait_for
from tests.fake_upstream import Reply, fixture
from tests.helpers.programs import program
from tests.helpers.servers import Gate, Nginx, anthropic_client, gunicorn, nginx_binary, openai_client

nginx_binary()
program("openssl")  # for a test certificate


NGINX_WORKERS = 2
FAIL_TIMEOUT = 10  # deploy/nginx/bridge.conf's fail_timeout
# BRIDGE_GRACEFUL_TIMEOUT: a stopped bridge's drain, longer than the SDKs' 10 s read timeout, so
# that a call left waiting at a draining bridge fails the test instead of ending in a 502 after it.
GRACEFUL_TIMEOUT = 12
OPENING = 2  # events a held stream sends before the test releases the rest


TAG = re.compile(r"<call \d+>")


class Upstream:
    """A fake upstream's answers: recorded text answers in the protocol asked, streams held after
    their first events and non-streamed answers held whole while `holding`, until released."""

    def __init__(self, fake):
        self.fake = fake
        self.holding = False
        self.gates = {}  # by the tag of the call
        fake.default = self.answer

    def answer(self, recorded):
        protocol = "openai" if recorded.path.endswith("/chat/completions") else "anthropic"
        if recorded.body.get("stream"):
            reply = fixture(f"{protocol}/{'text' if protocol == 'openai' else 'text_sdk'}.sse")
            opening = OPENING
        else:
            body = fixture(f"{protocol}/text.json").body
            reply = Reply(headers={"content-type": "application/json"}, events=[body], length=len(body))
            opening = 0
        gate = reply.events = Gate(reply.events)
        gate.release(opening if self.holding else len(gate.events))
        self.gates[TAG.search(json.dumps(recorded.body)).group(0)] = gate
        return reply

    def tags(self):
        """The tag of every call that reached this upstream, as often as it did."""
        return [TAG.search(json.dumps(request.body)).group(0) for request in self.fake.requests]


class Stack:
    """Bridges a and b, each in front of its own fake upstream, behind one nginx."""

    def __init__(self, tmp_path, site, fakes, **env):
        self.tmp_path, self.site, self.env = tmp_path, site, env
        self.upstreams = {name: Upstream(fake) for name, fake in zip("ab", fakes, strict=True)}
        self.bridges = {name: self.start(name) for name in "ab"}
        self.proxy = Nginx(tmp_path, *(bridge.port for bridge in self.bridges.values()), workers=NGINX_WORKERS)
        self.tags = 0

    def start(self, name, port=None):
        """Bridge `name` started, or started again on its old port."""
        workdir = self.tmp_path / f"{name}{len(list(self.tmp_path.glob(name + '*')))}"
        return gunicorn(workdir, self.upstreams[name].fake, site=self.site, port=port, BRIDGE_WORKERS="1", **self.env)

    def hold(self, holding):
        for upstream in self.upstreams.values():
            upstream.holding = holding

    def where(self, tag):
        """The bridges whose upstream got the call tagged `tag`, once per time it got it."""
        return [name for name, upstream in self.upstreams.items() for seen in upstream.tags() if seen == tag]

    def sent_twice(self):
        tags = [tag for upstream in self.upstreams.values() for tag in upstream.tags()]
        return sorted({tag for tag in tags if tags.count(tag) > 1})

    def call(self, number, stream=False, tag=None):
        """A call through nginx, tagged: even numbers from the openai SDK, odd ones from the
        anthropic SDK. Returns its tag and the SDK's answer (a stream, when `stream`)."""
        if tag is None:
            self.tags += 1
            tag = f"<call {self.tags}>"
        messages = [{"role": "user", "content": f"hi {tag}"}]
        if number % 2 == 0:
            client = openai_client(self.proxy.url, self.proxy.cert)
            return tag, client.chat.completions.create(model="gpt-4o", messages=messages, stream=stream)
        client = anthropic_client(self.proxy.url, self.proxy.cert)
        return tag, client.messages.create(model="claude-opus-4-7", max_tokens=100, messages=messages, stream=stream)

    def open_held_streams(self):
        """Four streams, each held by its upstream after its opening: {tag: (bridge, stream)}. From
        the openai SDK, the anthropic one, the anthropic one, the openai one: with nginx's round
        robin, one of each on each bridge."""
        self.hold(True)
        streams = {}
        for number in (0, 1, 1, 0):
            tag, stream = self.call(number, stream=True)
            [bridge] = self.where(tag)
            streams[tag] = (bridge, stream)
        return streams

    def hold_a_call_on(self, bridge):
        """Non-streamed calls started one by one, each held by its upstream, until one is on
        `bridge` (round robin: the first or the second): {tag: (bridge, wait for its answer)}."""
        self.hold(True)
        waiting = {}
        while bridge not in [on for on, _ in waiting.values()]:
            assert len(waiting) < 2, waiting
            self.tags += 1
            tag = f"<call {self.tags}>"
            join = in_background(functools.partial(self.call, 0, tag=tag))
            wait_for(lambda tag=tag: self.where(tag), "the call to reach an upstream")
            [on] = self.where(tag)
            waiting[tag] = (on, join)
        return waiting

    def calls_in_a_row(self, count):
        """`count` non-streamed calls one after the other: the tags of those answered, and the
        errors of the others."""
        self.hold(False)
        answered, failed = [], []
        for number in range(count):
            try:
                tag, _ = self.call(number)
            except (openai.APIStatusError, anthropic.APIStatusError) as error:
                failed.append(error)
            else:
                answered.append(tag)
        return answered, failed

    def release(self, *tags):
        """Let the upstreams send the rest of the held answers, or of those tagged `tags`."""
        for upstream in self.upstreams.values():
            for tag, gate in upstream.gates.items():
                if not tags or tag in tags:
                    gate.release(len(gate.events) - gate.released)

    def close(self):
        self.release()
        self.proxy.stop()
        for bridge in self.bridges.values():
            bridge.stop()


@pytest.fixture
def stack(tmp_path, fake, other_fake, installed_bridge):
    stack = Stack(tmp_path, installed_bridge, (fake, other_fake), BRIDGE_GRACEFUL_TIMEOUT=str(GRACEFUL_TIMEOUT))
    yield stack
    stack.close()


def kill(bridge):
    """The VM died: gunicorn's master and its workers killed at once."""
    pid = bridge.process.pid
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        pids = [pid, *map(int, children.read().split())]
    for each in pids:
        os.kill(each, signal.SIGKILL)
    bridge.process.wait()
    # Gone once its port refuses: a worker still exiting holds the listening socket, and a
    # connection the kernel completes meanwhile takes a request that is then reset, after it
    # was sent, which nginx may not retry for a POST. A dead VM's port accepts nothing.
    wait_for(lambda: not accepts(bridge.port), "the killed bridge's port to refuse connections")


def outcome(stream):
    """What the client made of a stream read to its end: "complete" when it ended as its protocol
    ends an answer (Chat: a finish reason, then [DONE], where the SDK stops; Messages:
    message_stop), "cut" when the SDK raised at a broken connection or an error event, or the
    stream stopped short of that end. A stream that hangs fails on the SDK's 10 s read timeout."""
    ends = []
    try:
        for item in stream:
            if getattr(item, "type", None) == "message_stop":
                ends.append(item.type)
            elif getattr(item, "choices", None) and item.choices[0].finish_reason:
                ends.append(item.choices[0].finish_reason)
    except (httpx2.RemoteProtocolError, openai.APIError, anthropic.APIError) as error:
        assert not isinstance(error, (openai.APITimeoutError, anthropic.APITimeoutError)), "the stream hung"
        return "cut"
    return "complete" if ends in (["stop"], ["message_stop"]) else "cut"


def held_by(streams):
    """Which bridge holds a stream of which SDK."""
    return {(bridge, type(stream)) for bridge, stream in streams.values()}


def in_background(call):
    """Start `call()` in a thread; the returned function waits for its result (or its error)."""
    result = {}

    def run():
        try:
            result["value"] = call()
        except Exception as error:  # noqa: BLE001 - handed to the test
            result["value"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join():
        thread.join(timeout=30)
        assert not thread.is_alive(), "the call hung"
        return result["value"]

    return join


def test_both_bridges_serve_and_each_call_reaches_an_upstream_once(stack):
    answered, failed = stack.calls_in_a_row(8)
    assert not failed
    served = [bridge for tag in answered for bridge in stack.where(tag)]
    assert sorted(served) == ["a"] * 4 + ["b"] * 4  # nginx's round robin, each call once


def test_a_bridge_that_dies_cuts_its_streams_and_the_other_takes_every_new_call(stack):
    streams = stack.open_held_streams()
    assert held_by(streams) == {
        ("a", openai.Stream),
        ("a", anthropic.Stream),
        ("b", openai.Stream),
        ("b", anthropic.Stream),
    }
    waiting = stack.hold_a_call_on("a")

    kill(stack.bridges["a"])

    # The call a was answering fails (nginx's 502), and is not sent again to b.
    [(tag, answer)] = [(tag, join()) for tag, (bridge, join) in waiting.items() if bridge == "a"]
    assert stack.where(tag) == ["a"]
    assert isinstance(answer, (openai.APIStatusError, anthropic.APIStatusError)) and answer.status_code == 502
    # New calls go to b, after at most one failure per nginx worker.
    answered, failed = stack.calls_in_a_row(10)
    assert len(failed) <= NGINX_WORKERS, failed
    assert {bridge for tag in answered for bridge in stack.where(tag)} == {"b"}
    assert_new_streams_complete_on(stack, "b")
    # Streams open on a were cut; those on b, and b's held non-streamed call, end as they should.
    stack.release()
    assert {tag: outcome(stream) for tag, (_, stream) in streams.items()} == {
        tag: "cut" if bridge == "a" else "complete" for tag, (bridge, _) in streams.items()
    }
    assert all(not isinstance(join(), Exception) for bridge, join in waiting.values() if bridge == "b")
    assert stack.sent_twice() == []


def test_a_stopped_bridge_drains_its_streams_while_the_other_takes_every_new_call(stack):
    streams = stack.open_held_streams()
    on_a = [tag for tag, (bridge, _) in streams.items() if bridge == "a"]
    assert len(on_a) == 2

    stack.bridges["a"].signal(signal.SIGTERM)

    # A stream that ends within BRIDGE_GRACEFUL_TIMEOUT ends whole.
    stack.release(on_a[0])
    assert outcome(streams.pop(on_a[0])[1]) == "complete"
    answered, failed = stack.calls_in_a_row(10)
    assert len(failed) <= NGINX_WORKERS, failed
    assert_new_streams_complete_on(stack, "b")
    # One still open when the drain is over is cut.
    stack.bridges["a"].process.wait(timeout=GRACEFUL_TIMEOUT + 30)
    stack.release()
    assert {tag: outcome(stream) for tag, (_, stream) in streams.items()} == {
        tag: "cut" if bridge == "a" else "complete" for tag, (bridge, _) in streams.items()
    }
    assert stack.sent_twice() == []


def test_a_bridge_that_is_down_costs_no_call_and_gets_calls_again_after_fail_timeout(stack):
    port = stack.bridges["a"].port
    kill(stack.bridges["a"])
    # nginx had no kept-alive connection to a: each call it sends there is refused before a byte
    # of it went out, and goes to b instead.
    answered, failed = stack.calls_in_a_row(4)
    assert failed == []
    assert {bridge for tag in answered for bridge in stack.where(tag)} == {"b"}

    stack.bridges["a"] = stack.start("a", port=port)

    def reaches_a():
        answered, _ = stack.calls_in_a_row(1)
        return any("a" in stack.where(tag) for tag in answered)

    wait_for(reaches_a, "a call to reach bridge a again", timeout=FAIL_TIMEOUT + 20)


def assert_new_streams_complete_on(stack, bridge):
    """A stream from each SDK, neither held, ends whole, passed on by `bridge`."""
    stack.hold(False)
    for number in range(2):
        tag, stream = stack.call(number, stream=True)
        assert outcome(stream) == "complete"
        assert stack.where(tag) == [bridge]
