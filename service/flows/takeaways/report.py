"""A campaign's report: the paper's figures for this campaign, a summary and the settings that
produced it, as a PDF and PNG pages (matplotlib's Agg backend: no display needed).

Pages: 1 the answer (summary table, the promise beside what probes of the recommended
configuration measured, the settings); 2 Ω per subflow and CC with intervals, SP* marked; 3 the
measured subflow selection's path; 4 every arm's measured points and fitted curve per path
manager, with the δ band under T*, OBS and Eq. 1's buffer B.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator

import matplotlib

from ...algorithm.subset_stats import SubsetEstimate
from ...state import state_of

matplotlib.use("Agg")  # before pyplot: never a display

import matplotlib.pyplot as plt
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from models import MeasurementPhase

from . import figures
from .report_data import ReportData

PAGE = (11.69, 8.27)  # A4 landscape, inches
COLORS = plt.get_cmap("tab10").colors


def pages(data: ReportData) -> Iterator[Figure]:
    yield _summary_page(data)
    yield _omega_page(data)
    yield _selection_page(data)
    yield _fits_page(data)


def render_pdf(data: ReportData) -> bytes:
    buf = io.BytesIO()
    with PdfPages(buf, metadata={"Title": data.title, "Creator": "mpcoa"}) as pdf:
        for fig in pages(data):
            pdf.savefig(fig)
            plt.close(fig)
    return buf.getvalue()


def render_pngs(data: ReportData, dpi: int = 100) -> list[bytes]:
    out = []
    for fig in pages(data):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        plt.close(fig)
        out.append(buf.getvalue())
    return out


def _fmt(value, unit: str = "", digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}{unit}"
    return f"{value}{unit}"


def apply_axes(ax, spec: figures.FigureSpec) -> None:
    """A figure's shared axes (`figures`, which the dashboard draws from too) on matplotlib."""
    for axis, set_label, set_scale in ((spec.x, ax.set_xlabel, ax.set_xscale),
                                       (spec.y, ax.set_ylabel, ax.set_yscale)):
        set_label(axis.label)
        if axis.scale == "symlog":
            set_scale("symlog", linthresh=axis.linthresh, linscale=2.0)
        else:
            set_scale(axis.scale)


def _page(data: ReportData, heading: str) -> Figure:
    fig = plt.figure(figsize=PAGE)
    fig.suptitle(f"{data.title}\n{heading}", fontsize=12, x=0.02, ha="left")
    return fig


# --- page 1: the answer --------------------------------------------------------------------------
def _summary_page(data: ReportData) -> Figure:
    fig = _page(data, "The answer, its promise, and the settings that produced it")
    c, s, a = data.campaign, data.solved.solution, data.answer
    eq1 = (a.traditional or {}) if a else {}
    outputs = (a.outputs or {}) if a else {}
    answer_rows = [
        ("OPM / OCC", f"{s.opm} / {s.occ}" if s else f"no solution ({data.solved.error})"),
        ("OBS", _fmt(s.obs_mib if s else None, " MiB")),
        ("OTP", _fmt(s.otp_mbps if s else None, " Mbit/s")),
        ("T* (arm, buffer)", f"{_fmt(s.tp_max_mbps, ' Mbit/s')} ({s.tp_max_pm}/{s.tp_max_cc}, "
         f"{_fmt(s.tp_max_bs_mib, ' MiB')})" if s else "-"),
        ("target (1 - δ) T*", _fmt(s.target_mbps if s else None, " Mbit/s")),
        ("measured OBS",
         _fmt(s.measured_obs_mib if s else None, " MiB")),
        ("Eq. 1's B", _fmt(eq1.get("buffer_mib") or eq1.get("fallback_mib"), " MiB")
         + (f"  (OBS/B = {_fmt(eq1.get('obs_ratio'), '', 3)})" if eq1.get("obs_ratio") else "")),
        ("subflows used", ", ".join(outputs.get("subflows_used") or []) or "-"),
        ("flags", _wrap(", ".join(a.quality_flags) if a and a.quality_flags else "none", 48)),
    ]
    grid = c.buffer_grid_mib or []
    settings_rows = [
        ("mode / model", f"{c.mode} / {c.model_kind}"),
        ("CCs (active)", ", ".join(c.measured_ccs)),
        ("CCs dropped", ", ".join(f"{k}: {v}" for k, v in (c.dropped_ccs or {}).items()) or "-"),
        ("PMs", ", ".join(c.pms)),
        ("buffer grid", f"{len(grid)} buffers, {_fmt(min(grid, default=None), '')}-"
         f"{_fmt(max(grid, default=None), ' MiB')}"),
        ("runs / probe duration", f"{c.runs} / {_fmt(c.duration_s, ' s')}"),
        ("δ / seed", f"{c.delta:g} / {c.seed}"),
        ("probe budget", _fmt(state_of(c).budget.cap_s, " probe-s")),
        ("probes ok / failed", f"{data.counts.get('ok', 0)} / {data.counts.get('failed', 0)}"),
        ("probe time used", _fmt(state_of(c).budget.used_s, " s")),
        ("probe tool asked", c.probe_tool or "auto"),
        ("tools", ", ".join(f"{t} {'/'.join(v)}" for t, v in data.software.get("tools",
                                                                                {}).items())
         or "-"),
        ("kernel", ", ".join(sorted({k.get("release", "?") for k in
                                     data.software.get("kernels", [])})) or "-"),
        ("finished", c.finished_at.strftime("%Y-%m-%d %H:%M UTC") if c.finished_at else "-"),
    ]
    promise = (outputs.get("promise") or {}).get("statement")
    if promise:  # the answer's promise first, as the CLI and the dashboard say it
        fig.text(0.02, 0.875, _wrap(promise, 150), fontsize=10, va="top", style="italic")
    _table(fig.add_axes((0.02, 0.36, 0.46, 0.45)), "Answer", answer_rows)
    _table(fig.add_axes((0.52, 0.36, 0.46, 0.45)), "Settings", settings_rows)
    _promise(fig.add_axes((0.08, 0.07, 0.86, 0.2)), data)
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _table(ax, title: str, rows: list[tuple[str, str]]) -> None:
    ax.axis("off")
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    table = ax.table(cellText=[[k, v] for k, v in rows], colWidths=[0.38, 0.62], loc="upper left",
                     cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8.5)
    cells = table.get_celld()
    for (row, col), cell in cells.items():
        cell.set_edgecolor("#cccccc")
        lines = max(cells[(row, c)].get_text().get_text().count("\n") + 1 for c in (0, 1))
        cell.set_height(0.075 * lines)  # both cells of a row as tall as its longest
        if col == 0:
            cell.set_facecolor("#f2f2f2")


def _promise(ax, data: ReportData) -> None:
    s = data.solved.solution
    promise = ((data.answer.outputs or {}).get("promise") if data.answer else None) or {}
    ax.set_title("The promise for the recommended configuration, and what its probes measured",
                 loc="left", fontsize=10)
    ax.set_xlabel("goodput (Mbit/s)")
    ax.set_yticks([])
    if s is None:
        ax.text(0.5, 0.5, "no answer", ha="center", va="center", transform=ax.transAxes)
        return
    ax.axvspan(s.target_mbps, s.tp_max_mbps, color="tab:green", alpha=0.12,
               label=f"δ band: target {s.target_mbps:.3g} to T* {s.tp_max_mbps:.3g}")
    ax.axvline(s.otp_mbps, color="tab:blue", lw=1.5, label=f"OTP {s.otp_mbps:.3g}")
    low, high = promise.get("low_mbps"), promise.get("high_mbps")
    if low is not None and high is not None:
        ax.errorbar([(low + high) / 2], [0.45], xerr=[[(high - low) / 2], [(high - low) / 2]],
                    fmt="none", ecolor="tab:purple", elinewidth=6, alpha=0.6,
                    label=f"promise ({promise.get('of') or 'a fresh probe'}): "
                    f"{low:.3g}-{high:.3g}")
    for k, phase in enumerate((MeasurementPhase.SWEEP, "warm")):
        xs = [v for p, v in data.fresh if p == phase]
        if xs:
            ax.plot(xs, [0.2 + 0.1 * k] * len(xs), "o", color=COLORS[3 + k], alpha=0.8,
                    label=f"{'warm-check' if phase == MeasurementPhase.WARM else 'sweep'} "
                    "probes at "
                    f"{s.opm}/{s.occ}, {s.obs_mib:.3g} MiB (n={len(xs)})")
    ax.set_ylim(0, 1)
    values = [s.target_mbps, s.tp_max_mbps, s.otp_mbps, *(v for _, v in data.fresh)]
    values += [v for v in (low, high) if v is not None]
    span = max(values) - min(values) or max(values) * 0.1 or 1.0
    ax.set_xlim(min(values) - 0.15 * span, max(values) + 0.15 * span)
    ax.legend(loc="upper left", fontsize=8, ncol=2, framealpha=0.9)


# --- page 2: Omega -------------------------------------------------------------------------------
def _omega_page(data: ReportData) -> Figure:
    fig = _page(data, "Ω per subflow and congestion control (mean over impact runs, Student-t "
                "interval; SP* members filled, others hollow)")
    ax = fig.add_axes((0.07, 0.12, 0.9, 0.72))
    ccs = list(data.omegas)
    if not ccs:
        ax.text(0.5, 0.5, "no impact factors stored", ha="center", transform=ax.transAxes)
        return fig
    width = 0.8 / len(ccs)
    bars = figures.omega_bars(data.omegas, data.subflows)
    order = list(dict.fromkeys(b.subflow for b in bars))
    labelled: set[str] = set()
    for bar in bars:
        k, j = ccs.index(bar.cc), order.index(bar.subflow)
        w, lo, hi = bar.omega, bar.low, bar.high
        x = j - 0.4 + width * (k + 0.5)
        ax.bar(x, w, width * 0.9, color=COLORS[k % 10] if bar.in_subset else "white",
               edgecolor=COLORS[k % 10], linewidth=1.5,
               label=None if bar.cc in labelled else bar.cc)
        labelled.add(bar.cc)
        if lo is not None and hi is not None:
            ax.errorbar(x, w, yerr=[[w - lo], [hi - w]], fmt="none", ecolor="black",
                        capsize=3, lw=1)
    ax.axhline(0, color="black", lw=0.8)
    spec = figures.omega_figure([b.omega for b in bars])
    apply_axes(ax, spec)
    if spec.y.scale == "symlog":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xticks(range(len(order)), order)
    ax.legend(title="CC", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig


# --- page 3: the selection path ------------------------------------------------------------------
def _selection_page(data: ReportData) -> Figure:
    fig = _page(data, "The measured subflow selection: each step's subset, its goodput (a "
                "stream's: p99 frame delay) and interval; the chosen SP* per CC")
    ccs = {} if data.selection is None else data.selection.ccs
    if not ccs:
        ax = fig.add_axes((0.05, 0.1, 0.9, 0.75))
        ax.axis("off")
        ax.text(0.5, 0.5, "No measured selection in this campaign: SP* is Ω's subset "
                "(the paper's procedure, page 2).", ha="center", va="center", fontsize=11)
        return fig
    n = len(ccs)
    for k, (cc, entry) in enumerate(ccs.items()):
        ax = fig.add_axes((0.07, 0.1 + (n - 1 - k) * 0.78 / n, 0.9, 0.78 / n - 0.07))
        path = entry.path
        # a stream's selection weighed p99 frame delay (phases.selection_stream): plot that
        by_delay = entry.metric == "p99_frame_delay"
        xs, labels = range(len(path)), []
        for j, step in enumerate(path):
            e = step.estimate
            subset = step.label or "+".join(step.subset)
            carried = "" if not by_delay or (e is not None and e.carries) else "\n(not carried)"
            labels.append(f"{step.decision}\n{subset}{carried}")
            mean, lo, hi = _plotted(e, by_delay)
            if mean is None:
                continue
            yerr = [[mean - lo], [hi - mean]] if lo is not None and hi is not None else None
            ax.errorbar(j, mean, yerr=yerr, fmt="o" if step.settled else "s",
                        color=COLORS[k % 10], capsize=4, mfc="white" if not step.settled
                        else COLORS[k % 10])
        ax.set_xticks(list(xs), labels, fontsize=7.5)
        ax.set_xlim(-0.5, max(len(path), 5) - 0.5)  # a short path stays readable, not spread
        ax.set_ylabel(f"{cc}\n" + ("p99 frame delay (ms)" if by_delay else "goodput (Mbit/s)"))
        ax.grid(alpha=0.3)
        chosen = entry.label or "+".join(entry.subset)
        ax.set_title(f"{cc}: SP* = {chosen}; {'settled' if entry.settled else 'not settled'}"
                     f"{'; ' + entry.reason if entry.reason else ''}", loc="left",
                     fontsize=9)
    return fig


def _plotted(e: SubsetEstimate | None, by_delay: bool):
    """A step's plotted value and interval: p99 frame delay (ms) or goodput (Mbit/s)."""
    if e is None:
        return None, None, None
    return ((e.p99_ms, e.p99_low_ms, e.p99_high_ms) if by_delay
            else (e.mean_mbps, e.low_mbps, e.high_mbps))


# --- page 4: the fits ----------------------------------------------------------------------------
def _fits_page(data: ReportData) -> Figure:
    fig = _page(data, "Every arm: measured means (points), fitted curve (line), the δ band under "
                "T*, OBS and Eq. 1's B")
    s = data.solved.solution
    pms = sorted({pm for pm, _ in data.points} | {c.pm for c in data.fitted}) or ["PCDC"]
    ccs = sorted({cc for _, cc in data.points} | {c.cc for c in data.fitted})
    color = {cc: COLORS[k % 10] for k, cc in enumerate(ccs)}
    eq1 = (data.answer.traditional or {}) if data.answer else {}
    b = eq1.get("buffer_mib") or eq1.get("fallback_mib")
    all_bs = [bs for pts in data.points.values() for bs, _ in pts]
    lo = min(all_bs, default=data.solved.lo or 0.1)
    hi = max(all_bs, default=data.solved.hi or 1.0)
    axes = fig.subplots(1, len(pms), sharey=True, squeeze=False)[0]
    fig.subplots_adjust(left=0.07, right=0.98, top=0.84, bottom=0.12, wspace=0.06)
    for ax, pm in zip(axes, pms, strict=True):
        if s is not None:
            ax.axhspan(s.target_mbps, s.tp_max_mbps, color="tab:green", alpha=0.12,
                       label=f"δ = {s.delta:g} band")
            ax.axhline(s.tp_max_mbps, color="tab:green", lw=1)
            if s.tp_max_pm == pm:
                ax.plot([s.tp_max_bs_mib], [s.tp_max_mbps], "*", ms=14, color="gold",
                        mec="black", label=f"T* {s.tp_max_mbps:.3g} Mbit/s", zorder=5)
            if s.opm == pm:
                ax.axvline(s.obs_mib, color="tab:blue", ls="--", lw=1.5,
                           label=f"OBS {s.obs_mib:.3g} MiB ({s.occ})")
        if b:
            ax.axvline(b, color="tab:red", ls=":", lw=1.5, label=f"Eq. 1 B {b:.3g} MiB")
        for cc in ccs:
            pts = sorted(data.points.get((pm, cc), []))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", ms=4, alpha=0.55,
                        color=color[cc])
            curve = next((c for c in data.fitted if (c.pm, c.cc) == (pm, cc)), None)
            if curve is not None and hi > lo:
                xs = figures.fit_curve_xs(lo, hi, 199)
                ax.plot(xs, [curve.tp(x) for x in xs], "-", color=color[cc], lw=1.6,
                        label=f"{cc} ({curve.kind})")
            elif pts:
                ax.plot([], [], "o", color=color[cc], label=cc)
        apply_axes(ax, figures.FITS)
        # ticks at the measured buffers, not log decades that crowd a short range
        ax.set_xticks(sorted(set(all_bs)) or [lo, hi])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        ax.set_title(pm, fontsize=11)
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7.5, loc="upper left", framealpha=0.9)
        else:
            ax.text(0.5, 0.5, "nothing measured", ha="center", transform=ax.transAxes)
    for ax in axes[1:]:  # the shared y axis is labelled once
        ax.set_ylabel("")
    return fig
