"""Shared test fixtures: a fake upstream and the bridge served over real HTTP on loopback.

What test modules import (LiveBridge, bridge_env, ...) is in tests/helpers/.
"""

import anthropic
import openai
import pytest

from bench.processes import RedisServer
from bridge import settings as settings_module
from bridge.app import create_app
from tests.fake_upstream import FakeUpstream

# Checks shared through tests/helpers/ report their failing values as a test module's asserts do;
# registered before the first import of it.
pytest.register_assert_rewrite("tests.helpers")
from tests.helpers.programs import program  # noqa: E402
from tests.helpers.servers import LiveBridge, bridge_env, install  # noqa: E402


@pytest.fixture(scope="session")
def fake():
    server = FakeUpstream()
    yield server
    server.close()


@pytest.fixture(scope="session")
def other_fake():
    """A second upstream, for a bridge whose routes go to two."""
    server = FakeUpstream()
    yield server
    server.close()


@pytest.fixture(scope="session")
def installed_bridge(tmp_path_factory):
    """The site directory of this checkout installed as a deploy installs it, outside the checkout."""
    return install(tmp_path_factory.mktemp("install"))


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of this test's own (Debian's package: .ci/run installs it)."""
    program("redis-server")
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_fake(request):
    for name in ("fake", "other_fake"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()
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
def anthropic_sdk(bridge):
    """The anthropic SDK on the shared bridge; tests/helpers.anthropic_client(url) for another."""
    return anthropic.Anthropic(base_url=bridge.url, api_key="sk-ant-client", max_retries=0)


@pytest.fixture
def openai_sdk(bridge):
    """The openai SDK on the shared bridge; tests/helpers.openai_client(url) for another."""
    return openai.OpenAI(base_url=f"{bridge.url}/v1", api_key="sk-client", max_retries=0)
