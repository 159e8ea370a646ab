"""A reload (SIGHUP to gunicorn's master, `systemctl reload bridge`) checks the whole new
configuration before it replaces any worker (deploy/gunicorn.conf.py): a broken file is refused
with one log line naming it, and the running workers keep serving."""

import dataclasses
import json
import os
import re
import shutil
import signal

import openai
import pytest

from bench.processes import GUNICORN_CONF
from tests.fake_upstream import fixture
from tests.helpers.servers import gunicorn, openai_client

CLIENT_KEY = "sk-client-key-1"
NEW_CLIENT_KEY = "sk-client-key-2"
UPSTREAM_KEY = "sk-ant-upstream-key-1"
NEW_UPSTREAM_KEY = "sk-ant-upstream-key-2"


def routes(fake, model="m-1", **key):
    """A routes file sending gpt-4o to `fake` as `model`, one field a line as an operator writes it."""
    deployment = {"name": "claude", "protocol": "anthropic", "base_url": fake.url, "model": model, **key}
    return json.dumps({"routes": [{"models": ["gpt-4o"], "deployments": [deployment]}]}, indent=1)


def chat(server, key=CLIENT_KEY):
    return openai_client(server.url, api_key=key).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )


@dataclasses.dataclass
class Broken:
    """A file a reload re-reads: as the service started with it, broken, and mended (changed)."""

    setting: str
    good: object  # (tmp_path, fake) -> the file's text
    broken: object
    mended: object
    named: str  # what the refusal's log line says of the entry, after the file's path
    applied: object  # (server, fake): checks that the mended file is the one served
    redis: bool = False  # the setting needs a Redis (BRIDGE_CLIENT_LIMITS)

    def settings(self, path, redis_url):
        settings = {"BRIDGE_CLIENT_KEYS": f"team-a:{CLIENT_KEY}", self.setting: str(path)}
        return {**settings, "BRIDGE_REDIS_URL": redis_url} if self.redis else settings


def _upstream_model(model):
    def check(server, fake):
        chat(server)
        assert fake.last.body["model"] == model

    return check


def _upstream_key(server, fake):
    chat(server)
    assert fake.last.headers["x-api-key"] == NEW_UPSTREAM_KEY


def _new_client_key(server, fake):
    assert chat(server, NEW_CLIENT_KEY).choices[0].message.content
    with pytest.raises(openai.AuthenticationError):
        chat(server)


def _over_the_new_limit(server, fake):
    """tpd=1: the tokens counted today already are over it."""
    with pytest.raises(openai.RateLimitError):
        chat(server)


def _key_file(tmp_path, name="upstream.key", key=UPSTREAM_KEY):
    (tmp_path / name).write_text(key + "\n")
    return str(tmp_path / name)


BROKEN = {
    "routes JSON typo": Broken(
        "BRIDGE_ROUTES",
        good=lambda tmp_path, fake: routes(fake),
        broken=lambda tmp_path, fake: routes(fake).replace('"m-1"', '"m-1",'),
        mended=lambda tmp_path, fake: routes(fake, "m-2"),
        named="invalid JSON: Expecting property name enclosed in double quotes: line 13",
        applied=_upstream_model("m-2"),
    ),
    "routes naming an unreadable api_key_file": Broken(
        "BRIDGE_ROUTES",
        good=lambda tmp_path, fake: routes(fake, api_key_file=_key_file(tmp_path)),
        broken=lambda tmp_path, fake: routes(fake, api_key_file=str(tmp_path / "new.key")),
        mended=lambda tmp_path, fake: routes(fake, api_key_file=_key_file(tmp_path, "new.key", NEW_UPSTREAM_KEY)),
        named='routes[0] ("gpt-4o").deployments[0] ("claude"): api_key_file: cannot read',
        applied=_upstream_key,
    ),
    "model map": Broken(
        "BRIDGE_MODEL_MAP",
        good=lambda tmp_path, fake: '{"gpt-4o": "m-1"}',
        broken=lambda tmp_path, fake: '{"gpt-4o": "m-1",}',
        mended=lambda tmp_path, fake: '{"gpt-4o": "m-2"}',
        named="invalid JSON: Expecting property name enclosed in double quotes: line 1",
        applied=_upstream_model("m-2"),
    ),
    "client keys": Broken(
        "BRIDGE_CLIENT_KEYS",
        good=lambda tmp_path, fake: f"team-a:{CLIENT_KEY}\n",
        broken=lambda tmp_path, fake: f"team-a:{CLIENT_KEY}\nteam-b:sha256:not-hex\n",
        mended=lambda tmp_path, fake: f"team-a:{NEW_CLIENT_KEY}\n",
        named="line 2 (team-b): sha256 must be 64 hex digits",
        applied=_new_client_key,
    ),
    "client limits": Broken(
        "BRIDGE_CLIENT_LIMITS",
        good=lambda tmp_path, fake: "team-a rpm=100\n",
        broken=lambda tmp_path, fake: "team-a rpm=lots\n",
        mended=lambda tmp_path, fake: "team-a tpd=1\n",
        named="line 1 (team-a) rpm: must be a int",
        applied=_over_the_new_limit,
        redis=True,
    ),
}


def booted_workers(server):
    return server.log().count("Booting worker with pid")


def refusals(server):
    return [line for line in server.log().splitlines() if "reload refused" in line]


@pytest.mark.parametrize("file", BROKEN.values(), ids=BROKEN.keys())
def test_a_reload_with_a_broken_file_is_refused_and_the_running_workers_keep_serving(file, request, tmp_path, fake):
    path = tmp_path / "the.file"
    path.write_text(file.good(tmp_path, fake))
    redis_url = request.getfixturevalue("redis_server").url if file.redis else None
    fake.default = fixture("anthropic/text.json")
    server = gunicorn(tmp_path / "gunicorn", fake, **file.settings(path, redis_url))
    try:
        server.wait_for(lambda: booted_workers(server) == 2, "2 workers")
        assert chat(server).choices[0].message.content

        path.write_text(file.broken(tmp_path, fake))
        server.signal(signal.SIGHUP)
        server.wait_for(lambda: refusals(server), "the reload to be refused")
        (refusal,) = refusals(server)
        assert f"{file.setting} {path}" in refusal and file.named in refusal
        assert server.process.poll() is None and booted_workers(server) == 2
        assert chat(server).choices[0].message.content  # the running workers serve as before

        path.write_text(file.mended(tmp_path, fake))
        server.signal(signal.SIGHUP)
        server.wait_for(lambda: server.log().count("Worker exiting") >= 2, "the old workers to exit")
        assert booted_workers(server) == 4 and len(refusals(server)) == 1
        file.applied(server, fake)
    finally:
        server.stop()


def test_a_reload_with_a_typo_in_the_gunicorn_config_is_refused(tmp_path, fake):
    config = tmp_path / "gunicorn.conf.py"
    shutil.copy(GUNICORN_CONF, config)
    fake.default = fixture("anthropic/text.json")
    server = gunicorn(tmp_path / "gunicorn", fake, "--config", str(config))
    try:
        server.wait_for(lambda: booted_workers(server) == 2, "2 workers")
        shipped = config.read_text()
        config.write_text(shipped + "workers = (\n")
        server.signal(signal.SIGHUP)
        server.wait_for(lambda: refusals(server), "the reload to be refused")
        lines = shipped.count("\n") + 1
        (refusal,) = refusals(server)
        assert f"{config} line {lines}: SyntaxError: '(' was never closed" in refusal
        assert server.process.poll() is None and booted_workers(server) == 2
        assert chat(server, "sk-client").choices[0].message.content

        config.write_text(shipped)
        server.signal(signal.SIGHUP)
        server.wait_for(lambda: server.log().count("Worker exiting") >= 2, "the old workers to exit")
        assert chat(server, "sk-client").choices[0].message.content
    finally:
        server.stop()


def test_a_start_with_a_broken_file_stops_at_once_naming_it_and_is_not_restarted(tmp_path, fake):
    """Exit status 78, which the systemd unit does not restart on (RestartPreventExitStatus):
    the same files would be read again."""
    path = tmp_path / "routes.json"
    path.write_text(routes(fake).replace('"m-1"', '"m-1",'))
    with pytest.raises(RuntimeError, match="gunicorn exited with 78") as stopped:
        gunicorn(tmp_path / "gunicorn", fake, BRIDGE_ROUTES=str(path))
    (line,) = [line for line in str(stopped.value).splitlines() if "not started" in line]
    assert f"BRIDGE_ROUTES {path}: invalid JSON" in line
    assert "Traceback" not in str(stopped.value) and "Booting worker" not in str(stopped.value)


def test_a_worker_replaced_after_a_file_broke_serves_what_the_master_checked(tmp_path, fake):
    """A dead worker's replacement reads no file again: it would stop the master (a worker that
    cannot boot does) one crash after an operator's typo, reloaded or not."""
    path = tmp_path / "routes.json"
    path.write_text(routes(fake))
    fake.default = fixture("anthropic/text.json")
    server = gunicorn(tmp_path / "gunicorn", fake, BRIDGE_ROUTES=str(path))
    try:
        server.wait_for(lambda: server.log().count("Serving the app from") == 2, "2 workers to serve")
        path.write_text(routes(fake).replace('"m-1"', '"m-1",'))
        (first, *_) = re.findall(r"Booting worker with pid: (\d+)", server.log())
        os.kill(int(first), signal.SIGKILL)
        server.wait_for(lambda: server.log().count("Serving the app from") == 3, "a replacement worker")
        assert server.process.poll() is None
        for _ in range(4):  # new connections: either worker
            chat(server, "sk-client")
            assert fake.last.body["model"] == "m-1"
    finally:
        server.stop()
