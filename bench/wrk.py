"""Throughput with wrk, the load generator that is never the bottleneck here."""

import re
import shutil
import subprocess
import tempfile

INSTALL_HINT = (
    "wrk is not installed. It is the benchmark's load generator; install it from the "
    "OS packages: `sudo apt-get update && sudo apt-get install -y wrk` (Debian/Ubuntu)."
)


def available():
    return shutil.which("wrk") is not None


def version():
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
    return (out.stdout + out.stderr).splitlines()[0].split(" [")[0]


def _script(body, headers):
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = [=====[{body.decode()}]=====]",
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def command(url, connections, duration, script="script.lua"):
    return ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "-s", script, url]


def run(url, body, headers, connections, duration):
    """{'rps', 'requests', 'errors'} for `duration` seconds of POSTs over `connections`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", encoding="utf-8") as script:
        script.write(_script(body, headers))
        script.flush()
        out = subprocess.run(
            command(url, connections, duration, script.name), capture_output=True, text=True, check=True
        ).stdout
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(non2xx.group(1)) if non2xx else 0
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "requests": requests, "errors": errors}
