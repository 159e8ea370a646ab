"""bridge/serve/meters.py: a request's metric writes made at once, as prometheus_client would."""

import json
import os
import pathlib
import subprocess
import sys

_SCRIPT = """
import json, os, sys
from bridge.serve import observability, meters
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess

counter = Counter("c", "c", ["x"])
observed = Histogram("observed", "h", ["x"], buckets=(0.005, 1, 2.5, 600))
batched = Histogram("batched", "h", ["x"], buckets=(0.005, 1, 2.5, 600))

def samples():
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return {(s.name, s.labels.get("le")): s.value for m in registry.collect() for s in m.samples}

batch = meters.Batch()
for amount in (0, 0.005, 0.0051, 1, 2.5, 600, 601, 1e9):
    observed.labels("a").observe(amount)
    batch.observe(batched.labels("a"), amount)
    batch.inc(counter.labels("a"), 2)
before = samples().get(("c_total", None))
batch.write()
child = os.fork()
if child == 0:
    batch.inc(counter.labels("a"), 5)
    batch.write()
    os._exit(0)
os.waitpid(child, 0)
seen = samples()
print(json.dumps({
    "before": before,
    "counted": seen[("c_total", None)],
    "observed": sorted([n.replace("observed", ""), le, v] for (n, le), v in seen.items() if n.startswith("observed")),
    "batched": sorted([n.replace("batched", ""), le, v] for (n, le), v in seen.items() if n.startswith("batched")),
    "files": sorted(name for name in os.listdir(sys.argv[1]) if name.startswith("counter_")),
    "expected": sorted([f"counter_{os.getpid()}.db", f"counter_{child}.db"]),
}))
"""


_NO_PID_ASKED = """
import json, os, sys
from bridge.serve import observability

series = observability.REQUESTS.labels("d", "200")
asked = []
sys.setprofile(lambda frame, event, called: event == "c_call" and called is os.getpid and asked.append(1))
for _ in range(50):
    series.inc()
sys.setprofile(None)
print(json.dumps({"asked": len(asked), "value": series._value.get()}))
"""


def run_shared(script, directory):
    """What `script` prints (JSON), run in a fresh interpreter whose metrics are shared through
    `directory`, as under gunicorn."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        cwd=pathlib.Path(__file__).parents[2],
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def test_a_batch_writes_what_the_metrics_own_calls_would_and_a_forked_child_its_own_file(tmp_path):
    """Batch.observe puts an amount in the bucket Histogram.observe would (at a bound, past the
    last one), nothing is written before write(), and a forked child's writes go to its own
    file, starting from zero rather than from its parent's counts."""
    seen = run_shared(_SCRIPT, tmp_path)
    assert seen["before"] in (None, 0.0)
    assert seen["batched"] == seen["observed"]
    assert seen["counted"] == 8 * 2 + 5
    assert seen["files"] == seen["expected"]


def test_a_shared_metric_write_asks_no_pid(tmp_path):
    """prometheus_client's own value asks the kernel for the pid on every write, to notice a fork;
    the bridge's keeps it in memory, renewed by a fork hook (above)."""
    seen = run_shared(_NO_PID_ASKED, tmp_path)
    assert seen == {"asked": 0, "value": 50.0}
