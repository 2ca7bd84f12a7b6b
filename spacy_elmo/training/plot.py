"""The perplexity curves of a run as a PNG (matplotlib, an optional extra: `spacy-elmo[plots]`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..bilm.io.atomic import atomic_path

logger = logging.getLogger(__name__)


def plot_perplexity(history: list[dict[str, Any]], path: Path) -> None:
    """Training and dev perplexity against tokens seen, from the metrics records of a run.

    Without matplotlib the plot is skipped with a warning that says how to install it: a
    finished run is never lost to a missing plotting library.
    """
    try:
        import matplotlib
    except ImportError:
        logger.warning(
            "Skipped the plot %s: it needs matplotlib. Install it with pip install 'spacy-elmo[plots]'.",
            path,
        )
        return

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for key, label in (("train_perplexity", "training"), ("dev_perplexity", "dev")):
        points = [(record["tokens"], record[key]) for record in history if record.get(key) is not None]
        if points:
            axes.plot(*zip(*points), marker="o", markersize=3, label=label)
    axes.set_xlabel("training tokens")
    axes.set_ylabel("perplexity (geometric mean of both directions)")
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", dpi=120)
    pyplot.close(figure)
