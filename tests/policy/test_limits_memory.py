"""The request limits under gunicorn as deployed: a 30 MB body of 830,000 tiny messages is
refused in its client's protocol with the worker's memory in proportion to the body's size
(it peaked at 766 MiB before the limits), and several at once are bounded by the large-body slots;
so is a body whose reasoning item decodes to millions of values (684 MiB, and answered, before).

Memory is the worker's peak resident set (VmHWM in /proc/<pid>/status), which the kernel keeps:
no sampling can miss a peak.
"""

import concurrent.futures
import json

import pytest
import requests

from bench.abuse import reasoning_bomb
from bench.procstat import tree
from tests.fake_upstream import fixture
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error
from tests.helpers.servers import gunicorn

pytestmark = pytest.mark.slow  # make test-fast leaves it out (setup.cfg)

MIB = 1024 * 1024
TINY_MESSAGES = 830_000


def tiny_messages(items="messages"):
    """The issue's body: 830,000 messages of two characters each, 29 MB of JSON."""
    body = {"model": "claude-sonnet-4-5", items: [{"role": "user", "content": "hi"}] * TINY_MESSAGES}
    return json.dumps(body if items == "input" else {**body, "max_tokens": 16}).encode()


def peak_mib(server):
    """The peak resident set of gunicorn's one worker so far, in MiB."""
    (worker,) = [pid for pid in tree(server.process.pid) if pid != server.process.pid]
    with open(f"/proc/{worker}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def post(server, path, data):
    return requests.post(
        f"{server.url}{path}", data=data, headers={**ANTHROPIC_HEADERS, "content-type": "application/json"}, timeout=120
    )


def answers_a_normal_request(server, fake):
    fake.reply(fixture("anthropic/text.json"))
    small = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    return requests.post(f"{server.url}/v1/chat/completions", json=small, timeout=30).status_code == 200


@pytest.fixture
def one_worker(tmp_path, fake):
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_LOG_LEVEL="WARNING")
    assert answers_a_normal_request(server, fake)  # what serving costs is in the baseline
    yield server
    server.stop()


@pytest.mark.parametrize(
    "path, items",
    [("/v1/chat/completions", "messages"), ("/v1/responses", "input"), ("/v1/messages", "messages")],
)
def test_the_30_mb_body_of_tiny_messages_is_refused_with_memory_in_proportion_to_its_size(
    one_worker, fake, path, items
):
    """The ceiling: the body's bytes four times over (read, and the copies the count of its
    values makes), where a plain proxy holds them once and the bridge held 25 times as much."""
    body = tiny_messages(items)
    baseline = peak_mib(one_worker)
    refused = post(one_worker, path, body)
    if path == "/v1/messages":
        assert is_anthropic_error(refused, 413, "request_too_large")
    else:
        assert is_openai_error(refused, 413)
    assert peak_mib(one_worker) - baseline < 4 * len(body) / MIB
    assert "BRIDGE_MAX_JSON_VALUES" in refused.json()["error"]["message"]
    assert answers_a_normal_request(one_worker, fake)
    assert len(fake.requests) == 2  # the warm-up and the one above: nothing of the large body went upstream


def test_six_such_bodies_at_once_are_bounded_by_the_large_body_slots(one_worker, fake):
    """Six at once, as in the issue (2.9 GiB then): the worker's two slots let two be read and
    counted at a time, the others wait their turn, and every one is refused. It holds only with
    the large blocks given back as they are freed (deploy/gunicorn.conf.py, on_starting)."""
    body = tiny_messages()
    baseline = peak_mib(one_worker)
    assert post(one_worker, "/v1/chat/completions", body).status_code == 413
    one = peak_mib(one_worker) - baseline
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda _: post(one_worker, "/v1/chat/completions", body).status_code, range(6)))
    assert statuses == [413] * 6
    assert peak_mib(one_worker) - baseline < 3 * one  # two slots' worth, and a third for what they share unevenly
    assert answers_a_normal_request(one_worker, fake)


def test_a_32_mb_encrypted_reasoning_bomb_is_refused_with_memory_in_proportion_to_its_size(one_worker, fake):
    """8 million empty objects in base64: what is decoded from a request counts towards its JSON
    values, before it is parsed. The same ceiling as for the tiny messages: four times the body."""
    body = reasoning_bomb(32 * MIB - 1024, "claude-sonnet-4-5")
    baseline = peak_mib(one_worker)
    refused = post(one_worker, "/v1/responses", body)
    assert is_openai_error(refused, 413), refused.text[:300]
    assert "encrypted_content" in refused.text and "BRIDGE_MAX_JSON_VALUES" in refused.text
    assert peak_mib(one_worker) - baseline < 4 * len(body) / MIB
    assert answers_a_normal_request(one_worker, fake)
    assert len(fake.requests) == 2  # the warm-up and the one above
