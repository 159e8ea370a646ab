"""Chat Completions response -> Anthropic Messages response (pure functions)."""
import datetime


def to_anthropic_message(completion, context):
    raise NotImplementedError


def to_anthropic_model_list(openai_list, aliases):
    """OpenAI's model list in Anthropic's shape, the operator's aliases first."""
    upstream = [m for m in openai_list.get("data", []) if isinstance(m, dict) and m.get("id")]
    ids = list(dict.fromkeys([*aliases, *(m["id"] for m in upstream)]))
    created = {m["id"]: m.get("created") for m in upstream}
    data = [{"type": "model", "id": model_id, "display_name": model_id,
             "created_at": _rfc3339(created.get(model_id))} for model_id in ids]
    return {"data": data, "has_more": False,
            "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}


def _rfc3339(epoch):
    if not isinstance(epoch, (int, float)):
        epoch = 0
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
