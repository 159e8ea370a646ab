"""The JSON documents decoded from inside a request (json_values.loads_decoded) counted once
against its budget of values, when its refusal loads it a second time too (schemas.load_fields)."""

import base64
import contextvars
import json

import pytest

from bridge.protocols import json_values
from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas import openai, responses

DOCUMENT = {"pad": [1] * 600}
VALUES = 602  # the document, the array and its items
HI = {"role": "user", "content": "hi"}
CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps(DOCUMENT)}}
CARRIED = "bridge.v1." + base64.urlsafe_b64encode(json.dumps(DOCUMENT).encode()).decode().rstrip("=")
BODIES = [  # a front's body decoding DOCUMENT from inside it, and refused for a field after it
    (
        openai.validate_chat,
        {"model": "m", "messages": [HI, {"role": "assistant", "tool_calls": [CALL]}], "temperature": "hot"},
        "temperature",
    ),
    (
        responses.validate_responses,
        {"model": "m", "input": [HI, {"type": "reasoning", "encrypted_content": CARRIED}], "max_output_tokens": "9"},
        "max_output_tokens",
    ),
]


def refusal(validate, body, left):
    def run():
        json_values.set_budget(left, left)
        with pytest.raises(BridgeError) as caught:
            validate(body)
        return caught.value

    return contextvars.copy_context().run(run)


@pytest.mark.parametrize("validate, body, param", BODIES, ids=["arguments", "encrypted_content"])
def test_a_refused_requests_decoded_documents_count_once(validate, body, param):
    """The refusal names the bad field while the budget holds the document once, and is a 413
    once it does not: each document counted once, neither twice nor not at all."""
    refused = refusal(validate, body, VALUES)
    assert (refused.status, refused.param) == (400, param)
    refused = refusal(validate, body, VALUES - 1)
    assert refused.status == 413 and "BRIDGE_MAX_JSON_VALUES" in refused.message
