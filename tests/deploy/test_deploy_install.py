"""`pip install /opt/bridge` installs the service and nothing else: not bench or tests."""

from bench.processes import ROOT


def packages(root, top):
    """The packages under `root`/`top`, dotted."""
    return sorted(".".join(init.parent.relative_to(root).parts) for init in (root / top).rglob("__init__.py"))


def test_only_bridge_with_every_subpackage_and_its_command_is_installed(installed_bridge):
    assert sorted(p.name for p in installed_bridge.iterdir() if p.suffix != ".dist-info") == ["bin", "bridge"]
    assert packages(installed_bridge, "bridge") == packages(ROOT, "bridge")
    assert [p.name for p in (installed_bridge / "bin").iterdir()] == ["bridge"]
