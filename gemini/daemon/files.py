"""Files other processes read while we rewrite them."""

from __future__ import annotations

import os
from pathlib import Path


def replace_text(path: str | Path, text: str) -> None:
    """Write beside `path`, then rename over it: readers never see half of it."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
