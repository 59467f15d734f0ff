"""scripts/ship-features: it tells host crates from target crates in `cargo tree` output, finds
the crates two graphs build with different features, writes the crate that unifies them, and
the real shipped graphs agree."""

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_loader = importlib.machinery.SourceFileLoader("ship_features", str(ROOT / "scripts/ship-features"))
_spec = importlib.util.spec_from_loader("ship_features", _loader)
ship = importlib.util.module_from_spec(_spec)
_loader.exec_module(ship)

# A graph as `cargo tree -e normal,build --prefix indent -f '{p}|{f}'` prints it: `serde` for
# the target, `syn` under a proc-macro and `cc` under a build-dependencies header (both host),
# then `libc` for the target again after the build section.
TREE = """\
app v0.1.0 (/src/app)|
├── serde v1.0.0|default,std
│   └── serde_derive v1.0.0 (proc-macro)|default
│       └── syn v2.0.0|full,parsing
├── zstd-sys v2.0.0|
│   [build-dependencies]
│   └── cc v1.2.0|parallel
├── libc v0.2.0|default,std
└── proto v0.1.0 (/src/proto)|grpc
"""


def test_build_dependencies_and_proc_macros_are_host_crates_and_the_rest_target():
    crates = ship.parse_tree(TREE, "app")
    assert crates[("serde", "1.0.0", False)] == {"default", "std"}
    assert ("serde_derive", "1.0.0", True) in crates
    assert crates[("syn", "2.0.0", True)] == {"full", "parsing"}
    assert crates[("cc", "1.2.0", True)] == {"parallel"}
    assert crates[("libc", "0.2.0", False)] == {"default", "std"}
    assert crates[("proto", "path:/src/proto", False)] == {"grpc"}


def test_only_crates_two_graphs_share_with_different_features_disagree():
    a = {("tokio", "1.0.0", False): frozenset({"rt"}), ("only-a", "1.0.0", False): frozenset()}
    b = {("tokio", "1.0.0", False): frozenset({"net"}), ("tokio", "1.0.0", True): frozenset()}
    c = {("tokio", "1.0.0", False): frozenset({"rt"})}
    assert ship.disagreements({"a": a, "b": b, "c": c}) == {
        ("tokio", "1.0.0", False): {"rt", "net"}}
    assert ship.disagreements({"a": a, "c": c}) == {}


def test_the_manifest_renames_two_versions_and_keeps_default_features_off_unless_asked():
    text = ship.manifest({
        ("getrandom", "0.2.17", False): frozenset({"std"}),
        ("getrandom", "0.4.3", False): frozenset({"default", "sys_rng"}),
        ("syn", "2.0.0", True): frozenset({"full"}),
    })
    assert ('getrandom-0-2-17 = { package = "getrandom", version = "0.2.17", '
            'default-features = false, features = ["std"] }') in text
    assert ('getrandom-0-4-3 = { package = "getrandom", version = "0.4.3", '
            'features = ["sys_rng"] }') in text
    build = text.split("[build-dependencies]")[1]
    assert 'syn = { version = "2.0.0", default-features = false, features = ["full"] }' in build


def test_the_shipped_graphs_agree():
    run = subprocess.run([str(ROOT / "scripts/ship-features"), "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
