"""deploy/gunicorn.conf.py run for real: workers, reload with open streams, timeouts, shared metrics."""

import contextlib
import gc
import json
import os
import re
import runpy
import signal
import subprocess
import sys
import time
import types

import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import BIN, GUNICORN_CONF, ROOT, free_port, wait_for
from tests.fake_upstream import fixture
from tests.helpers.servers import TextStream, bridge_env, gunicorn, next_text, openai_client

CLIENT_KEY = "sk-client-key-that-must-never-be-logged"
UPSTREAM_KEY = "sk-ant-upstream-key-that-must-never-be-logged"
PROMPT = "a prompt whose text must never be logged"


@pytest.fixture
def start(tmp_path, fake, installed_bridge):
    """Start gunicorn serving the installed package: `start(*flags, **env)`."""
    started = []

    def start_gunicorn(*flags, **env):
        server = gunicorn(tmp_path / str(len(started)), fake, *flags, site=installed_bridge, **env)
        started.append(server)
        return server

    yield start_gunicorn
    for server in started:
        server.stop()


def test_gunicorn_wsgi_app_run_in_a_checkout_serves_the_installed_package(tmp_path, fake, installed_bridge):
    """The operator's first try, `gunicorn wsgi:app` in the checkout, without the shipped config:
    gunicorn puts the checkout first on sys.path, and its bridge/ must not shadow the install."""
    config = tmp_path / "where.py"  # only says where the served app came from
    config.write_text(
        "def post_worker_init(worker):\n"
        "    import bridge\n"
        "    worker.log.info('Serving the app from %s', bridge.__path__[0])\n"
    )
    port = free_port()
    env = {**os.environ, **bridge_env(fake), "PYTHONPATH": str(installed_bridge)}
    with open(tmp_path / "gunicorn.log", "wb") as log:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "--config", str(config), "--bind", f"127.0.0.1:{port}", "wsgi:app"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        fake.reply(fixture("anthropic/text.json"))
        wait_for(lambda: "Serving the app from" in (tmp_path / "gunicorn.log").read_text(), "gunicorn wsgi:app")
        assert openai_client(url).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        served = re.findall(r"Serving the app from (\S+)", (tmp_path / "gunicorn.log").read_text())
        assert served == [str(installed_bridge / "bridge")]
    finally:
        process.terminate()
        process.wait(timeout=30)


def booted_workers(server):
    return [int(pid) for pid in re.findall(r"Booting worker with pid: (\d+)", server.log())]


def samples(server, name):
    """Every sample of metric `name` in one scrape of /metrics."""
    response = requests.get(f"{server.url}/metrics", timeout=5)
    assert response.status_code == 200, response.text
    return [s for family in text_string_to_metric_families(response.text) for s in family.samples if s.name == name]


def open_streams(server):
    return sum(s.value for s in samples(server, "bridge_open_streams"))


def chat(server, **extra):
    return openai_client(server.url, api_key=CLIENT_KEY).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": PROMPT}], **extra
    )


@contextlib.contextmanager
def stream_under_way(server, fake):
    """(the gated upstream, the client's chunks) of a Chat stream whose first text has arrived."""
    upstream = TextStream(fake)
    try:
        upstream.release_until_text(0)
        chunks = iter(chat(server, stream=True))
        assert next_text(chunks) == upstream.texts[0][1]
        yield upstream, chunks
    finally:
        upstream.release_rest()


def test_the_shipped_config_runs_threaded_workers_from_the_environment(start):
    server = start(BRIDGE_WORKERS="3", BRIDGE_THREADS="4")
    server.wait_for(lambda: len(booted_workers(server)) == 3, "3 workers")
    assert "Using worker: bridge.serve.worker.ThreadWorker" in server.log()


def test_metrics_count_every_workers_requests_whichever_worker_answers(start, fake):
    server = start()
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    for _ in range(6):  # new connections, so both workers take some
        fake.reply(fixture("anthropic/text.json"))
        chat(server)

    def counted():
        wanted = {"direction": "chat_to_messages", "status": "200"}
        return [s.value for s in samples(server, "bridge_requests_total") if s.labels == wanted]

    # A request counts when its worker closes the answer, just after the client has read it.
    server.wait_for(lambda: counted() == [6.0], "the last request counted")
    for _ in range(4):  # each scrape may land on either worker
        assert counted() == [6.0]


def test_a_metrics_file_a_worker_has_only_just_created_does_not_fail_the_scrape(start, fake):
    """A worker creates its file empty and sizes it a moment later - or is killed in between."""
    server = start()
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    fake.reply(fixture("anthropic/text.json"))
    chat(server)
    (server.metrics_dir / "histogram_999999.db").touch()
    for _ in range(4):  # each scrape may land on either worker
        counted = [
            s
            for s in samples(server, "bridge_requests_total")
            if s.labels == {"direction": "chat_to_messages", "status": "200"}
        ]
        assert [s.value for s in counted] == [1.0]


def test_a_worker_keeps_the_loaded_app_out_of_full_garbage_collections():
    hooks = runpy.run_path(str(GUNICORN_CONF))
    try:
        hooks["post_worker_init"](types.SimpleNamespace(wsgi=None))  # a worker whose app is not Flask
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(("variable", "value"), [("BRIDGE_THREADS", "many"), ("BRIDGE_STREAMS_PER_WORKER", "-1")])
def test_a_bad_process_setting_stops_start_up_with_a_message_naming_it(variable, value):
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF), "--check-config"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", variable: value},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0 and variable in result.stderr + result.stdout


def test_a_reload_lets_an_open_stream_finish_and_serves_new_requests(start, fake):
    server = start(BRIDGE_CLIENT_KEYS=f"team-a:{CLIENT_KEY}", BRIDGE_ANTHROPIC_API_KEY=UPSTREAM_KEY)
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    with stream_under_way(server, fake) as (upstream, chunks):
        assert open_streams(server) == 1

        server.signal(signal.SIGHUP)
        server.wait_for(lambda: len(booted_workers(server)) == 4, "new workers after SIGHUP")
        fake.reply(fixture("anthropic/text.json"))
        assert chat(server).choices[0].message.content  # a new request, served meanwhile
        assert open_streams(server) == 1  # the new workers count the old one's stream

        upstream.release_rest()
        rest = list(chunks)
    received = [upstream.texts[0][1]] + [
        c.choices[0].delta.content for c in rest if c.choices and c.choices[0].delta.content
    ]
    assert received == [text for _, text in upstream.texts]
    assert [c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason] == ["stop"]
    server.wait_for(lambda: server.log().count("Worker exiting") >= 2, "the old workers to exit")
    assert open_streams(server) == 0
    fake.reply(fixture("anthropic/text.json"))
    assert chat(server).choices[0].message.content

    streamed = lambda: [line for line in server.access_lines() if line["stream"]]  # noqa: E731
    server.wait_for(streamed, "the old worker's access line, written as it exits")
    assert [(line["status"], line["error"], line["client"]) for line in streamed()] == [(200, None, "team-a")]
    server.stop()  # every line written, the access lines too
    log = server.log()
    assert CLIENT_KEY not in log and UPSTREAM_KEY not in log and PROMPT not in log


def test_a_reload_cuts_a_stream_that_outlives_the_graceful_timeout(start, fake):
    server = start(BRIDGE_GRACEFUL_TIMEOUT="1")
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    with stream_under_way(server, fake) as (_upstream, chunks):
        server.signal(signal.SIGHUP)
        with pytest.raises(Exception) as cut:  # the connection closes mid-stream
            list(chunks)
    assert not isinstance(cut.value, openai.APITimeoutError)
    assert "graceful_timeout (1s) is over; closing 1 open connection" in server.log()


def test_access_lines_held_between_writes_are_all_written_when_gunicorn_stops(start, fake):
    server = start(BRIDGE_ACCESS_LOG_FLUSH="60")
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    for _ in range(6):  # new connections, so both workers take some
        fake.reply(fixture("anthropic/text.json"))
        chat(server)
    called = lambda: [line for line in server.access_lines() if line["route"] == "/v1/chat/completions"]  # noqa: E731
    assert called() == []  # the first five at least would be there, were they not held
    server.stop()
    assert len(called()) == 6 and {line["status"] for line in called()} == {200}


def test_a_stopping_worker_writes_its_held_access_lines_at_once(start, fake):
    """The master kills its workers at graceful_timeout, open streams or not: a worker that begins
    to stop writes what it holds then, not at its exit."""
    server = start(BRIDGE_ACCESS_LOG_FLUSH="60", BRIDGE_GRACEFUL_TIMEOUT="30", BRIDGE_WORKERS="1")
    for _ in range(4):
        fake.reply(fixture("anthropic/text.json"))
        chat(server)

    def called():
        return [line for line in server.access_lines() if line["route"] == "/v1/chat/completions"]

    with stream_under_way(server, fake):
        assert called() == []  # held
        server.signal(signal.SIGTERM)
        server.wait_for(lambda: len(called()) == 4, "the held lines, while the stream keeps the worker draining")
        assert server.process.poll() is None
    assert [line["status"] for line in called()] == [200] * 4


def test_a_long_stream_outlives_the_worker_timeout_but_a_stuck_worker_is_restarted(start, fake):
    server = start("--timeout", "2", BRIDGE_PING_INTERVAL="0.2")
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    with stream_under_way(server, fake) as (upstream, chunks):
        timeouts_before = server.log().count("WORKER TIMEOUT")
        time.sleep(5)  # the stream stays open across two and a half worker timeouts
        upstream.release_rest()
        rest = list(chunks)
    assert [c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert server.log().count("WORKER TIMEOUT") == timeouts_before

    booted = booted_workers(server)
    os.kill(booted[-1], signal.SIGSTOP)  # its main loop stops heartbeating
    server.wait_for(lambda: f"WORKER TIMEOUT (pid:{booted[-1]})" in server.log(), "the stuck worker to time out")
    server.wait_for(lambda: len(booted_workers(server)) > len(booted), "a replacement worker")


def test_a_reload_rereads_the_routes_file(start, fake, other_fake, tmp_path):
    """A route changed in the file takes effect on SIGHUP, as a changed model map does."""
    routes_file = tmp_path / "routes.json"

    def route_to(upstream):
        deployment = {"name": "claude", "protocol": "anthropic", "base_url": upstream.url}
        routes_file.write_text(json.dumps({"routes": [{"models": ["gpt-4o"], "deployments": [deployment]}]}))

    route_to(fake)
    server = start(BRIDGE_ROUTES=str(routes_file))
    server.wait_for(lambda: len(booted_workers(server)) == 2, "2 workers")
    fake.default = other_fake.default = fixture("anthropic/text.json")
    assert chat(server).choices[0].message.content and len(fake.requests) == 1

    route_to(other_fake)
    server.signal(signal.SIGHUP)
    server.wait_for(lambda: server.log().count("Worker exiting") >= 2, "the old workers to exit")
    assert chat(server).choices[0].message.content
    assert len(other_fake.requests) == 1 and len(fake.requests) == 1
