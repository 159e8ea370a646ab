"""errors.KINDS: the one table every status and error type both ways is read from."""

import pytest

from bridge.protocols.errors import (
    ANTHROPIC,
    KINDS,
    OPENAI,
    BridgeError,
    kind_for_status,
    kind_for_type,
    status_for_upstream,
)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_renders_its_tables_status_and_types_in_both_protocols(kind):
    error = BridgeError(kind, "m")
    assert error.body_for(ANTHROPIC)["error"]["type"] == KINDS[kind].anthropic
    assert error.body_for(OPENAI)["error"]["type"] == KINDS[kind].openai
    assert error.status_for(ANTHROPIC) == KINDS[kind].status


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("timeout",)])
def test_an_upstreams_anthropic_error_type_reads_back_as_its_kind(kind):
    """timeout writes api_error for Anthropic clients (they know no timeout type), so it reads as api_error."""
    assert kind_for_type(KINDS[kind].anthropic) == kind


@pytest.mark.parametrize(
    "name, kind",
    [
        ("rate_limit_exceeded", "rate_limit"),
        ("server_overloaded", "overloaded"),
        ("timeout_error", "timeout"),
        ("server_error", "api_error"),
        ("something_new", "api_error"),
    ],
)
def test_other_names_upstreams_use_read_as_their_kind(name, kind):
    assert kind_for_type(name) == kind


@pytest.mark.parametrize(
    "status, kind, told",
    [
        (400, "invalid_request", 400),
        (422, "invalid_request", 422),
        (429, "rate_limit", 429),
        (503, "overloaded", None),
        (529, "overloaded", 529),
        (500, "api_error", 500),
        (502, "api_error", 502),
        (507, "api_error", 502),
        (504, "timeout", 504),
        (418, "invalid_request", None),
        (408, "invalid_request", 408),
        (409, "invalid_request", 409),
    ],
)
def test_an_upstream_status_gives_its_kind_and_what_the_client_is_told(status, kind, told):
    assert kind_for_status(status) == kind and status_for_upstream(status, kind) == told
    assert BridgeError(kind, "m", status=told).status_for(OPENAI) == {529: 503}.get(
        told or KINDS[kind].status, told or KINDS[kind].status
    )
