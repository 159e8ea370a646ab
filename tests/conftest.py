"""Shared test fixtures: a fake upstream and the bridge served over real HTTP on loopback."""
import threading

import anthropic
import openai
import pytest
from werkzeug.serving import make_server

from bridge import settings as settings_module
from bridge.app import create_app
from tests.fake_upstream import FakeUpstream

# Checks shared through tests/helpers.py report their failing values as a test module's asserts do.
pytest.register_assert_rewrite("tests.helpers")


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


def bridge_env(fake, **extra):
    env = {
        "BRIDGE_OPENAI_BASE_URL": f"{fake.url}/v1",
        "BRIDGE_ANTHROPIC_BASE_URL": fake.url,
        "BRIDGE_RETRIES": "0",
        "BRIDGE_LOG_LEVEL": "WARNING",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="session")
def fake():
    server = FakeUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh_fake(request):
    if "fake" in request.fixturenames:
        request.getfixturevalue("fake").reset()
    yield


@pytest.fixture
def start_bridge(fake):
    """Start a bridge with extra BRIDGE_* settings: `start_bridge(BRIDGE_RETRIES=2)`."""
    started = []

    def start(**extra):
        live = LiveBridge(create_app(settings_module.load(bridge_env(fake, **extra))))
        started.append(live)
        return live

    yield start
    for live in started:
        live.close()


@pytest.fixture(scope="session")
def bridge(fake):
    """The bridge with default settings, shared by the whole session."""
    live = LiveBridge(create_app(settings_module.load(bridge_env(fake))))
    yield live
    live.close()


@pytest.fixture
def anthropic_client(bridge):
    return anthropic.Anthropic(base_url=bridge.url, api_key="sk-ant-client", max_retries=0)


@pytest.fixture
def openai_client(bridge):
    return openai.OpenAI(base_url=f"{bridge.url}/v1", api_key="sk-client", max_retries=0)
