"""A small PyTorch training program, run under the hook by validate_hook (check 1) and S2.

  torch_app.py validate --limit BYTES [--graphs] [--steps 100] [--oom-gib 6]
      trains a small CNN on random data (eager, or one captured step replayed as a CUDA graph),
      then: mem_get_info, an allocation beyond the limit (must raise torch.OutOfMemoryError), a
      small allocation afterwards (the process stays usable), and a fill in 256 MiB tensors
      (driver-level memory reserved by torch must stay within the limit: no escape).
  torch_app.py bench (--seconds S | --steps N) [--graphs]
      steps/s of a larger training loop (S2).
The allocator is chosen by the caller through PYTORCH_CUDA_ALLOC_CONF.  One JSON line on stdout.
Imports nothing from gemini.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

GIB = 1 << 30
PIECE = 256 << 20


def make_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, 10),
    ).cuda()


class Trainer:
    def __init__(self, width: int, batch: int, size: int, graphs: bool) -> None:
        torch.manual_seed(0)
        self.model = make_model(width)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x = torch.randn(batch, 3, size, size, device="cuda")
        self.y = torch.randint(0, 10, (batch,), device="cuda")
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss = torch.zeros((), device="cuda")
        if graphs:
            self._capture()

    def _eager(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def _capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._eager()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = F.cross_entropy(self.model(self.x), self.y)
            self.loss.backward()
            self.opt.step()

    def step(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.loss = self._eager()

    def loss_value(self) -> float:
        return float(self.loss.item())


def exc_name(exc: BaseException) -> str:
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def validate(args: argparse.Namespace) -> dict:
    out: dict = {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                 "graphs": args.graphs}
    try:
        out["allocator_backend"] = torch.cuda.memory.get_allocator_backend()
    except Exception:
        out["allocator_backend"] = "?"
    free, total = torch.cuda.mem_get_info()
    out.update(mem_free=free, mem_total=total, total_is_limit=total == args.limit)
    t0 = time.perf_counter()
    try:
        tr = Trainer(32, 32, 32, args.graphs)
        for _ in range(args.steps):
            tr.step()
        loss = tr.loss_value()
        out.update(trained=math.isfinite(loss), loss=loss, steps=args.steps)
    except Exception as exc:
        out.update(trained=False, train_error=f"{exc_name(exc)}: {exc}"[:300])
    out["train_s"] = time.perf_counter() - t0
    torch.cuda.synchronize()
    try:
        big = torch.empty(int(args.oom_gib * GIB), dtype=torch.uint8, device="cuda")
        out.update(oom_raised=False, oom_exception="")
        del big
    except Exception as exc:
        out.update(oom_raised=isinstance(exc, torch.OutOfMemoryError), oom_exception=exc_name(exc),
                   oom_message=str(exc).splitlines()[0][:200] if str(exc) else "")
    try:
        small = torch.ones(PIECE // 4, device="cuda")
        out["usable_after_oom"] = bool(small.sum().item() == PIECE // 4)
        del small
    except Exception as exc:
        out.update(usable_after_oom=False, usable_error=exc_name(exc))
    # Fill in 256 MiB pieces until refused: what torch reserved from the driver must stay within
    # the limit.
    torch.cuda.empty_cache()
    pieces: list[torch.Tensor] = []
    max_reserved = 0
    fill_exc = ""
    def reserved() -> int:
        try:
            return int(torch.cuda.memory_reserved())
        except Exception:
            return 0

    try:
        while len(pieces) * PIECE < 1.5 * args.limit:
            pieces.append(torch.empty(PIECE, dtype=torch.uint8, device="cuda"))
            max_reserved = max(max_reserved, reserved())
    except Exception as exc:
        fill_exc = exc_name(exc)
    out.update(fill_pieces=len(pieces), fill_bytes=len(pieces) * PIECE, fill_stop=fill_exc,
               max_reserved=max_reserved,
               escaped_bytes=max(0, max(max_reserved, len(pieces) * PIECE) - args.limit))
    del pieces
    torch.cuda.empty_cache()
    return out


def bench(args: argparse.Namespace) -> dict:
    tr = Trainer(64, 128, 64, args.graphs)
    for _ in range(20):
        tr.step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    steps = 0
    while True:
        for _ in range(10):
            tr.step()
        steps += 10
        if steps % 50 == 0:
            tr.loss_value()  # a sync, as real loops log their loss
        if args.steps and steps >= args.steps:
            break
        if not args.steps and time.perf_counter() - t0 >= args.seconds:
            break
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    return {"graphs": args.graphs, "steps": steps, "wall_s": wall, "steps_per_s": steps / wall,
            "loss": tr.loss_value()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=["validate", "bench"])
    p.add_argument("--limit", type=int, default=4 * GIB)
    p.add_argument("--graphs", action="store_true")
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--seconds", type=float, default=2.5)
    p.add_argument("--oom-gib", type=float, default=6.0)
    args = p.parse_args(argv)
    if args.mode == "validate":
        args.steps = args.steps or 100
        result = validate(args)
    else:
        result = bench(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
