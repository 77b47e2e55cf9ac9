"""pip install --no-build-isolation ./python  (Debian: python3-pip, python3-setuptools,
python3-grpc-tools; no package index needed).

Builds the pure-Python client and generates its gRPC stubs from
../proto/zerovec/v1/zerovec.proto with grpc_tools (never committed). The attach
extension is compiled by Bazel, not here: when it has been built
(`bazel build //python:zerovec/_attach.so`, or ZEROVEC_ATTACH_SO names the file)
it is copied into the package together with the bundled model, and the wheel is
then platform-specific.
"""

import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROTO_ROOT = os.path.join(REPO, "proto")
PROTO = os.path.join(PROTO_ROOT, "zerovec", "v1", "zerovec.proto")
MODEL = os.path.join(REPO, "models", "zerovec-mini")


def attach_extension():
    path = os.environ.get("ZEROVEC_ATTACH_SO") or os.path.join(
        REPO, "bazel-bin", "python", "zerovec", "_attach.so")
    return path if os.path.isfile(path) else None


class BuildPyWithStubs(build_py):
    """build_py, then the generated stubs, the extension and the model."""

    def run(self):
        super().run()
        if not os.path.isfile(PROTO):
            sys.exit(f"setup.py: {PROTO} is missing (build from a ZeroVec checkout)")
        subprocess.check_call([
            sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={PROTO_ROOT}",
            f"--python_out={self.build_lib}", f"--grpc_python_out={self.build_lib}",
            PROTO])
        ext = attach_extension()
        package = os.path.join(self.build_lib, "zerovec")
        if ext is None:
            print("setup.py: no attach extension built (bazel build "
                  "//python:zerovec/_attach.so); installing the client only")
            return
        shutil.copyfile(ext, os.path.join(package, "_attach.so"))
        os.chmod(os.path.join(package, "_attach.so"), 0o755)
        target = os.path.join(package, "models", "zerovec-mini")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(MODEL, target)


class MaybeBinaryDistribution(Distribution):
    def has_ext_modules(self):
        return attach_extension() is not None


setup(
    name="zerovec",
    version="0.1.0",
    description="ZeroVec: typed gRPC client and zero-copy attach",
    packages=["zerovec", "zerovec.v1"],
    package_data={"zerovec": ["py.typed"]},
    python_requires=">=3.9",
    install_requires=["numpy", "grpcio", "protobuf"],
    cmdclass={"build_py": BuildPyWithStubs},
    distclass=MaybeBinaryDistribution,
)
