"""The OpenAI Responses request rules every client's pair with a Responses upstream keeps (pure functions).

- Stateless: always `store: false`; on a model that reasons (capabilities.encrypted_reasoning)
  `include: ["reasoning.encrypted_content"]`, so each reasoning item comes back whole for the
  client to carry to the next turn (OpenAI refuses the `include` from its other models).
- A reasoning model refuses `temperature` and `top_p`: dropped there and named; any other
  model takes them.
- Function tools: `strict` as the client meant it, false unless it asked (the Responses API
  takes a missing `strict` as true, and then refuses most schemas); no parameters are an
  empty object schema.
- `max_output_tokens` is at least 16, OpenAI's minimum.
"""

ENCRYPTED_REASONING = "reasoning.encrypted_content"
MIN_OUTPUT_TOKENS = 16
EMPTY_PARAMETERS = {"type": "object", "properties": {}}


def stateless(reasons):
    """store false, and the encrypted reasoning asked for on a model that reasons."""
    return {"store": False, "include": [ENCRYPTED_REASONING]} if reasons else {"store": False}


def sampling(body, reasons, dropped):
    """temperature and top_p from `body` as the model takes them; those dropped are named in `dropped`."""
    out = {}
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            if reasons:
                dropped.append(name)
            else:
                out[name] = body[name]
    return out


def function_tool(name, description, parameters, strict):
    """A Responses function tool."""
    tool = {"type": "function", "name": name}
    if description:
        tool["description"] = description
    tool["parameters"] = parameters or EMPTY_PARAMETERS
    tool["strict"] = strict is True
    return tool
