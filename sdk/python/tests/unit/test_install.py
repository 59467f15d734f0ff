"""`pip install ./sdk/python` leaves nothing in the source tree: no `build/`, no `*.egg-info`,
no generated stubs (setup.py builds in a scratch directory). Installed from a copy of the tree
(so that a regression litters a temp dir, not the checkout), with the venv's own build tools
(`--no-build-isolation`, as scripts/setup installs it): offline, a few seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2]
REPO = SDK.parents[1]
LEFT_OUT = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", ".pytest_cache")


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_pip_install_builds_outside_the_source_tree(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools builds the stubs")
    pytest.importorskip("setuptools")
    tree = tmp_path / "repo"
    shutil.copytree(SDK, tree / "sdk" / "python", ignore=LEFT_OUT)
    (tree / "proto" / "grpc").mkdir(parents=True)
    shutil.copy(REPO / "proto" / "grpc" / "voxgate.proto", tree / "proto" / "grpc")
    before = files(tree)
    target = tmp_path / "installed"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-build-isolation", "--no-deps", "--no-compile", "--target", str(target),
         str(tree / "sdk" / "python")],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert files(tree) - before == set(), "the install left build output in the source tree"
    stubs = target / "voxgate" / "_proto"
    assert {"voxgate_pb2.py", "voxgate_pb2.pyi", "voxgate_pb2_grpc.py"} <= {
        p.name for p in stubs.iterdir()}
    assert (target / "voxgate" / "py.typed").is_file()
