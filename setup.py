"""Build glue: cffi's test bindings and the plain C libraries, through gemini/native/_build.py."""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _load_build_module():
    spec = importlib.util.spec_from_file_location("_gem_build", ROOT / "gemini/native/_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExtWithNative(build_ext):
    def run(self):
        super().run()
        native = "gemini/native"
        out = ROOT / native if self.inplace else Path(self.build_lib) / native
        _load_build_module().build_native(out)


setup(
    cffi_modules=["gemini/native/_build.py:ffibuilder"],
    cmdclass={"build_ext": BuildExtWithNative},
)
