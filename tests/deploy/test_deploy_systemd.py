"""deploy/systemd: the unit passes `systemd-analyze verify`, agrees with gunicorn's settings, and the env
example is valid."""

import re
import subprocess
import sys

from bench.processes import GUNICORN_CONF, ROOT
from bridge import settings as settings_module
from tests.helpers.programs import program
from tests.helpers.servers import gunicorn, served_from

UNIT = ROOT / "deploy" / "systemd" / "bridge.service"
ENV_EXAMPLE = ROOT / "deploy" / "systemd" / "bridge.env.example"


def analyze():
    return program("systemd-analyze", "systemd")


def unit_on_this_machine(tmp_path):
    """The unit with its install paths pointed at this checkout, so verify checks real files."""
    unit = UNIT.read_text()
    for shipped, local in [
        ("/opt/bridge/venv/bin/gunicorn", f"{sys.prefix}/bin/gunicorn"),
        ("/opt/bridge/venv/bin/bridge", f"{sys.prefix}/bin/bridge"),
        ("/opt/bridge", str(ROOT)),
        ("/etc/bridge/bridge.env", str(ENV_EXAMPLE)),
    ]:
        assert shipped in unit, f"bridge.service no longer mentions {shipped}"
        unit = unit.replace(shipped, local)
    path = tmp_path / "bridge.service"
    path.write_text(unit)
    return path


def directive(name):
    return re.search(rf"^{name}=(.*)$", UNIT.read_text(), re.MULTILINE).group(1)


def test_systemd_analyze_verify_passes_without_a_warning(tmp_path):
    result = subprocess.run([analyze(), "verify", str(unit_on_this_machine(tmp_path))], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout + result.stderr == ""


def test_the_sandbox_rates_ok_in_systemd_analyze_security(tmp_path):
    result = subprocess.run(
        [analyze(), "security", "--offline=true", "--no-pager", str(unit_on_this_machine(tmp_path))],
        capture_output=True,
        text=True,
    )
    exposure = re.search(r"Overall exposure level for bridge.service: ([\d.]+) (\w+)", result.stdout)
    assert exposure and float(exposure.group(1)) < 2.0 and exposure.group(2) == "OK", result.stdout[-300:]


def gunicorn_setting(name):
    values = {}
    exec(compile(GUNICORN_CONF.read_text(), str(GUNICORN_CONF), "exec"), values)
    return values[name]


def test_systemd_waits_longer_than_gunicorns_graceful_timeout():
    assert int(directive("TimeoutStopSec")) > gunicorn_setting("graceful_timeout")
    assert directive("KillMode") == "mixed"  # SIGTERM to the master only: it stops workers gracefully


def test_memory_max_holds_every_worker_with_its_large_body_slots_full():
    """The unit's sizing, as its comment explains it: the master, each worker idle with a stream
    on every thread, and each worker's large-body slots full of the largest bodies the limits let in."""
    master, worker, stream, body = 30, 33, 0.1, 160  # MiB, measured (README "Limits")
    workers, threads = gunicorn_setting("workers"), gunicorn_setting("threads")
    needed = master + workers * (worker + threads * stream + settings_module.Settings.large_body_slots * body)
    assert int(directive("MemoryMax").removesuffix("M")) >= needed


def test_a_reload_is_checked_before_the_master_is_signalled_and_a_bad_start_not_restarted():
    check, hup = re.findall(r"^ExecReload=(.*)$", UNIT.read_text(), re.MULTILINE)
    assert check == "/usr/bin/env -u PROMETHEUS_MULTIPROC_DIR /opt/bridge/venv/bin/bridge check --offline"
    assert hup == "/bin/kill -HUP $MAINPID"
    assert int(directive("RestartPreventExitStatus")) == gunicorn_setting("INVALID_CONFIGURATION")


def test_the_runtime_directory_is_where_workers_share_metrics():
    assert directive("Environment=PROMETHEUS_MULTIPROC_DIR") == f"/run/{directive('RuntimeDirectory')}"


def test_every_setting_the_env_example_names_is_one_the_bridge_knows():
    named = re.findall(r"^#?(BRIDGE_[A-Z_]+)=", ENV_EXAMPLE.read_text(), re.MULTILINE)
    known = set(settings_module._PARSERS) | settings_module._READ_ELSEWHERE
    assert named and [name for name in named if name not in known] == []


def test_the_env_example_as_shipped_loads():
    settings_module.load({"BRIDGE_SETTINGS_FILE": str(ENV_EXAMPLE)})


def test_gunicorn_in_the_units_working_directory_serves_the_installed_package(tmp_path, fake, installed_bridge):
    """gunicorn puts its working directory first on sys.path: were it /opt/bridge (here this
    checkout), the checkout's bridge/ would be served instead of the package pip installed."""
    cwd = directive("WorkingDirectory").replace("/opt/bridge", str(ROOT))
    server = gunicorn(tmp_path, fake, site=installed_bridge, cwd=cwd)
    try:
        assert set(served_from(server)) == {str(installed_bridge / "bridge")}
    finally:
        server.stop()
