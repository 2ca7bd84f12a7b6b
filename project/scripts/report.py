"""Summarise the project's evaluations: a Markdown table (mean ± std over seeds, relative error
reduction against the CNN baseline), the paper's claim cell by cell (each ELMo system's gain over
each baseline on NER F1 and LAS per training fraction, and whether it is larger with less data),
each system's gain over each baseline ((a), and (b) where it was run) against twice the std over
seeds, the learned ELMo layer weights, what the runs started from, and PNG plots of score against
training-set fraction and of the layer weights.

Reads every `METRICS_DIR/{task}__{system}__{fraction}__seed{seed}.json` written by
`spacy evaluate ... --output`, e.g. `ner__elmo__1.0__seed0.json`, and the `.mix.json` and
`.run.json` files `grid.py` writes beside it.

    python scripts/report.py metrics/ metrics/report.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from grid import SYSTEMS as GRID_SYSTEMS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SCORES = {"ner": [("ents_f", "NER F1")], "parser": [("dep_las", "LAS"), ("dep_uas", "UAS")]}
SYSTEMS = {key: system.label for key, system in GRID_SYSTEMS.items()}
BASELINE = "cnn"
# The systems the others must beat, in SYSTEMS order: each is weighed against the systems after it.
BASELINES = (BASELINE, "cnn_pretrain")
# The scores the paper's claim is about: (task, score key, label).
CLAIM_SCORES = [("ner", "ents_f", "NER F1"), ("parser", "dep_las", "LAS")]


def run_files(metrics_dir: Path, suffix: str) -> list[tuple[str, str, float, Path]]:
    """(task, system, fraction, path) of every `{task}__{system}__{fraction}__seed{seed}{suffix}`;
    suffix ".json" is the scores, ".mix.json" and ".run.json" the files beside them."""
    found = []
    for path in sorted(metrics_dir.glob(f"*__*__*__seed*{suffix}")):
        task, system, fraction, seed = path.name.removesuffix(suffix).split("__")
        if seed.removeprefix("seed").isdigit():
            found.append((task, system, float(fraction), path))
    return found


def collect(metrics_dir: Path, suffix: str = ".json") -> dict[tuple[str, str, str, float], list[float]]:
    """(task, score key, system, fraction) -> the score (0-100) of every seed; suffix ".json" for
    the EWT test scores, ".ood.json" for the out-of-domain ones."""
    runs: dict[tuple[str, str, str, float], list[float]] = defaultdict(list)
    for task, system, fraction, path in run_files(metrics_dir, suffix):
        results = json.loads(path.read_text())
        for key, _ in SCORES.get(task, []):
            if results.get(key) is not None:
                runs[(task, key, system, fraction)].append(100 * results[key])
    return runs


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def markdown_table(runs: dict[tuple[str, str, str, float], list[float]], test_set: str = "EWT test") -> str:
    lines = []
    for task, scores in SCORES.items():
        for key, label in scores:
            cells = {
                (system, fraction): values
                for (t, k, system, fraction), values in runs.items()
                if (t, k) == (task, key)
            }
            if not cells:
                continue
            fractions = sorted({fraction for _, fraction in cells})
            lines += [f"### {label} ({task}, {test_set})", ""]
            lines.append("| system | " + " | ".join(f"{f:.0%} of train" for f in fractions) + " |")
            lines.append("|---" * (len(fractions) + 1) + "|")
            for system, name in SYSTEMS.items():
                row = []
                for fraction in fractions:
                    values = cells.get((system, fraction))
                    if not values:
                        row.append("–")
                        continue
                    mean, std = mean_std(values)
                    cell = f"{mean:.2f} ± {std:.2f} (n={len(values)})"
                    baseline = cells.get((BASELINE, fraction))
                    if system != BASELINE and baseline:
                        base_error = 100 - mean_std(baseline)[0]
                        cell += f", RER {(base_error - (100 - mean)) / base_error:+.1%}"
                    row.append(cell)
                if any(cell != "–" for cell in row):
                    lines.append(f"| {name} | " + " | ".join(row) + " |")
            lines.append("")
    lines.append("RER: relative error reduction against (a) at the same training fraction.")
    return "\n".join(lines) + "\n"


def gains_table(runs: dict[tuple[str, str, str, float], list[float]]) -> str:
    """Each system against each baseline listed before it, at each training fraction: the
    difference of their mean scores, and whether it exceeds twice the larger of the two standard
    deviations over seeds. Empty when no system has a baseline to be weighed against."""
    rows = []
    for task, scores in SCORES.items():
        for key, label in scores:
            for fraction in sorted({f for t, k, _, f in runs if (t, k) == (task, key)}):
                for baseline in BASELINES:
                    rows += _gain_rows(runs, task, key, label, fraction, baseline)
    if not rows:
        return ""
    lines = [
        "### Gain over the baselines: difference of means against twice the larger std over seeds",
        "",
        "| score | train | system | over | gain | 2 × std | gain > 2 × std |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + rows) + "\n"


class Gain(NamedTuple):
    """A system's mean score minus a baseline's, and the bar it must clear: twice the larger of
    the two standard deviations over seeds (None where either has one seed)."""

    gain: float
    bar: float | None

    @property
    def clears(self) -> bool:
        return self.bar is not None and self.gain > self.bar


def gain_over(
    runs: dict[tuple[str, str, str, float], list[float]],
    task: str,
    key: str,
    system: str,
    baseline: str,
    fraction: float,
) -> Gain | None:
    """`system`'s gain over `baseline` at one training fraction; None unless both were run."""
    values = runs.get((task, key, system, fraction))
    baseline_values = runs.get((task, key, baseline, fraction))
    if not values or not baseline_values:
        return None
    (mean, std), (baseline_mean, baseline_std) = mean_std(values), mean_std(baseline_values)
    one_seed = min(len(values), len(baseline_values)) < 2
    return Gain(mean - baseline_mean, None if one_seed else 2 * max(std, baseline_std))


def _gain_rows(
    runs: dict[tuple[str, str, str, float], list[float]],
    task: str,
    key: str,
    label: str,
    fraction: float,
    baseline: str,
) -> list[str]:
    """The gain rows of every system listed after `baseline` in SYSTEMS; none if it was not run."""
    rows = []
    over = _letter(baseline)
    systems = list(SYSTEMS)
    for system in systems[systems.index(baseline) + 1 :]:
        found = gain_over(runs, task, key, system, baseline, fraction)
        if found is None:
            continue
        bar, verdict = (
            ("–", "n/a (one seed)")
            if found.bar is None
            else (f"{found.bar:.2f}", "yes" if found.clears else "no")
        )
        cells = [label, f"{fraction:.0%}", SYSTEMS[system], over, f"{found.gain:+.2f}", bar, verdict]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def claim_table(runs: dict[tuple[str, str, str, float], list[float]]) -> str:
    """The paper's claim, cell by cell: each ELMo system against each baseline on NER F1 and LAS
    at each training fraction, the gain in bold where it clears its bar, and per score whether
    the gain with the least data is larger than with all of it. Empty without an ELMo system and
    a baseline."""
    fractions = {
        (task, key): sorted({f for t, k, _, f in runs if (t, k) == (task, key)})
        for task, key, _ in CLAIM_SCORES
    }
    scores = [(task, key, label) for task, key, label in CLAIM_SCORES if fractions[(task, key)]]
    header = [f"{label}, {f:.0%}" for task, key, label in scores for f in fractions[(task, key)]]
    header += [f"{label}: larger with less data?" for _, _, label in scores]
    rows = []
    for system in [name for name, grid_system in GRID_SYSTEMS.items() if grid_system.uses_elmo]:
        for baseline in BASELINES:
            gains = {
                (task, key): {
                    f: gain_over(runs, task, key, system, baseline, f) for f in fractions[(task, key)]
                }
                for task, key, _ in scores
            }
            if not any(found for by_fraction in gains.values() for found in by_fraction.values()):
                continue
            cells = [_claim_cell(found) for by_fraction in gains.values() for found in by_fraction.values()]
            cells += [_less_data_cell(by_fraction) for by_fraction in gains.values()]
            rows.append(f"| {SYSTEMS[system]} over {_letter(baseline)} | " + " | ".join(cells) + " |")
    if not rows:
        return ""
    lines = [
        "### The paper's claim: each ELMo system's gain over each baseline",
        "",
        "| system | " + " | ".join(header) + " |",
        "|---" * (len(header) + 1) + "|",
        *rows,
        "",
        "Each cell: the difference of means (2 × the larger std over seeds), in bold where it is",
        "larger; one seed gives no bar. Last columns: whether the gain with the smallest fraction run",
        "is larger than with all the data.",
    ]
    return "\n".join(lines) + "\n"


def out_of_domain_table(
    runs: dict[tuple[str, str, str, float], list[float]],
    ood_runs: dict[tuple[str, str, str, float], list[float]],
) -> str:
    """Each system's gain over each baseline on the out-of-domain test sets next to its gain on EWT
    test, both with the claim table's bar rule, and whether it is larger out of domain. Empty
    without out-of-domain scores."""
    rows = []
    for task, key, label in CLAIM_SCORES:
        for fraction in sorted({f for t, k, _, f in ood_runs if (t, k) == (task, key)}):
            for baseline in BASELINES:
                systems = list(SYSTEMS)
                for system in systems[systems.index(baseline) + 1 :]:
                    outside = gain_over(ood_runs, task, key, system, baseline, fraction)
                    inside = gain_over(runs, task, key, system, baseline, fraction)
                    if outside is None:
                        continue
                    larger = "–" if inside is None else ("yes" if outside.gain > inside.gain else "no")
                    cells = [label, f"{fraction:.0%}", SYSTEMS[system], _letter(baseline)]
                    cells += [_claim_cell(outside), _claim_cell(inside), larger]
                    rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return ""
    lines = [
        "### Out of domain: gains on the PUD test sets against gains on EWT test",
        "",
        "| score | train | system | over | gain out of domain | gain on EWT test | larger out of domain? |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "NER is scored on UNER English-PUD, parsing on UD English-PUD (news and Wikipedia; models",
        "trained on EWT's web text). Each gain: difference of means (2 × the larger std over seeds),",
        "bold where it is larger; one seed gives no bar.",
    ]
    return "\n".join(lines) + "\n"


def plot_domains(
    runs: dict[tuple[str, str, str, float], list[float]],
    ood_runs: dict[tuple[str, str, str, float], list[float]],
    output_dir: Path,
) -> Path | None:
    """`in_vs_out_of_domain.png`: each system's mean score on EWT test against its mean score out
    of domain, one panel per claim score, a point per training fraction; None without both."""
    panels = [
        (task, key, label)
        for task, key, label in CLAIM_SCORES
        if any(cell[:2] == (task, key) and cell in runs for cell in ood_runs)
    ]
    if not panels:
        return None
    plt = pyplot()
    figure, all_axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.5), squeeze=False)
    for axes, (task, key, label) in zip(all_axes[0], panels):
        for system in SYSTEMS:
            points = [
                (mean_std(runs[cell])[0], mean_std(values)[0])
                for cell, values in ood_runs.items()
                if cell[:3] == (task, key, system) and cell in runs
            ]
            if points:
                axes.scatter(*zip(*points), color=_system_colour(system), label=SYSTEMS[system])
        low, high = axes.get_xlim()
        axes.plot([low, high], [low, high], color="grey", linewidth=0.8, linestyle=":", label="same score")
        axes.set(xlabel=f"{label} on EWT test", ylabel=f"{label} out of domain (PUD)", title=label)
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    figure.tight_layout()
    path = output_dir / "in_vs_out_of_domain.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _claim_cell(found: Gain | None) -> str:
    """One gain as the claim table shows it: `+1.23 (0.45)`, the gain and its bar, bold where the
    gain clears the bar; `(one seed)` where there is no bar; `–` where a run is missing."""
    if found is None:
        return "–"
    if found.bar is None:
        return f"{found.gain:+.2f} (one seed)"
    # Three decimals where two would show a gain equal to its bar.
    digits = 3 if f"{found.gain:.2f}" == f"{found.bar:.2f}" else 2
    gain = f"{found.gain:+.{digits}f}"
    return f"{f'**{gain}**' if found.clears else gain} ({found.bar:.{digits}f})"


def _less_data_cell(by_fraction: dict[float, Gain | None]) -> str:
    """`yes` where the gain with the smallest fraction run is larger than with all the data, else
    `no`; `(one seed)` added where either has no bar; `–` without two fractions to compare."""
    run = {fraction: found for fraction, found in by_fraction.items() if found is not None}
    least = min(run, default=1.0)
    if least == 1.0 or 1.0 not in run:
        return "–"
    verdict = "yes" if run[least].gain > run[1.0].gain else "no"
    return verdict if run[least].bar is not None and run[1.0].bar is not None else f"{verdict} (one seed)"


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend, or a clear exit saying how to get it."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("The report's plots need matplotlib: pip install 'spacy-elmo[plots]'.") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def plot_scores(runs: dict[tuple[str, str, str, float], list[float]], output_dir: Path) -> list[Path]:
    """One PNG per score, each system in the same colour in every plot: mean ± std against the
    training-set fraction, one line per system (`{task}_{key}_by_fraction.png`), or, where every
    run used one fraction, one bar per system (`{task}_{key}_by_system.png`)."""
    plt = pyplot()

    written = []
    for task, scores in SCORES.items():
        for key, label in scores:
            points = {
                system: sorted(
                    (f, mean_std(v)) for (t, k, s, f), v in runs.items() if (t, k, s) == (task, key, system)
                )
                for system in SYSTEMS
            }
            points = {system: rows for system, rows in points.items() if rows}
            if not points:
                continue
            fractions = {fraction for rows in points.values() for fraction, _ in rows}
            figure, axes = plt.subplots(figsize=(6, 4))
            if len(fractions) == 1:
                _bars_by_system(axes, points)
                axes.set(ylabel=label, title=f"{label} on EWT test, {100 * fractions.pop():g}% of train")
                path = output_dir / f"{task}_{key}_by_system.png"
            else:
                _lines_by_fraction(axes, points)
                axes.set(xlabel="% of EWT training sentences", ylabel=label, title=f"{label} on EWT test")
                axes.legend()
                path = output_dir / f"{task}_{key}_by_fraction.png"
            axes.grid(alpha=0.3)
            figure.tight_layout()
            figure.savefig(path, dpi=120)
            plt.close(figure)
            written.append(path)
    return written


def _letter(system: str) -> str:
    """A system's short name, the start of its label: "(a)", "(b)", ..."""
    return SYSTEMS[system].split(" ", 1)[0]


def _system_colour(system: str) -> str:
    """A system's colour, fixed by its place in SYSTEMS, so that plots with different systems agree."""
    return f"C{list(SYSTEMS).index(system)}"


def _lines_by_fraction(axes: Axes, points: dict[str, list[tuple[float, tuple[float, float]]]]) -> None:
    for system, rows in points.items():
        axes.errorbar(
            [100 * f for f, _ in rows],
            [m for _, (m, _) in rows],
            yerr=[s for _, (_, s) in rows],
            marker="o",
            capsize=3,
            color=_system_colour(system),
            label=SYSTEMS[system],
        )


def _bars_by_system(axes: Axes, points: dict[str, list[tuple[float, tuple[float, float]]]]) -> None:
    bars = {system: rows[0][1] for system, rows in points.items()}  # (mean, std) at the one fraction
    means = [mean for mean, _ in bars.values()]
    for position, (system, (mean, std)) in enumerate(bars.items()):
        axes.bar(
            position,
            mean,
            yerr=std,
            capsize=4,
            color=_system_colour(system),
            label=SYSTEMS[system],
        )
    axes.set_xticks(range(len(points)), [_letter(system) for system in points])
    # The bars start just under the lowest mean, so that differences of a point or two show.
    spread = max(means) - min(means)
    bottom = min(means) - max(spread, 1.0)
    highest = max(mean + std for mean, std in bars.values())
    axes.set_ylim(bottom=bottom, top=highest + 0.1 * (highest - bottom))
    # Under the axes, where no bar can reach it.
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)


class Mix(TypedDict):
    """One trained component's scalar mix, as `grid.py` writes it."""

    weights: list[float]  # softmax-normalised, one per biLM layer
    gamma: float


def collect_mixes(metrics_dir: Path) -> dict[tuple[str, str, float], list[Mix]]:
    """(task, system, fraction) -> every seed's scalar mix, from the `*.mix.json` files."""
    mixes: dict[tuple[str, str, float], list[Mix]] = defaultdict(list)
    for task, system, fraction, path in run_files(metrics_dir, ".mix.json"):
        mixes[(task, system, fraction)] += json.loads(path.read_text()).values()
    return mixes


def mix_table(mixes: dict[tuple[str, str, float], list[Mix]]) -> str:
    """The learned softmax-normalised layer weights and gamma, mean over seeds, per task, ELMo
    system and training fraction; empty when no run had a mix."""
    if not mixes:
        return ""
    n_layers = max(len(mix["weights"]) for rows in mixes.values() for mix in rows)
    layers = ["token"] + [f"LSTM {i}" for i in range(1, n_layers)]
    lines = [
        "### Learned ELMo layer weights (softmax-normalised; mean over seeds)",
        "",
        "| task | system | train | " + " | ".join(layers) + " | gamma | n |",
        "|---" * (len(layers) + 5) + "|",
    ]
    order = {system: index for index, system in enumerate(SYSTEMS)}
    for task, system, fraction in sorted(
        mixes, key=lambda cell: (cell[0], order.get(cell[1], len(order)), cell[2])
    ):
        rows = mixes[(task, system, fraction)]
        weights = [f"{statistics.fmean(column):.2f}" for column in zip(*(mix["weights"] for mix in rows))]
        gamma = statistics.fmean(mix["gamma"] for mix in rows)
        name = SYSTEMS.get(system, system)
        lines.append(
            f"| {task} | {name} | {fraction:.0%} | " + " | ".join(weights) + f" | {gamma:.2f} | {len(rows)} |"
        )
    return "\n".join(lines) + "\n"


def plot_mix_weights(mixes: dict[tuple[str, str, float], list[Mix]], output_dir: Path) -> Path | None:
    """The paper's Figure 2: the learned softmax-normalised layer weights, per task and ELMo system,
    averaged over seeds and fractions."""
    weights: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    for (task, system, _), rows in mixes.items():
        weights[(task, system)] += [mix["weights"] for mix in rows]
    if not weights:
        return None
    plt = pyplot()

    figure, axes = plt.subplots(figsize=(7, 4))
    n_bars = len(weights)
    for index, ((task, system), rows) in enumerate(sorted(weights.items())):
        means = [statistics.fmean(column) for column in zip(*rows)]
        positions = [layer + (index - (n_bars - 1) / 2) * 0.8 / n_bars for layer in range(len(means))]
        axes.bar(positions, means, width=0.8 / n_bars, label=f"{task}: {SYSTEMS.get(system, system)}")
    n_layers = max(len(rows[0]) for rows in weights.values())
    axes.set_xticks(range(n_layers), ["token (char CNN)"] + [f"LSTM {i}" for i in range(1, n_layers)])
    axes.set(ylabel="softmax-normalised weight", title="Learned ELMo layer weights per task")
    axes.axhline(1 / n_layers, color="grey", linestyle=":", linewidth=1)
    axes.legend(fontsize=8)
    path = output_dir / "mix_weights.png"
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def provenance_table(metrics_dir: Path) -> str:
    """Per system: how many runs were scored, and what their `.run.json` records say they started
    from (biLM, `spacy pretrain` weights, each with the start of its sha256), how many steps they
    trained, on which CPUs and for how long. Runs without a record (older grids) are counted as
    such; the joint pipeline's run, scored for both tasks, counts once."""
    runs: dict[str, dict[str, Path]] = defaultdict(dict)
    for _, system, _, path in run_files(metrics_dir, ".json"):
        joint = system in GRID_SYSTEMS and "joint" in GRID_SYSTEMS[system].configs
        runs[system].setdefault(path.name.split("__", 1)[1] if joint else path.name, path)
    lines = [
        "### What the runs started from (`grid.py`'s `.run.json` records)",
        "",
        "| system | runs | recorded | biLM | `spacy pretrain` weights | max steps | CPU | training minutes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {system: index for index, system in enumerate(SYSTEMS)}
    for system in sorted(runs, key=lambda name: order.get(name, len(order))):
        records = [
            json.loads(record.read_text())
            for path in runs[system].values()
            if (record := path.with_name(path.name.removesuffix(".json") + ".run.json")).exists()
        ]
        minutes = [record["minutes"] for record in records]
        cells = [
            _distinct(records, "bilm"),
            _distinct(records, "pretrained_tok2vec"),
            ", ".join(sorted({str(record["max_steps"]) for record in records})) or "–",
            "; ".join(sorted({record["cpu"] for record in records if "cpu" in record})) or "–",
            f"{min(minutes):.1f}–{max(minutes):.1f}" if minutes else "–",
        ]
        name = SYSTEMS.get(system, system)
        lines.append(f"| {name} | {len(runs[system])} | {len(records)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _distinct(records: list[dict], key: str) -> str:
    """The distinct weights the records name under `key`: path and the start of the sha256."""
    weights = sorted(
        {(record[key]["path"], record[key]["sha256"][:12]) for record in records if key in record}
    )
    return "; ".join(f"`{path}` ({sha256})" for path, sha256 in weights) or "–"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("metrics_dir", type=Path)
    parser.add_argument("report", type=Path)
    args = parser.parse_args()
    runs = collect(args.metrics_dir)
    if not runs:
        raise SystemExit(f"No evaluation files like ner__cnn__1.0__seed0.json in {args.metrics_dir}.")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    mixes = collect_mixes(args.metrics_dir)
    ood_runs = collect(args.metrics_dir, ".ood.json")
    sections = [
        markdown_table(runs),
        claim_table(runs),
        gains_table(runs),
        markdown_table(ood_runs, "out of domain: UNER / UD English-PUD") if ood_runs else "",
        out_of_domain_table(runs, ood_runs),
        mix_table(mixes),
        provenance_table(args.metrics_dir),
    ]
    args.report.write_text("# spacy-elmo on English EWT\n\n" + "\n".join(filter(None, sections)))
    extra_plots = [
        plot_mix_weights(mixes, args.report.parent),
        plot_domains(runs, ood_runs, args.report.parent),
    ]
    for path in plot_scores(runs, args.report.parent) + [plot for plot in extra_plots if plot]:
        print(f"Wrote {path}")
    print(f"Wrote {args.report}")


if __name__ == "__main__":
    main()
