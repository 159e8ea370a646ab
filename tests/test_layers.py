"""The layers stay apart: translators are pure and import nothing of the web or the network."""

import subprocess
import sys

import pytest

TRANSLATORS = [
    f"bridge.translate.{direction}.{stage}"
    for direction in ("chat_to_messages", "messages_to_chat", "responses_to_messages")
    for stage in ("request", "response", "stream")
] + [
    "bridge.translate.messages_to_chat.tokens",
    "bridge.translate.translator",
    "bridge.translate.anthropic_stream",
    "bridge.gateway.passthrough",
    "bridge.gateway.caps",
    "bridge.gateway.routes",
    "bridge.protocols.schemas.anthropic",
    "bridge.protocols.schemas.openai",
    "bridge.protocols.schemas.responses",
]
WEB_AND_NETWORK = ("flask", "werkzeug", "requests", "urllib3", "prometheus_client")


@pytest.mark.parametrize("module", TRANSLATORS)
def test_a_translator_imports_nothing_of_flask_requests_or_prometheus(module):
    """A fresh interpreter, so what another test imported does not hide an import."""
    probe = f"import sys, {module}\nprint(' '.join(sorted(m for m in {WEB_AND_NETWORK!r} if m in sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], f"{module} loads {', '.join(loaded)}"
