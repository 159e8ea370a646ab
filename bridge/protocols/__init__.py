"""The wire protocols, and what every front and upstream of one needs: schemas, errors, SSE.

Two vocabularies, kept apart by name. A client's protocol decides the shape of its errors
(errors.OPENAI for the Chat and Responses fronts, errors.ANTHROPIC for the Messages front). An
upstream's protocol is a deployment's `protocol` in the routes file, one of the UPSTREAM_* below.
"""

UPSTREAM_CHAT = "openai-chat"
UPSTREAM_MESSAGES = "anthropic"
UPSTREAM_RESPONSES = "openai-responses"
# An Anthropic upstream's token count, after its base URL (a cloud deployment maps it to its own).
MESSAGES_COUNT_TOKENS = "/v1/messages/count_tokens"
