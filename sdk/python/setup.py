"""Build hook of the voxgate package: generates the gRPC stubs from the bridge contract.

The stubs (voxgate/_proto/voxgate_pb2.py, .pyi and voxgate_pb2_grpc.py) are never in the source
tree: `build_py` runs grpc_tools.protoc on proto/grpc/voxgate.proto (two folders up, in the
repository) or on the copy an sdist carries (proto/voxgate.proto beside this file), and writes
them straight into the build. The .proto is mapped to the virtual path voxgate/_proto/ so that
the generated modules import each other as `voxgate._proto.voxgate_pb2`.

Nothing of a build lands in the source tree either: `build/` and `voxgate.egg-info` go to a
scratch directory of this process, removed when it exits (a `--build-base` or `--egg-base`
given on the command line still wins).
"""

import atexit
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
SCRATCH = Path(tempfile.mkdtemp(prefix="voxgate-sdk-build-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
SDIST_PROTO = HERE / "proto" / "voxgate.proto"
REPO_PROTO = HERE.parent.parent / "proto" / "grpc" / "voxgate.proto"


def find_proto() -> Path:
    for p in (REPO_PROTO, SDIST_PROTO):
        if p.is_file():
            return p
    raise SystemExit(f"voxgate.proto not found (looked at {REPO_PROTO} and {SDIST_PROTO})")


class BuildOutsideTree(build):
    def initialize_options(self) -> None:
        super().initialize_options()
        self.build_base = str(SCRATCH / "build")


class EggInfoOutsideTree(egg_info):
    def initialize_options(self) -> None:
        super().initialize_options()
        self.egg_base = str(SCRATCH)


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        import grpc_tools
        from grpc_tools import protoc

        proto = find_proto()
        out = Path(self.build_lib)
        (out / "voxgate" / "_proto").mkdir(parents=True, exist_ok=True)
        well_known = Path(grpc_tools.__file__).parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{well_known}",
            f"-Ivoxgate/_proto={proto.parent}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            f"voxgate/_proto/{proto.name}",
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"grpc_tools.protoc failed on {proto}")


class SdistWithProto(sdist):
    """An sdist is built away from the repository: it carries its own copy of the contract."""

    def make_release_tree(self, base_dir, files) -> None:
        super().make_release_tree(base_dir, files)
        dest = Path(base_dir) / "proto"
        dest.mkdir(exist_ok=True)
        (dest / "voxgate.proto").write_bytes(find_proto().read_bytes())


setup(cmdclass={"build": BuildOutsideTree, "build_py": BuildPyWithStubs,
                "egg_info": EggInfoOutsideTree, "sdist": SdistWithProto})
