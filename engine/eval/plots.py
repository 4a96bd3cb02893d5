"""PNG plots of a summary in the papers' styles (matplotlib, Agg backend):

- ``hits_f1.png``: Hits@Any and F1 per method, incomplete (blue) vs complete (red) — BRINK Fig. 1;
- ``hhr.png``: HHR per method and graph setting — BRINK Fig. 2;
- ``hhr_rule_type.png``: HHR by rule type per setting — BRINK Fig. 3;
- ``hit1_by_hop.png``: MetaQA Hit@1 (mean ± std over seeds) by question hop count, one bar
  per method / retrieval setting — KG-RAG Figs. 5-6."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

SETTING_COLOURS = {"incomplete": "#4C72B0", "complete": "#C44E52"}
PALETTE = ("#4C72B0", "#C44E52", "#55A868", "#8172B2", "#CCB974", "#64B5CD")


def _colour(name: str, i: int) -> str:
    head = name.split("/", 1)[0].split(" ", 1)[0]
    return SETTING_COLOURS.get(head, PALETTE[i % len(PALETTE)])


def _variant(s: Mapping[str, Any]) -> str:
    """Everything of a setting but its graph: method plus the swept parameters."""
    info = s["setting"]
    parts = [info["method"]]
    if info.get("hops") is not None:
        parts.append(f"N={info['hops']}")
    if info.get("top_k") is not None:
        parts.append(f"K={info['top_k']}")
    return " ".join(parts)


def _grouped(ax: Any, groups: Sequence[str], series: Mapping[str, Sequence[float]],
             errors: Mapping[str, Sequence[float]] | None = None) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        err = errors.get(name) if errors else None
        ax.bar(xs, values, width, label=name, color=_colour(name, i), yerr=err, capsize=3 if err else 0)
    top = max(1.0, max((v for vs in series.values() for v in vs), default=1.0))
    ax.set_ylim(0, top * 1.2)  # room for the legend above the bars
    if top <= 1.0:
        ax.set_yticks([i / 5 for i in range(6)])
    ax.legend(loc="upper center", ncol=min(3, len(series)), fontsize=8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20 if max(map(len, groups), default=0) > 10 else 0, ha="right"
                       if max(map(len, groups), default=0) > 10 else "center")


def _table(settings: Mapping[str, Any], metric: str) -> tuple[list[str], dict[str, list[float]]]:
    """Rows = variants (method + parameters), columns = graph settings, for one question set."""
    variants: list[str] = []
    graphs: list[str] = []
    cell: dict[tuple[str, str], float] = {}
    for s in settings.values():
        v, g = _variant(s), s["setting"]["graph_setting"]
        variants += [v] if v not in variants else []
        graphs += [g] if g not in graphs else []
        cell[(v, g)] = s.get(metric) or 0.0
    # incomplete first, as in the paper's legend order
    order = list(graphs)
    graphs.sort(key=lambda g: (g != "incomplete", g != "complete", order.index(g)))
    return variants, {g: [cell.get((v, g), 0.0) for v in variants] for g in graphs}


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _by_question_set(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, s in summary["settings"].items():
        out.setdefault(s["setting"]["questions"], {})[key] = s
    return out


def write_plots(out_dir: Path, summary: Mapping[str, Any]) -> list[Path]:
    written = []
    sets = _by_question_set(summary)
    brink = {q: s for q, s in sets.items() if any(x.get("hhr") is not None for x in s.values())}
    metaqa = {q: s for q, s in sets.items() if q not in brink}
    for qset, settings in brink.items():
        prefix = "" if len(brink) == 1 else f"{qset.replace('/', '_').replace(':', '_')}_"
        variants, hits = _table(settings, "hits_any")
        _, f1 = _table(settings, "f1")
        fig, axes = plt.subplots(1, 2, figsize=(max(6, 2 + 1.6 * len(variants)) * 1.6, 4))
        for ax, series, title in ((axes[0], hits, "Hits@Any"), (axes[1], f1, "F1-score")):
            _grouped(ax, variants, series)
            ax.set_title(f"{title} — {qset}")
        written.append(_save(fig, out_dir / f"{prefix}hits_f1.png"))

        _, hhr = _table(settings, "hhr")
        fig, ax = plt.subplots(figsize=(max(5, 2 + 1.4 * len(variants)), 4))
        _grouped(ax, variants, hhr)
        ax.set_ylabel("HHR = Hits@Hard / Hits@Any")
        ax.set_title(f"Hard Hits Rate — {qset}")
        written.append(_save(fig, out_dir / f"{prefix}hhr.png"))

        kinds = sorted({k for s in settings.values() for k in s.get("by_rule_type", {})})
        if kinds:
            series = {key: [s.get("by_rule_type", {}).get(k, {}).get("hhr", 0.0) for k in kinds]
                      for key, s in settings.items()}
            fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(kinds) * max(1, len(series)) / 2), 4))
            _grouped(ax, kinds, {k.split("/", 1)[-1]: v for k, v in series.items()})
            ax.set_ylabel("HHR")
            ax.set_title(f"HHR by rule type — {qset}")
            written.append(_save(fig, out_dir / f"{prefix}hhr_rule_type.png"))
    if metaqa:
        written.append(_hit1_plot(out_dir, metaqa))
    return written


def _hit1_plot(out_dir: Path, metaqa: Mapping[str, Mapping[str, Any]]) -> Path:
    """Groups = question hop count; bars = method / retrieval variant (and graph setting when
    there are several); error bars = std over seeds."""
    def hop_of(settings: Mapping[str, Any]) -> str:
        names = sorted({s["setting"]["questions"] for s in settings.values()})
        return ", ".join(re.sub(r"^metaqa-(\d)hop:test", r"\1-hop", n) for n in names)

    groups = [hop_of(s) for s in metaqa.values()]
    graph_names = {s["setting"]["graph_setting"] for ss in metaqa.values() for s in ss.values()}
    series: dict[str, list[float]] = {}
    errors: dict[str, list[float]] = {}
    for i, settings in enumerate(metaqa.values()):
        for s in settings.values():
            name = _variant(s) + (f" ({s['setting']['graph_setting']})" if len(graph_names) > 1 else "")
            series.setdefault(name, [0.0] * len(groups))[i] = s.get("hit@1") or 0.0
            errors.setdefault(name, [0.0] * len(groups))[i] = s.get("std", {}).get("hit@1", 0.0)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups) * max(1, len(series))), 4))
    _grouped(ax, groups, series, errors)
    ax.set_ylabel("Hit@1 (mean ± std)")
    ax.set_title("MetaQA Hit@1")
    return _save(fig, out_dir / "hit1_by_hop.png")
