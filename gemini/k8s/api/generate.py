"""Regenerate the committed Python stubs of the kubelet APIs from the .proto files beside this.

    python -m gemini.k8s.api.generate          # rewrite *_pb2.py and *_pb2_grpc.py
    python -m gemini.k8s.api.generate --check  # exit 1 when a committed stub is out of date

Needs grpcio-tools.  The stubs are committed so that installing gemini needs no protoc; the test
suite runs --check, so a .proto edit without new stubs fails CI.  --check compares what matters,
the compiled descriptor of each file, not the text (which names the grpcio-tools version).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]  # the directory holding the `gemini` package
PROTOS = ("deviceplugin.proto", "podresources.proto")


def generate(out: Path) -> list[Path]:
    """Write the stubs under `out` (as a tree mirroring the package); returns their paths."""
    from grpc_tools import protoc  # a build-time tool, not needed at run time

    rel = HERE.relative_to(ROOT)
    for name in PROTOS:
        # Paths relative to ROOT, so that the stubs import each other as gemini.k8s.api.X.
        argv = ["protoc", f"-I{ROOT}", f"--python_out={out}", f"--grpc_python_out={out}",
                str(rel / name)]
        if protoc.main(argv) != 0:
            raise RuntimeError(f"protoc failed on {name}")
    return sorted((out / rel).glob("*_pb2*.py"))


def _without_json_names(raw: bytes) -> bytes:
    """A serialized FileDescriptorProto without json_name (set by protoc's descriptor set, left
    out of the one embedded in generated code: it changes nothing on the wire)."""
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    todo = list(proto.message_type)
    while todo:
        message = todo.pop()
        todo.extend(message.nested_type)
        for field in message.field:
            field.ClearField("json_name")
    return proto.SerializeToString(deterministic=True)


def descriptor(name: str, out: Path) -> bytes:
    """The serialized FileDescriptorProto protoc makes of one .proto file (no json_name)."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    rel = HERE.relative_to(ROOT)
    target = out / f"{name}.pb"
    if protoc.main(["protoc", f"-I{ROOT}", f"--descriptor_set_out={target}",
                    str(rel / name)]) != 0:
        raise RuntimeError(f"protoc failed on {name}")
    files = descriptor_pb2.FileDescriptorSet.FromString(target.read_bytes())
    return _without_json_names(files.file[0].SerializeToString())


def stale(out: Path) -> list[str]:
    """The committed stubs whose descriptor differs from their .proto's."""
    found = []
    for name in PROTOS:
        module = importlib.import_module(f"{__package__}.{name.removesuffix('.proto')}_pb2")
        if _without_json_names(module.DESCRIPTOR.serialized_pb) != descriptor(name, out):
            found.append(module.__name__)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gemini.k8s.api.generate", description=__doc__)
    p.add_argument("--check", action="store_true", help="compare, do not write")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.check:
            old = stale(Path(tmp))
            if old:
                print(f"out of date: {', '.join(old)}: run python -m gemini.k8s.api.generate",
                      file=sys.stderr)
                return 1
            return 0
        for made in generate(Path(tmp)):
            (HERE / made.name).write_text(made.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
