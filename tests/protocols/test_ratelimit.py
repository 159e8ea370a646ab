"""Retry and rate-limit headers carried to the client's protocol: one test per rule."""

import pytest
from requests.structures import CaseInsensitiveDict

from bridge.protocols.errors import ANTHROPIC, OPENAI
from bridge.protocols.ratelimit import (
    HEADER_CHARS,
    MOST_HEADERS,
    client_headers,
    duration,
    duration_seconds,
    rfc3339,
    rfc3339_seconds,
)

NOW = rfc3339_seconds("2030-01-01T00:00:00Z")
OPENAI_ANSWER = CaseInsensitiveDict(
    {
        "Content-Type": "application/json",
        "X-Request-Id": "req_1",
        "X-RateLimit-Limit-Requests": "500",
        "X-RateLimit-Remaining-Requests": "499",
        "X-RateLimit-Reset-Requests": "120ms",
        "X-RateLimit-Limit-Tokens": "30000",
        "X-RateLimit-Remaining-Tokens": "29000",
        "X-RateLimit-Reset-Tokens": "6m0s",
    }
)
ANTHROPIC_ANSWER = CaseInsensitiveDict(
    {
        "content-type": "application/json",
        "request-id": "req_2",
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:01Z",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "39000",
        "anthropic-ratelimit-tokens-reset": "2030-01-01T00:06:00.5Z",
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-input-tokens-remaining": "29000",
        "anthropic-ratelimit-input-tokens-reset": "2030-01-01T00:06:00Z",
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "8000",
        "anthropic-ratelimit-output-tokens-reset": "2030-01-01T00:00:00Z",
    }
)


def test_openai_rate_limits_reach_an_anthropic_client_by_anthropics_names_and_reset_times():
    assert client_headers(ANTHROPIC, OPENAI_ANSWER, NOW) == {
        "anthropic-ratelimit-requests-limit": "500",
        "anthropic-ratelimit-requests-remaining": "499",
        "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:01Z",  # 120 ms, rounded up to the second
        "anthropic-ratelimit-tokens-limit": "30000",
        "anthropic-ratelimit-tokens-remaining": "29000",
        "anthropic-ratelimit-tokens-reset": "2030-01-01T00:06:00Z",
    }


def test_anthropic_rate_limits_reach_an_openai_client_by_openais_names_and_durations():
    """Anthropic's `tokens` is the tightest of its token limits: OpenAI's `tokens`. The input and
    output ones have no OpenAI name."""
    assert client_headers(OPENAI, ANTHROPIC_ANSWER, NOW) == {
        "x-ratelimit-limit-requests": "50",
        "x-ratelimit-remaining-requests": "49",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "40000",
        "x-ratelimit-remaining-tokens": "39000",
        "x-ratelimit-reset-tokens": "6m0.5s",
    }


@pytest.mark.parametrize("protocol", [ANTHROPIC, OPENAI])
def test_retry_headers_pass_as_the_upstream_sent_them(protocol):
    answer = CaseInsensitiveDict(
        {"Retry-After": "7", "retry-after-ms": "6500", "x-should-retry": "false", "content-length": "75"}
    )
    assert client_headers(protocol, answer, NOW) == {
        "retry-after": "7",
        "retry-after-ms": "6500",
        "x-should-retry": "false",
    }


@pytest.mark.parametrize("protocol, answer", [(ANTHROPIC, ANTHROPIC_ANSWER), (OPENAI, OPENAI_ANSWER)])
def test_headers_already_in_the_clients_protocol_pass_unchanged(protocol, answer):
    """A pass-through upstream: nothing to translate, nothing lost."""
    kept = client_headers(protocol, answer, NOW)
    assert kept == {name: value for name, value in answer.lower_items() if "ratelimit" in name}


def test_a_reset_that_cannot_be_read_is_left_out_not_guessed():
    from_openai = CaseInsensitiveDict({"x-ratelimit-reset-tokens": "soon", "x-ratelimit-limit-tokens": "10"})
    from_anthropic = CaseInsensitiveDict(
        {"anthropic-ratelimit-tokens-reset": "tomorrow", "anthropic-ratelimit-tokens-limit": "10"}
    )
    assert client_headers(ANTHROPIC, from_openai, NOW) == {"anthropic-ratelimit-tokens-limit": "10"}
    assert client_headers(OPENAI, from_anthropic, NOW) == {"x-ratelimit-limit-tokens": "10"}


@pytest.mark.parametrize("answer", [None, CaseInsensitiveDict({"content-type": "application/json"})])
def test_no_answer_or_no_such_headers_adds_nothing(answer):
    assert client_headers(ANTHROPIC, answer, NOW) == {} == client_headers(OPENAI, answer, NOW)


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("1s", 1),
        ("20ms", 0.02),
        ("6m0s", 360),
        ("26.604s", 26.604),
        ("1h2m3.5s", 3723.5),
        ("0s", 0),
        ("60", 60),
        ("1m", 60),
    ],
)
def test_openai_durations_are_read(text, seconds):
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "ms", "soon", "nan", "inf", "-5s", "1e300s"])
def test_what_is_not_a_duration_reads_as_none(text):
    assert duration_seconds(text) is None


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0ms"), (0.02, "20ms"), (1, "1s"), (26.604, "26.604s"), (360, "6m0s"), (3723.5, "1h2m3.5s"), (-3, "0ms")],
)
def test_durations_are_written_as_openai_writes_them(seconds, text):
    assert duration(seconds) == text


def test_rfc3339_round_trips_and_rounds_up():
    assert rfc3339(NOW + 0.2) == "2030-01-01T00:00:01Z"
    assert rfc3339_seconds(rfc3339(NOW)) == NOW
    assert rfc3339_seconds("2030-01-01T00:00:00") is None, "a time without a zone is no instant"


@pytest.mark.parametrize("protocol", [OPENAI, ANTHROPIC])
def test_an_upstream_cannot_make_the_answers_headers_large(protocol):
    """A header longer than any real one is left out, and no more than MOST_HEADERS pass: the
    client's answer fits a proxy's header buffer (deploy/nginx) whatever the upstream sends."""
    answer = CaseInsensitiveDict({"retry-after": "1", "x-ratelimit-limit-requests": "9" * 60_000})
    answer.update({f"anthropic-ratelimit-x{number}": "1" for number in range(99)})
    answer.update({f"x-ratelimit-x{number}": "1" for number in range(99)})
    headers = client_headers(protocol, answer, NOW)
    assert headers["retry-after"] == "1" and len(headers) == MOST_HEADERS
    assert all(len(name) + len(value) <= HEADER_CHARS for name, value in headers.items())
