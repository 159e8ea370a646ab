"""Anthropic Messages response -> Chat Completions response (pure functions)."""
import datetime


def to_chat_completion(message, context):
    raise NotImplementedError


def to_openai_model_list(anthropic_list, aliases):
    """Anthropic's model list in OpenAI's shape, the operator's aliases first."""
    upstream = [m for m in anthropic_list.get("data", []) if isinstance(m, dict) and m.get("id")]
    created = {m["id"]: _epoch(m.get("created_at")) for m in upstream}
    ids = list(dict.fromkeys([*aliases, *(m["id"] for m in upstream)]))
    return {"object": "list",
            "data": [{"id": model_id, "object": "model", "created": created.get(model_id, 0),
                      "owned_by": "anthropic"} for model_id in ids]}


def _epoch(text):
    try:
        return int(datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0
