"""Tool names both upstreams accept: OpenAI and Anthropic allow 1-64 characters of [a-zA-Z0-9_-].

A plain module: the translators of both directions shorten names the same way.
"""

import hashlib
import re

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def safe_tool_name(name):
    """`name` itself when it follows the rule, else its allowed characters cut to 55 plus a short hash.

    The same name always gives the same result, so every request of a conversation agrees
    with the first on what a tool is called upstream.
    """
    if TOOL_NAME.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:55] + "_" + digest
