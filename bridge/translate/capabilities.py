"""What each Anthropic model takes, as data: the next model needs a line, not a release.

Looked up by the upstream model name (after BRIDGE_MODEL_MAP or a deployment's `model`),
first matching `*` pattern wins: a deployment's `capabilities` first, then
BRIDGE_MODEL_CAPABILITIES, then DEFAULTS. Sources: Anthropic's adaptive thinking and
structured outputs pages (Opus 4.7 takes only adaptive thinking and refuses budget_tokens;
Opus 4.6 and Sonnet 4.6 take both, budget_tokens deprecated; older models only budgets),
and its effort page for the levels (max on Mythos Preview, Opus 4.7, Opus 4.6 and Sonnet
4.6; xhigh on Opus 4.7 and the Mythos models after the Preview, not on the Preview).

One line is OpenAI's, read for a Responses upstream: `encrypted_reasoning`, a reasoning
model (o-series, gpt-5, codex), which returns its reasoning encrypted for the next turn
(`include: ["reasoning.encrypted_content"]`), takes `reasoning`, and refuses `temperature`
and `top_p`. OpenAI refuses that `include` for its models that do not reason (gpt-4o,
gpt-4.1: "Encrypted content is not supported with this model").
"""

import dataclasses
import fnmatch
import functools


@dataclasses.dataclass(frozen=True)
class Capabilities:
    # output_config.effort levels taken with thinking {"type": "adaptive"}; none: no adaptive thinking
    efforts: tuple = ()
    budget_tokens: bool = True  # thinking {"type": "enabled", "budget_tokens": N}
    structured_output: bool = False  # output_config.format (native JSON answers)
    temperature_with_thinking: bool = False  # temperature/top_p/top_k kept with thinking on
    encrypted_reasoning: bool = True  # an OpenAI reasoning model: encrypted reasoning, no temperature


FIELDS = tuple(field.name for field in dataclasses.fields(Capabilities))
EFFORTS = ("low", "medium", "high", "xhigh", "max")  # Anthropic's output_config.effort, ascending

_BUDGET = Capabilities(structured_output=True)
_NO_XHIGH = ("low", "medium", "high", "max")  # xhigh came after max
_NO_REASONING = Capabilities(encrypted_reasoning=False)

# (pattern, capabilities), first match wins; the last line is any other model (today's rules).
DEFAULTS = (
    ("claude-opus-4-7*", Capabilities(efforts=EFFORTS, budget_tokens=False, structured_output=True)),
    ("claude-mythos-preview*", Capabilities(efforts=_NO_XHIGH, budget_tokens=False, structured_output=True)),
    ("claude-mythos*", Capabilities(efforts=EFFORTS, budget_tokens=False, structured_output=True)),
    ("claude-opus-4-6*", Capabilities(efforts=_NO_XHIGH, structured_output=True)),
    ("claude-sonnet-4-6*", Capabilities(efforts=_NO_XHIGH, structured_output=True)),
    ("claude-opus-4-5*", _BUDGET),
    ("claude-sonnet-4-5*", _BUDGET),
    ("claude-haiku-4-5*", _BUDGET),
    ("claude-opus-4-1*", _BUDGET),
    ("gpt-4*", _NO_REASONING),
    ("gpt-3.5*", _NO_REASONING),
    ("chatgpt-4o*", _NO_REASONING),
    ("*", Capabilities()),
)


def capabilities_of(model, overrides=()):
    """The capabilities of upstream `model`: the first of `overrides` ((pattern, {field: value}),
    ...) it matches, over the model's line of DEFAULTS."""
    base = _default_of(model)
    for pattern, fields in overrides:
        if fnmatch.fnmatchcase(model, pattern):
            return dataclasses.replace(base, **fields)
    return base


@functools.lru_cache(maxsize=1024)
def _default_of(model):
    """The model's line of DEFAULTS, kept per name (bounded: clients choose names), since a
    request may look it up several times."""
    return next(caps for pattern, caps in DEFAULTS if fnmatch.fnmatchcase(model, pattern))


def parse_overrides(document, where):
    """{pattern: {field: bool}} -> ((pattern, fields), ...), or ValueError naming the entry."""
    if not isinstance(document, dict):
        raise ValueError(f"{where}: must map upstream model name patterns to objects of capabilities")
    entries = []
    for pattern, fields in document.items():
        if not isinstance(fields, dict):
            raise ValueError(f"{where}: {pattern!r} must be an object of capabilities")
        entries.append((pattern, check_fields(fields, f"{where}: {pattern!r}")))
    return tuple(entries)


def check_fields(fields, where):
    """{field: value} checked: efforts a list of Anthropic effort levels, the others true or false."""
    checked = {}
    for name, value in fields.items():
        if name not in FIELDS:
            raise ValueError(f"{where}: unknown capability {name!r} (known: {', '.join(FIELDS)})")
        if name == "efforts":
            if not isinstance(value, list) or not all(level in EFFORTS for level in value):
                raise ValueError(f"{where}: efforts must be a list of {', '.join(EFFORTS)}")
            value = tuple(value)
        elif not isinstance(value, bool):
            raise ValueError(f"{where}: {name} must be true or false")
        checked[name] = value
    return checked
