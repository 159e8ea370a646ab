"""The operator's map from client model names to upstream model names (BRIDGE_MODEL_MAP).

A plain module, so that translators can map names without loading the web layer.
"""

import fnmatch


def map_model(model_map, name):
    """Exact entries win over wildcard ones; wildcards are tried in the order given."""
    for pattern, target in model_map:
        if pattern == name:
            return target
    for pattern, target in model_map:
        if "*" in pattern and fnmatch.fnmatchcase(name, pattern):
            return target
    return name


def aliases(model_map):
    """Client-facing names the map defines exactly (wildcard patterns are not model ids)."""
    return [pattern for pattern, _ in model_map if "*" not in pattern]
