"""The ids the bridge makes itself: of requests, responses, messages and tool calls."""

import random


def random_hex():
    """32 hex digits: 128 random bits from the process's own generator, not the kernel's (a
    system call an id). An id need be unique, not secret; Python seeds the generator anew in a
    forked worker."""
    return f"{random.getrandbits(128):032x}"
