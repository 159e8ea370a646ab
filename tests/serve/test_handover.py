"""The stream hand-over's contract (bridge/serve/handover.py), through gunicorn from
deploy/gunicorn.conf.py serving the bridge's app behind one more WSGI layer, as an operator's
middleware would be: a stream leaves its request thread only through layers that hand each
item of the body on."""

import pytest
import requests

from tests.fake_upstream import fixture
from tests.helpers.servers import TEXT_CHAT, gunicorn, open_text_streams

pytestmark = pytest.mark.slow  # make test-fast leaves it out (setup.cfg)

# gunicorn imports it from its working directory: `layered:app("every")`.
LAYERED_APP = '''
from bridge.app import create_app

KEPT = {"every": lambda item: True, "bytes": lambda item: isinstance(item, bytes)}


def app(handed_on):
    """The bridge's app behind a layer handing on "every" item of the body, or "bytes" only."""
    made = create_app()
    inner, kept = made.wsgi_app, KEPT[handed_on]
    made.wsgi_app = lambda environ, start_response: _layer(inner(environ, start_response), kept)
    return made


def _layer(body, kept):
    try:
        for item in body:
            if kept(item):
                yield item
    finally:
        body.close()
'''


@pytest.mark.parametrize(("handed_on", "parks"), [("every", True), ("bytes", False)])
def test_a_stream_leaves_its_thread_only_through_layers_that_hand_each_item_on(tmp_path, fake, handed_on, parks):
    """One request thread and an open stream: a request beside it is answered once the stream
    parked, or refused (after BRIDGE_QUEUE_TIMEOUT) while the stream keeps the thread. Either
    way the stream arrives whole."""
    (tmp_path / "layered.py").write_text(LAYERED_APP)
    server = gunicorn(
        tmp_path,
        fake,
        f'layered:app("{handed_on}")',
        BRIDGE_WORKERS="1",
        BRIDGE_THREADS="1",
        BRIDGE_QUEUE_TIMEOUT="1",
    )
    try:
        ((upstream, chunks),) = open_text_streams(server.url, fake, 1)
        fake.reply(fixture("anthropic/text.json"))
        beside = requests.post(f"{server.url}/v1/chat/completions", json=TEXT_CHAT, timeout=10)
        if parks:
            assert beside.status_code == 200, beside.text
        else:
            assert beside.status_code == 503 and "BRIDGE_THREADS" in beside.text
        upstream.release_rest()
        rest = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert rest == [text for _, text in upstream.texts[1:]]
    finally:
        server.stop()
    assert "Traceback" not in server.log()
