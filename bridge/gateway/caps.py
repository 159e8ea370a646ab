"""A deployment's `max_tokens` cap, applied to whatever body goes to it, translated or passed through.

Claude Code asks for up to 128000 output tokens; gpt-4.1 takes 32768 and a local model less,
and each refuses a larger request outright. A pure function of the upstream body, so one rule
serves every pair.
"""

from ..protocols import UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES
from ..translate.anthropic_request import MIN_THINKING_BUDGET

# Each upstream protocol's output-token limits.
_OUTPUT_LIMITS = {
    UPSTREAM_CHAT: ("max_completion_tokens", "max_tokens"),
    UPSTREAM_MESSAGES: ("max_tokens",),
    UPSTREAM_RESPONSES: ("max_output_tokens",),
}


def cap_max_tokens(body, protocol, cap):
    """`body` with its output-token limits lowered to `cap` (0: no cap).

    An Anthropic body's thinking budget must stay below max_tokens: one that no longer does
    is lowered to half the cap (never under Anthropic's minimum, which a cap that small
    leaves the upstream to refuse).
    """
    if not cap:
        return body
    fields = _OUTPUT_LIMITS[protocol]
    capped = {field: cap for field in fields if _whole(body.get(field)) and body[field] > cap}
    if not capped:
        return body
    body = {**body, **capped}
    thinking = body.get("thinking")
    if protocol == UPSTREAM_MESSAGES and isinstance(thinking, dict) and _whole(thinking.get("budget_tokens")):
        if thinking["budget_tokens"] >= cap:
            body["thinking"] = {**thinking, "budget_tokens": max(MIN_THINKING_BUDGET, cap // 2)}
    return body


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)
