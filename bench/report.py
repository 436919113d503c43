"""The Markdown table and the PNG plots of a benchmark run (matplotlib optional)."""

from __future__ import annotations

from pathlib import Path


def markdown(meta: dict, rows: list[dict]) -> str:
    head = [
        f"# gemini benchmarks: {meta.get('gpu', '?')}",
        "",
        f"{meta.get('date', '')} · driver {meta.get('driver', '?')} · "
        f"{'fake driver (dry run)' if meta.get('fake') else 'real GPU'} · "
        f"total {meta.get('total_s', 0):.0f} s · solo fixed-work rate "
        f"{meta.get('solo', '?')} kernels/s ({meta.get('kernel_ms', '?')} ms each)",
        "",
        "| scenario | metric | value | goal | ok |",
        "|---|---|---|---|---|",
    ]
    body = []
    for r in rows:
        ok = {True: "✅", False: "❌", None: ""}[r.get("ok")]
        cells = [str(r.get(k, "")).replace("|", "\\|") for k in ("scenario", "metric", "value",
                                                                 "goal")]
        body.append("| " + " | ".join(cells) + f" | {ok} |")
    return "\n".join(head + body) + "\n"


def plots(results: dict, base: Path) -> list[str]:
    """Per-client share over time for the S3 configs (250 ms bins) and S4 (100 ms bins)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return []
    written = []
    s3 = results.get("S3", {}).get("configs", {})
    runs = [(k, v) for k, v in s3.items() if "share_250ms" in v]
    ts = results.get("S3", {}).get("timeslice_30_70", {})
    if "share_250ms" in ts:
        runs.append(("time-slicing (no gemini)", ts))
    if runs:
        fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.4 * len(runs)), sharex=True,
                                 squeeze=False)
        for ax, (label, r) in zip(axes[:, 0], runs, strict=True):
            for i, (name, series) in enumerate(r["share_250ms"].items()):
                xs = [0.25 * j + 0.125 for j in range(len(series))]
                ax.plot(xs, series, color=f"C{i}", label=f"{name}")
                tgt = (r.get("target") or {}).get(name)
                if tgt is not None and r.get("gemini", True):
                    ax.axhline(tgt, color=f"C{i}", ls="--", lw=0.8)
            ax.set_ylim(0, 1.05)
            ax.set_ylabel("share")
            ax.set_title(f"S3 {label}: fixed-work throughput / solo, 250 ms bins (dashed: request)",
                         fontsize=9)
            ax.legend(loc="upper right", fontsize=7)
        axes[-1, 0].set_xlabel("seconds since start")
        fig.tight_layout()
        path = base.with_name(base.name + "-s3.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(str(path))
    s4 = results.get("S4", {})
    if "share_100ms" in s4:
        fig, ax = plt.subplots(figsize=(10, 3))
        for i, (name, series) in enumerate(s4["share_100ms"].items()):
            ax.plot([0.1 * j + 0.05 for j in range(len(series))], series, color=f"C{i}",
                    label=name)
        for t in s4.get("t_b", []):
            ax.axvline(t, color="gray", ls=":", lw=0.8)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("seconds since start")
        ax.set_ylabel("share (100 ms bins)")
        ax.set_title("S4: A (0.3/1.0) alone, B (0.5/1.0) from 4 s to 9 s", fontsize=9)
        ax.legend(loc="upper right", fontsize=7)
        fig.tight_layout()
        path = base.with_name(base.name + "-s4.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(str(path))
    return written
