"""The bridge in this process (werkzeug), under gunicorn from deploy/gunicorn.conf.py, behind
nginx from deploy/nginx/bridge.conf, and the system programs they need. Only ports and paths
are changed, and only from the outside: gunicorn gets `--bind` and environment variables,
nginx a copy of the site file with its ports, certificate and log paths replaced, inside a
minimal nginx.conf. Upstream streams are gated: the fake upstream sends each event only when
the test releases it, so a test can check what the client holds in between."""

import contextlib
import json
import logging
import os
import pwd
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time

import anthropic
import httpx2
import openai
import requests
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.serving import make_server

from bench.processes import ROOT, Gunicorn, accepts, free_port, upstream_env, wait_for
from bridge.serve.observability import access_log
from tests.fake_upstream import Reply, fixture
from tests.helpers.programs import program


def metric(live, name, **labels):
    """The sum of a metric's samples with these labels, as GET /metrics tells it."""
    text = requests.get(f"{live.url}/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@contextlib.contextmanager
def access_lines():
    """Every access line written meanwhile, parsed (next to the logger's own stderr handler)."""
    written = []
    handler = logging.Handler()
    handler.emit = lambda record: written.append(json.loads(record.getMessage()))
    access_log.addHandler(handler)
    try:
        yield written
    finally:
        access_log.removeHandler(handler)


NGINX_SITE = ROOT / "deploy" / "nginx" / "bridge.conf"


def bridge_env(fake, **extra):
    """Settings for a bridge in front of the fake upstream: no retries, quiet logs, then `extra`."""
    return {
        **upstream_env(fake.url),
        "BRIDGE_RETRIES": "0",
        "BRIDGE_LOG_LEVEL": "WARNING",
        **{k: str(v) for k, v in extra.items()},
    }


class LiveBridge:
    """The bridge app served by werkzeug's threaded server in this process."""

    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def install(directory):
    """This checkout installed as `pip install /opt/bridge` installs it, into `directory`/site,
    which is returned. Built from a copy as a fresh clone has it (a build/ left in the checkout
    would go into the wheel), offline, without the dependencies: the venv has them."""
    source, site = directory / "source", directory / "site"
    unversioned = [
        line.strip().rstrip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", *unversioned))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return site


def served_from(server):
    """The directories gunicorn's workers loaded the app from, as each logged it."""
    return re.findall(r"Serving the app from (\S+)", server.log())


def gunicorn(workdir, fake, *flags, site=None, cwd=None, port=None, **env):
    """gunicorn from the shipped config in front of the fake upstream, logging at DEBUG.

    With `site` (from install()) it serves that install, and is checked to: the workers must
    say they loaded the app from there, not from the checkout or the venv.
    """
    if site:
        env["PYTHONPATH"] = str(site)
    server = Gunicorn(
        workdir, fake.url, *flags, cwd=cwd, port=port, **bridge_env(fake, **{"BRIDGE_LOG_LEVEL": "DEBUG", **env})
    )
    if site:
        assert served_from(server) and set(served_from(server)) == {str(site / "bridge")}, server.log()
    return server


def parsed(answer):
    """(status, headers, JSON body) of a raw HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers, json.loads(body)


def socket_buffers():
    """The most the kernel may buffer between a fast upstream and a client that reads nothing, less
    the client's own receive buffer: the upstream's send buffer, the bridge's receive buffer from
    it and send buffer to the client (sysctl maxima, which autotuning may reach on loopback)."""

    def maximum(name):
        with open(f"/proc/sys/net/ipv4/{name}") as fh:
            return int(fh.read().split()[2])

    return 2 * maximum("tcp_wmem") + maximum("tcp_rmem")


def settled(upstream, bound):
    """What a Flood upstream had sent once it could send no more (nothing for a second), or fail as
    soon as it has sent more than `bound`."""
    deadline = time.monotonic() + 30  # a hang guard
    last, since = upstream.sent, time.monotonic()
    while upstream.sent <= bound and time.monotonic() < deadline:
        time.sleep(0.1)
        if upstream.sent != last:
            last, since = upstream.sent, time.monotonic()
        elif time.monotonic() - since >= 1:
            return last
    raise AssertionError(f"the upstream is still sending: {upstream.sent} bytes so far")


class Gate:
    """Upstream events that the fake upstream sends only as the test releases them."""

    def __init__(self, events):
        self.events = list(events)
        self._released = threading.Semaphore(0)
        self.released = 0  # events the test let go
        self.sent = 0  # events handed to the fake upstream's writer

    def __iter__(self):
        for event in self.events:
            self._released.acquire(timeout=60)  # a failed test must not hang the fake forever
            self.sent += 1
            yield event

    def release(self, count=1):
        for _ in range(count):
            self.released += 1
            self._released.release()


def self_signed_certificate(directory):
    """A throwaway certificate for 127.0.0.1, made with the openssl command."""
    cert, key = directory / "bridge.crt", directory / "bridge.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def adapted_site(site, https_port, http_port, bridge_ports, cert, key, log_dir):
    """The shipped site file with its ports and paths replaced; each must be found as shipped.
    Its `server` line becomes one per bridge port, with the shipped parameters, as an operator
    adds a line per VM."""
    server = re.search(r"server 127\.0\.0\.1:8080( [^;]*)?;", site)
    assert server, "deploy/nginx/bridge.conf no longer has its server 127.0.0.1:8080 line"
    replacements = [
        ("listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        (
            server.group(0),
            "\n    ".join(f"server 127.0.0.1:{port}{server.group(1) or ''};" for port in bridge_ports),
        ),
        ("/etc/ssl/certs/bridge.crt", str(cert)),
        ("/etc/ssl/private/bridge.key", str(key)),
        ("/var/log/nginx/", f"{log_dir}/"),
    ]
    for shipped, local in replacements:
        assert shipped in site, f"deploy/nginx/bridge.conf no longer has {shipped!r}"
        site = site.replace(shipped, local)
    return site


class Nginx:
    """nginx serving the shipped site file in front of one Gunicorn or several, with `workers`
    worker processes."""

    def __init__(self, tmp_path, *bridge_ports, workers=1):
        self.dir = tmp_path / "nginx"
        self.dir.mkdir()
        self.https_port, self.http_port = free_port(), free_port()
        self.cert, key = self_signed_certificate(self.dir)
        site = self.dir / "bridge.conf"
        site.write_text(
            adapted_site(
                NGINX_SITE.read_text(), self.https_port, self.http_port, bridge_ports, self.cert, key, self.dir
            )
        )
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
        conf = self.dir / "nginx.conf"
        conf.write_text(f"""
{user}
daemon off;
worker_processes {workers};
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    include {site};
}}
""")
        check = subprocess.run(
            [nginx_binary(), "-t", "-c", str(conf), "-p", str(self.dir)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [nginx_binary(), "-c", str(conf), "-p", str(self.dir)], stderr=subprocess.DEVNULL
        )
        self.url = f"https://127.0.0.1:{self.https_port}"
        self.http_url = f"http://127.0.0.1:{self.http_port}"
        wait_for(self._listening, "nginx to listen")

    def _listening(self):
        if self.process.poll() is not None:
            raise AssertionError(f"nginx exited: {(self.dir / 'error.log').read_text()}")
        return accepts(self.https_port)

    def access_log(self):
        return (self.dir / "bridge.access.log").read_text()

    def stop(self):
        self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish their requests
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def nginx_binary():
    return program("nginx", "nginx-light")


def openai_client(url, cafile=None, api_key="sk-client"):
    """The official SDK pointed at `url`; a 10 s read timeout turns a held-back event into a failure."""
    verify = ssl.create_default_context(cafile=str(cafile)) if cafile else True
    return openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=api_key,
        max_retries=0,
        timeout=10,
        http_client=httpx2.Client(verify=verify, timeout=10),
    )


def anthropic_client(url, cafile=None, api_key="sk-ant-client"):
    """openai_client's counterpart: the anthropic SDK pointed at `url`, the same way."""
    verify = ssl.create_default_context(cafile=str(cafile)) if cafile else True
    return anthropic.Anthropic(
        base_url=url,
        api_key=api_key,
        max_retries=0,
        timeout=10,
        http_client=httpx2.Client(verify=verify, timeout=10),
    )


class TextStream:
    """An upstream Anthropic text stream (a recorded fixture), gated, and the texts it carries."""

    FIXTURE = "anthropic/text_sdk.sse"

    def __init__(self, fake):
        self.gate = Gate(fixture(self.FIXTURE).events)
        self.texts = [
            (index, json.loads(event.split(b"data: ", 1)[1])["delta"]["text"])
            for index, event in enumerate(self.gate.events)
            if b"event: content_block_delta" in event
        ]
        fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=self.gate))

    def release_until_text(self, number):
        """Let the upstream send everything up to and including text `number`."""
        self.gate.release(self.texts[number][0] + 1 - self.gate.released)

    def release_rest(self):
        self.gate.release(len(self.gate.events) - self.gate.released)


def open_text_streams(url, fake, count, api_key="sk-client"):
    """`count` gated Chat streams (TextStream upstreams), opened one after another, each read
    to its first text: a list of (upstream, client chunks) pairs."""
    opened = []
    for _ in range(count):
        upstream = TextStream(fake)
        upstream.release_until_text(0)
        chunks = iter(openai_client(url, api_key=api_key).chat.completions.create(stream=True, **TEXT_CHAT))
        assert next_text(chunks) == upstream.texts[0][1]
        opened.append((upstream, chunks))
    return opened


TEXT_CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def next_text(chunks):
    """The next non-empty content the client receives."""
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            return chunk.choices[0].delta.content
    raise AssertionError("the stream ended before the next text")
