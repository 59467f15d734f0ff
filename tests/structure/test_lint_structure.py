"""scripts/lint-structure against small made-up trees: each rule reports a breach when broken
and stays quiet when kept, and the real tree is clean."""

import importlib.machinery
import importlib.util
from pathlib import Path
import textwrap

ROOT = Path(__file__).resolve().parents[2]
_loader = importlib.machinery.SourceFileLoader("lint_structure", str(ROOT / "scripts/lint-structure"))
_spec = importlib.util.spec_from_loader("lint_structure", _loader)
lint = importlib.util.module_from_spec(_spec)
import sys  # noqa: E402  (dataclasses look their module up in sys.modules)
sys.modules["lint_structure"] = lint
_loader.exec_module(lint)


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def check(root: Path) -> list[str]:
    return lint.check(root, crates=["c"], packages=["pkg/src/p"])


def test_a_clean_tree_has_no_breach(tmp_path):
    root = tree(tmp_path, {
        "c/src/lib.rs": "pub mod a;\npub mod b;\n",
        "c/src/a.rs": "use crate::b::B;\npub struct A(B);\n",
        "c/src/b.rs": "pub struct B;\n",
        "pkg/src/p/__init__.py": "from p.a import A\n",
        "pkg/src/p/a.py": "from p.b import B\nclass A(B): pass\n",
        "pkg/src/p/b.py": "class B: pass\n",
    })
    assert check(root) == []


def test_two_rust_files_naming_each_other_are_a_circle(tmp_path):
    root = tree(tmp_path, {
        "c/src/lib.rs": "pub mod a;\npub mod b;\n",
        "c/src/a.rs": "use crate::b::B;\npub struct A;\n",
        # In code rather than a `use`, and in a comment (which must not count) the other way.
        "c/src/b.rs": "pub struct B;\nfn f() -> crate::a::A { crate::a::A }\n// crate::nothing\n",
    })
    [breach] = check(root)
    assert "import circle" in breach and "c/src/a.rs" in breach and "c/src/b.rs" in breach


def test_a_child_using_its_parents_item_while_the_parent_uses_it_is_a_circle(tmp_path):
    root = tree(tmp_path, {
        "c/src/lib.rs": "pub mod m;\n",
        "c/src/m/mod.rs": "mod leaf;\nuse leaf::L;\npub const FRAME: u32 = 20;\n",
        "c/src/m/leaf.rs": "use super::FRAME;\npub struct L;\n",
    })
    [breach] = check(root)
    assert "c/src/m/mod.rs" in breach and "c/src/m/leaf.rs" in breach


def test_tests_may_use_the_module_they_test(tmp_path):
    root = tree(tmp_path, {
        "c/src/lib.rs": "pub mod m;\n",
        "c/src/m.rs": "pub fn f() {}\n#[cfg(test)]\nmod tests;\n",
        "c/src/m/tests.rs": "use super::*;\n#[test]\nfn t() { f() }\n",
    })
    assert check(root) == []


def test_inline_tests_using_super_name_their_own_file(tmp_path):
    # `super::*` inside a file's `mod tests { }` is the file itself, not its parent.
    root = tree(tmp_path, {
        "c/src/lib.rs": "pub mod m;\n",
        "c/src/m/mod.rs": "mod leaf;\npub use leaf::L;\n",
        "c/src/m/leaf.rs": "pub struct L;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    })
    assert check(root) == []


def test_a_long_file_counts_only_lines_besides_its_tests(tmp_path):
    body = "fn x() {}\n" * 690
    tests = "#[cfg(test)]\nmod tests {\n" + "    #[test] fn t() {}\n" * 100 + "}\n"
    root = tree(tmp_path, {"c/src/lib.rs": body + tests})
    assert check(root) == []
    root = tree(tmp_path, {"c/src/lib.rs": body + "fn y() {}\n" * 20 + tests})
    [breach] = check(root)
    assert "710 lines besides tests" in breach


def test_a_long_function_needs_a_comment_saying_why(tmp_path):
    long_fn = "fn long() {\n" + "    let _ = 1;\n" * 125 + "}\n"
    root = tree(tmp_path, {"c/src/lib.rs": long_fn})
    [breach] = check(root)
    assert "fn long has 127 lines" in breach
    root = tree(tmp_path, {"c/src/lib.rs": "// Long: one match arm per flag, read top to bottom.\n"
                                           "#[allow(dead_code)]\n" + long_fn})
    assert check(root) == []


def test_braces_in_strings_do_not_end_a_function(tmp_path):
    text = 'fn f() -> String {\n    let s = "}}}";\n' + "    let _ = 1;\n" * 130 + '    s.into()\n}\n'
    root = tree(tmp_path, {"c/src/lib.rs": text})
    [breach] = check(root)
    assert "fn f has" in breach


def test_python_modules_importing_each_other_are_a_circle_even_for_type_checking(tmp_path):
    root = tree(tmp_path, {
        "pkg/src/p/__init__.py": "",
        "pkg/src/p/call.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                             "    from p.mux import Mux\n",
        "pkg/src/p/mux.py": "from . import call\n",
    })
    [breach] = check(root)
    assert "p.call" in breach and "p.mux" in breach


def test_the_repository_keeps_the_house_rules():
    assert lint.check(ROOT) == []
