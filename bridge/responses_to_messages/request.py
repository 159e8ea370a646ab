"""OpenAI Responses request -> Anthropic Messages request (pure functions).

(Skeleton: the Context below is the contract between this module and
response.py / stream.py; the translation is being written.)
"""
import dataclasses


@dataclasses.dataclass
class Context:
    """What the response and stream translators need to know about the request."""
    model: str                 # the name the client asked for; the response carries it back
    stream: bool
    response_id: str           # resp_<32 hex>, minted per request: nothing is stored
    created_at: int            # unix seconds
    echo: dict                 # request parameters a Response object repeats (instructions, tools,
                               # tool_choice, parallel_tool_calls, temperature, top_p,
                               # max_output_tokens, reasoning, text, metadata, store, truncation, user)
    tools: dict                # upstream (Anthropic) tool name -> {"kind": "function" | "custom",
                               # "name": the client's name, "namespace": str or None}
    json_tool: str = None      # the forced tool whose input is the answer (text.format json_*)
    summary: bool = False      # reasoning.summary asked for: thinking text shown as summary_text
    dropped: list = dataclasses.field(default_factory=list)  # for x-bridge-dropped-params
