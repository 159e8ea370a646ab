"""Admission control, client deadlines and stopping, through gunicorn from deploy/gunicorn.conf.py
(bridge/serve/worker.py, bridge/policy/admission.py): a request on a busy bridge waits a moment for a thread
and is then refused, health checks never wait, a slow client is cut,
one client key cannot take every thread, and a stopping bridge refuses new connections."""

import concurrent.futures
import contextlib
import json
import re
import select
import signal
import socket
import time

import anthropic
import openai
import pytest
import requests

from bench.processes import accepts
from tests.fake_upstream import Reply, fixture
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error
from tests.helpers.servers import Gate, anthropic_client, gunicorn, metric, open_text_streams, parsed
from tests.helpers.servers import openai_client as sdk_client

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-5.5", "input": "hi"}


@pytest.fixture
def start(tmp_path, fake, installed_bridge):
    """Start gunicorn serving the installed package, one worker unless told: `start(**env)`."""
    started = []

    def start_gunicorn(**env):
        server = gunicorn(tmp_path / str(len(started)), fake, site=installed_bridge, **{"BRIDGE_WORKERS": "1", **env})
        started.append(server)
        return server

    yield start_gunicorn
    for server in started:
        server.stop()


@contextlib.contextmanager
def streams_under_way(server, fake, count, api_key="sk-client"):
    """`count` gated Chat streams whose first text has arrived, each parked in the stream loop
    or holding a request thread: yields (upstream, client chunks) pairs, released at the end."""
    opened = []
    try:
        opened = open_text_streams(server.url, fake, count, api_key)
        yield opened
    finally:
        for upstream, _ in opened:
            upstream.release_rest()


@contextlib.contextmanager
def calls_holding_threads(server, fake, count, api_key):
    """`count` non-streamed Chat calls from `api_key`, each holding a request thread: their
    answers' heads have come, their bodies wait for the end of the block, then arrive whole."""
    body = fixture("anthropic/text.json").body
    gates = [Gate([body[:1], body[1:]]) for _ in range(count)]
    for gate in gates:
        gate.release()
        fake.reply(Reply(headers={"content-type": "application/json"}, events=gate, length=len(body)))
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        client = sdk_client(server.url, api_key=api_key)
        calls = [pool.submit(client.chat.completions.create, **CHAT) for _ in range(count)]
        try:
            server.wait_for(lambda: all(gate.sent for gate in gates), f"{count} calls holding threads")
            yield
        finally:
            for gate in gates:
                gate.release()
        assert all(call.result().choices[0].message.content for call in calls)


def finish(opened):
    """Release the gated streams and check that each arrived whole."""
    for upstream, chunks in opened:
        upstream.release_rest()
        rest = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert rest == [text for _, text in upstream.texts[1:]]


def post(server, path, body, **headers):
    return requests.post(f"{server.url}{path}", json=body, headers=headers, timeout=10)


def trickle(port, at_once, slowly, interval=0.25, limit=15.0):
    """Send `at_once`, then `slowly` a byte every `interval` seconds, until the bridge ends the
    connection: returns (bytes of `slowly` sent, what the bridge answered). A hang guard: an
    AssertionError when the connection is still open after `limit` seconds."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(at_once)
        sent, answer = 0, b""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if select.select([sock], [], [], interval)[0]:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    return sent, answer
                if not chunk:
                    return sent, answer
                answer += chunk
            elif sent < len(slowly):
                try:
                    sock.send(slowly[sent : sent + 1])
                except OSError:  # reset: the bridge closed it
                    return sent, answer
                sent += 1
        raise AssertionError(f"the connection is still open after {limit}s, {sent} bytes sent slowly")


@contextlib.contextmanager
def reading_nothing(server, chat):
    """A client that sends a Chat request and then reads nothing (a 4 KB receive buffer): yields its socket."""
    body = json.dumps(chat).encode()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer sk-client\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        yield sock


def test_a_burst_beyond_capacity_is_refused_at_once_in_each_protocol_and_health_checks_answer(start, fake):
    """Capacity is the stream loop's streams plus the request threads: two streams park in the
    loop, the next four keep a thread each, and then nothing more is taken; with
    BRIDGE_QUEUE_TIMEOUT=0 nothing waits for a thread either."""
    server = start(BRIDGE_THREADS="4", BRIDGE_STREAMS_PER_WORKER="2", BRIDGE_QUEUE_TIMEOUT="0")
    with streams_under_way(server, fake, 6) as opened:
        burst = [("/v1/chat/completions", CHAT, {}), ("/v1/responses", RESPONSES, {})] * 4
        burst += [("/v1/messages", MESSAGES, ANTHROPIC_HEADERS)] * 4
        with concurrent.futures.ThreadPoolExecutor(len(burst)) as pool:
            answers = list(pool.map(lambda request: (request[0], post(server, *request[:2], **request[2])), burst))
        for path, answer in answers:
            if path == "/v1/messages":  # Anthropic's own overload
                assert is_anthropic_error(answer, 503, "overloaded_error"), answer.text
            else:
                assert is_openai_error(answer, 503), answer.text
            assert answer.headers["retry-after"] == "5"
            assert "BRIDGE_THREADS" in answer.text and answer.headers["request-id"]
            assert "came free within" not in answer.text  # it did not wait
        with pytest.raises(anthropic.ServiceUnavailableError):  # what the SDK makes of it, and retries
            anthropic.Anthropic(base_url=server.url, api_key="sk-client", max_retries=0).messages.create(**MESSAGES)
        for path in ("/healthz", "/readyz"):
            assert requests.get(f"{server.url}{path}", timeout=10).status_code == 200
        assert fake.requests[6:] == []  # nothing refused went upstream
        assert metric(server, "bridge_queue_wait_seconds_count") == 0  # refused without waiting
        finish(opened)

    fake.reply(fixture("anthropic/text.json"), fixture("openai/text.json"))
    assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content
    assert post(server, "/v1/messages", MESSAGES, **ANTHROPIC_HEADERS).status_code == 200
    assert "Traceback" not in server.log()


def test_requests_one_after_another_on_the_last_thread_are_never_refused(start, fake):
    """A client sees an answer end before its thread has finished with it (access log, closing):
    its next request, on a new connection, must not find that thread busy."""
    server = start(BRIDGE_THREADS="1")
    for _ in range(25):  # each a chance to catch the race
        fake.reply(fixture("anthropic/text.sse"), fixture("anthropic/text.json"))
        with requests.post(
            f"{server.url}/v1/chat/completions", json={**CHAT, "stream": True}, stream=True, timeout=10
        ) as streamed:
            body = b"".join(streamed.iter_content(None))
            assert streamed.status_code == 200 and b"[DONE]" in body, (streamed.status_code, body[-300:])
        assert post(server, "/v1/chat/completions", CHAT).status_code == 200


# -- waiting for a thread (BRIDGE_QUEUE_TIMEOUT) ---------------------------------------------------


def start_one_thread(start, queue_timeout, **env):
    """A worker of one request thread and no stream loop: a gated stream holds the thread."""
    return start(BRIDGE_THREADS="1", BRIDGE_STREAMS_PER_WORKER="0", BRIDGE_QUEUE_TIMEOUT=queue_timeout, **env)


def waiting(server, count):
    server.wait_for(lambda: metric(server, "bridge_queued_requests") == count, f"{count} request(s) waiting")


def test_requests_that_find_every_thread_busy_wait_for_one_and_health_checks_do_not(start, fake):
    """The one thread held by a stream for less than the queue timeout: a request in each protocol
    waits, in arrival order, and is served once the stream ends; /healthz and /metrics meanwhile
    answer at once (the queue would hold them for 60 s)."""
    server = start_one_thread(start, "60")
    with streams_under_way(server, fake, 1) as opened, concurrent.futures.ThreadPoolExecutor(2) as pool:
        fake.reply(fixture("anthropic/text.json"), fixture("openai/text.json"))
        chat = pool.submit(sdk_client(server.url).chat.completions.create, **CHAT)
        waiting(server, 1)  # told by /metrics, itself never queued
        messages = pool.submit(anthropic_client(server.url).messages.create, **MESSAGES)
        waiting(server, 2)
        for path in ("/healthz", "/readyz", "/healthz?probe=lb"):
            assert requests.get(f"{server.url}{path}", timeout=5).status_code == 200
        assert not chat.done() and not messages.done()
        finish(opened)
        assert chat.result().choices[0].message.content
        assert messages.result().content[0].text
    assert metric(server, "bridge_queue_wait_seconds_count", outcome="served") == 2
    assert metric(server, "bridge_queue_wait_seconds_count", outcome="refused") == 0
    assert [r.path for r in fake.requests[1:]] == ["/v1/messages", "/v1/chat/completions"]  # in arrival order


def test_a_request_that_waits_past_the_queue_timeout_gets_a_503_in_its_protocol(start, fake):
    # The header deadline, which ends a wait too, beyond the clients' 10 s timeout.
    server = start_one_thread(start, "1", BRIDGE_CLIENT_HEADER_TIMEOUT="60")
    with streams_under_way(server, fake, 1) as opened:  # held for longer than the timeout
        with pytest.raises(openai.APIStatusError) as chat:
            sdk_client(server.url).chat.completions.create(**CHAT)
        with pytest.raises(anthropic.ServiceUnavailableError) as messages:
            anthropic_client(server.url).messages.create(**MESSAGES)
        assert is_openai_error(chat.value.response, 503)
        assert is_anthropic_error(messages.value.response, 503, "overloaded_error")
        for refused in (chat.value.response, messages.value.response):
            assert refused.headers["retry-after"] == "5" and "within 1s (BRIDGE_QUEUE_TIMEOUT" in refused.text
        assert len(fake.requests) == 1  # the stream's: nothing refused went upstream
        finish(opened)
    assert metric(server, "bridge_queue_wait_seconds_count", outcome="refused") == 2
    assert metric(server, "bridge_queued_requests") == 0
    fake.reply(fixture("anthropic/text.json"))
    assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content


def test_a_client_that_leaves_while_waiting_leaves_the_thread_count_right(start, fake):
    """Its place goes to a thread that finds it gone; then the one thread serves the next requests
    (none leaked: not refused), and one at a time (none given back twice: the next still waits)."""
    server = start_one_thread(start, "60")
    with streams_under_way(server, fake, 1) as opened:
        with socket.create_connection(("127.0.0.1", server.port)) as leaving:
            leaving.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\n")
            waiting(server, 1)
        finish(opened)
    waiting(server, 0)
    for _ in range(2):
        fake.reply(fixture("anthropic/text.json"))
        assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content
    with streams_under_way(server, fake, 1) as opened, concurrent.futures.ThreadPoolExecutor(1) as pool:
        fake.reply(fixture("anthropic/text.json"))
        chat = pool.submit(sdk_client(server.url).chat.completions.create, **CHAT)
        waiting(server, 1)
        finish(opened)
        assert chat.result().choices[0].message.content
    assert len(fake.requests) == 5  # two streams, three requests: not the one that left
    assert "Traceback" not in server.log()


def test_a_whole_request_whose_client_left_while_waiting_is_not_sent_upstream(start, fake):
    """Head and body are in, then the client closes: the thread that takes the request finds the
    client gone before it is translated, and nothing goes upstream for it."""
    server = start_one_thread(start, "60")
    body = json.dumps(CHAT).encode()
    with streams_under_way(server, fake, 1) as opened:
        with socket.create_connection(("127.0.0.1", server.port)) as leaving:
            leaving.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer sk-client\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            waiting(server, 1)
        finish(opened)
    waiting(server, 0)
    fake.reply(fixture("anthropic/text.json"))
    assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content  # its thread came back
    assert len(fake.requests) == 2  # the stream's and the last one's
    assert "Traceback" not in server.log()


def test_whole_requests_waiting_past_the_header_deadline_are_closed_and_the_worker_serves_on(start, fake):
    """The header deadline ends a wait too. A waiting request is cut before a thread may take it:
    a spare thread reading the head meanwhile raced the cut and crashed the worker's main loop."""
    server = start_one_thread(start, "30", BRIDGE_CLIENT_HEADER_TIMEOUT="2")
    with streams_under_way(server, fake, 1) as opened:
        clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(6)]
        for client in clients:
            client.sendall(b"GET /v1/models HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer sk-client\r\n\r\n")
        waiting(server, 6)
        for client in clients:
            with client:
                client.settimeout(10)
                answer = b""
                while chunk := client.recv(65536):  # closed, after a 503 or nothing
                    answer += chunk
                assert answer == b"" or answer.startswith(b"HTTP/1.1 503"), answer[:200]
        waiting(server, 0)
        finish(opened)  # the held stream is whole: its worker lived on
    assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 200
    assert "Traceback" not in server.log() and "Worker exiting" not in server.log()


def test_a_pipelined_health_check_does_not_wait(start, fake):
    """A second GET /healthz already read with the first one (pipelined) is told from the bytes
    gunicorn holds, not the socket's: answered at once, as the first."""
    server = start_one_thread(start, "60")
    check = b"GET /healthz HTTP/1.1\r\nHost: bridge\r\n\r\n"
    with streams_under_way(server, fake, 1), socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(check + check)
        sock.settimeout(10)  # far below the queue's 60 s
        answers = b""
        while answers.count(b"HTTP/1.1 200") < 2:
            chunk = sock.recv(65536)
            assert chunk, answers
            answers += chunk
        assert metric(server, "bridge_queued_requests") == 0


def test_a_head_still_coming_while_waiting_is_closed_at_the_header_deadline(start, fake):
    """The header deadline keeps running while a request waits: its wait ends there too."""
    server = start_one_thread(start, "60", BRIDGE_CLIENT_HEADER_TIMEOUT="1")
    with streams_under_way(server, fake, 1) as opened:
        sent, answer = trickle(server.port, b"POST /v1/chat/completions HTTP/1.1\r\n", b"X-Slow: " + b"a" * 100)
        assert answer == b"" and sent < 100  # closed quietly, the head never complete
        waiting(server, 0)
        assert metric(server, "bridge_queue_wait_seconds_count", outcome="refused") == 1
        finish(opened)
    assert "request not in within BRIDGE_CLIENT_HEADER_TIMEOUT" in server.log()


def refused_within_the_drain(refused, drain):
    """A 503 that says how long the request was let wait: less than the drain, not the queue's 60 s."""
    assert is_openai_error(refused, 503) and refused.headers["connection"] == "close", refused.text
    waited = re.search(r"none came free within ([\d.]+)s \(BRIDGE_QUEUE_TIMEOUT", refused.json()["error"]["message"])
    assert waited and float(waited[1]) < drain, refused.text


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "master killed"])
def test_a_stop_refuses_a_request_still_waiting_before_the_drain_is_over(start, fake, stop):
    """The queue timeout (60 s) outlasts the drain (8 s): the waiting request gets its 503 within
    half the drain, not a connection cut when the worker exits. A worker whose master was killed
    stops the same way (it finds out within a second), and then the port refuses connections."""
    server = start_one_thread(start, "60", BRIDGE_GRACEFUL_TIMEOUT="8")
    with streams_under_way(server, fake, 1) as opened, concurrent.futures.ThreadPoolExecutor(1) as pool:
        chat = pool.submit(post, server, "/v1/chat/completions", CHAT)
        waiting(server, 1)
        server.signal(stop)
        refused_within_the_drain(chat.result(), drain=8)
        finish(opened)
    if stop == signal.SIGTERM:
        assert server.process.wait(timeout=30) == 0
    else:
        server.wait_for(lambda: not accepts(server.port), "the orphaned worker to close its listener")
    assert "graceful_timeout" not in server.log()  # nothing was still open to be cut


def test_a_head_sent_a_byte_at_a_time_is_closed_at_the_header_deadline(start):
    server = start(BRIDGE_CLIENT_HEADER_TIMEOUT="1")
    head = b"GET /healthz HTTP/1.1\r\nHost: bridge\r\nX-Slow: " + b"a" * 100
    sent, answer = trickle(server.port, b"", head)  # 4 bytes a second: no read waits long
    assert answer == b"" and sent < len(head)  # closed quietly, the head never complete
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
    log = server.log()
    assert "request not in within BRIDGE_CLIENT_HEADER_TIMEOUT" in log and "Traceback" not in log


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(start):
    server = start(BRIDGE_CLIENT_HEADER_TIMEOUT="1")
    assert trickle(server.port, b"", b"") == (0, b"")
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize("front", ["chat", "messages"])
def test_a_body_sent_a_byte_at_a_time_gets_a_408_in_the_clients_protocol(start, fake, front):
    server = start(BRIDGE_CLIENT_BODY_TIMEOUT="1")
    path, extra = (
        ("/v1/messages", "anthropic-version: 2023-06-01\r\n") if front == "messages" else ("/v1/chat/completions", "")
    )
    body = json.dumps(CHAT).encode() + b" " * 200
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sent, answer = trickle(server.port, head, body)
    assert sent < len(body)
    status, headers, error = parsed(answer)
    assert status == 408 and headers["connection"] == "close"
    assert "BRIDGE_CLIENT_BODY_TIMEOUT" in (error["error"]["message"])
    if front == "messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    else:
        assert set(error["error"]) == {"message", "type", "param", "code"}
    assert fake.requests == []
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
    log = server.log()
    assert "request not in within BRIDGE_CLIENT_BODY_TIMEOUT" in log and "Traceback" not in log


def test_a_client_that_stops_reading_a_stream_is_cut_after_the_stall_timeout(start, fake):
    server = start(BRIDGE_CLIENT_STALL_TIMEOUT="1")
    events = fixture("anthropic/text_sdk.sse").events
    delta = json.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 4000}})
    # 16 MB of text: more than the kernel buffers between the bridge and a client that reads nothing.
    big = [f"event: content_block_delta\ndata: {delta}\n\n".encode()] * 4000
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=events[:4] + big + events[4:]))
    with reading_nothing(server, {**CHAT, "stream": True}):
        server.wait_for(lambda: "BRIDGE_CLIENT_STALL_TIMEOUT" in server.log(), "the stalled client to be cut")
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
    stalled = lambda: [line for line in server.access_lines() if line["stream"]]  # noqa: E731
    server.wait_for(stalled, "the stalled stream's access line")
    # The relay's reader (its hand-over full for as long) and the socket's send timeout both
    # cut a client stalled for BRIDGE_CLIENT_STALL_TIMEOUT; whichever comes first names it.
    (line,) = stalled()
    assert line["status"] == 200 and line["error"] in ("client_stalled", "client_closed"), line
    assert "Traceback" not in server.log()


def test_a_client_that_stops_reading_its_answer_delays_no_one_on_the_last_thread(start, fake):
    """The one thread's request counts free just before its answer's last write, so the next
    request is started at once; that write then blocks on a client that reads nothing (until
    BRIDGE_CLIENT_STALL_TIMEOUT, 60 s), and the next request must not wait behind it."""
    server = start_one_thread(start, "60", BRIDGE_CLIENT_STALL_TIMEOUT="60", BRIDGE_MAX_UPSTREAM_BODY_BYTES="33554432")
    answer = json.loads(fixture("anthropic/text.json").body)
    answer["content"] = [{"type": "text", "text": "x" * (16 * 1024 * 1024)}]  # more than the kernel buffers
    fake.reply(Reply(body=json.dumps(answer).encode(), headers={"content-type": "application/json"}))
    with reading_nothing(server, CHAT) as sock:
        server.wait_for(lambda: len(fake.requests) == 1, "the large answer's request upstream")
        sock.settimeout(10)
        assert sock.recv(12) == b"HTTP/1.1 200"  # its answer is being written: a thread is in that write
        fake.reply(fixture("anthropic/text.json"))
        assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content  # within 10 s
        assert metric(server, "bridge_queued_requests") == 0
    fake.reply(fixture("anthropic/text.json"))  # the stalled one reset, the worker serves on
    assert sdk_client(server.url).chat.completions.create(**CHAT).choices[0].message.content
    assert "Traceback" not in server.log()


def test_one_client_key_at_its_cap_gets_429_while_another_is_served(start, fake):
    """The cap counts a key's requests that hold a request thread: a non-streamed call until its
    answer ends, a stream only until the worker's stream loop takes it over."""
    server = start(BRIDGE_CLIENT_KEYS="team-a:sk-a,team-b:sk-b", BRIDGE_MAX_REQUESTS_PER_CLIENT="1")
    with streams_under_way(server, fake, 2, api_key="sk-a") as opened:  # parked: holding no thread
        with calls_holding_threads(server, fake, 1, api_key="sk-a"):
            chat = post(server, "/v1/chat/completions", CHAT, authorization="Bearer sk-a")
            assert is_openai_error(chat, 429), chat.text
            messages = post(server, "/v1/messages", MESSAGES, **ANTHROPIC_HEADERS, **{"x-api-key": "sk-a"})
            assert is_anthropic_error(messages, 429, "rate_limit_error"), messages.text
            for answer in (chat, messages):
                assert answer.headers["retry-after"] == "5" and "(BRIDGE_MAX_REQUESTS_PER_CLIENT)" in answer.text
            fake.reply(fixture("anthropic/text.json"))
            assert sdk_client(server.url, api_key="sk-b").chat.completions.create(**CHAT).choices[0].message.content
            assert len(fake.requests) == 4  # team-a's streams and call, team-b's request: no refused one
        finish(opened)

    fake.reply(fixture("anthropic/text.json"))  # the call's end gave team-a its place back
    assert sdk_client(server.url, api_key="sk-a").chat.completions.create(**CHAT).choices[0].message.content


def test_by_default_one_client_key_of_several_may_hold_half_the_threads(start, fake):
    """No BRIDGE_MAX_REQUESTS_PER_CLIENT, two client keys: a key holding 2 of a worker's 4
    threads is refused a third call, in its protocol, while the other key is served."""
    server = start(BRIDGE_THREADS="4", BRIDGE_CLIENT_KEYS="team-a:sk-a,team-b:sk-b")
    with calls_holding_threads(server, fake, 2, api_key="sk-a"):
        refused = post(server, "/v1/chat/completions", CHAT, authorization="Bearer sk-a")
        assert is_openai_error(refused, 429), refused.text
        assert refused.headers["retry-after"] == "5" and "by default half of BRIDGE_THREADS" in refused.text
        fake.reply(fixture("anthropic/text.json"))
        assert sdk_client(server.url, api_key="sk-b").chat.completions.create(**CHAT).choices[0].message.content
        assert len(fake.requests) == 3
    fake.reply(fixture("anthropic/text.json"))
    assert sdk_client(server.url, api_key="sk-a").chat.completions.create(**CHAT).choices[0].message.content


def test_by_default_a_single_client_key_may_hold_every_thread(start, fake):
    """With one client key a cap would only leave threads idle that nobody else may use."""
    server = start(BRIDGE_THREADS="4", BRIDGE_CLIENT_KEYS="team-a:sk-a")
    with calls_holding_threads(server, fake, 3, api_key="sk-a"):
        fake.reply(fixture("anthropic/text.json"))
        assert sdk_client(server.url, api_key="sk-a").chat.completions.create(**CHAT).choices[0].message.content


def test_sigterm_refuses_new_connections_at_once_while_an_open_stream_finishes(start, fake):
    server = start(BRIDGE_WORKERS="2")
    server.wait_for(lambda: server.log().count("Booting worker") == 2, "2 workers")
    with streams_under_way(server, fake, 1) as opened:
        server.signal(signal.SIGTERM)
        server.wait_for(lambda: refused(server.port), "new connections to be refused")
        finish(opened)
    assert server.process.wait(timeout=30) == 0
    assert "Traceback" not in server.log()


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
