"""Embed or annotate a corpus on a Ray cluster: `ElmoMapper` for `Dataset.map_batches`.

```python
import ray
from spacy_elmo.ray_data import ElmoMapper

ds = ray.data.read_json("corpus.jsonl", lines=True)  # columns: id, text
ds = ds.map_batches(ElmoMapper, fn_constructor_kwargs={"model": "en_elmo_cpu", "layers": "average"},
                    batch_size=64, num_cpus=1, compute=ray.data.ActorPoolStrategy(size=4))
ds.write_parquet("vectors/")
```

Ray does the scheduling, retries and recovery from lost workers and nodes; each actor loads its
pipeline once and runs the `elmo` component (and, with `pipeline`, every other component) on its
batches, so the vectors equal `nlp.pipe` in one process. Needs `pip install "spacy-elmo[ray]"`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

try:
    import pyarrow as pa
    import ray
    from ray.data.block import BlockAccessor
except ImportError as error:
    raise ImportError(
        f'spacy_elmo.ray_data needs Ray Data ({error.name} is missing): pip install "spacy-elmo[ray]"'
    ) from error

from ...bilm.errors import ConfigError, InputError
from ..annotator import Annotator
from ..arrow import annotated_table


class ElmoMapper:
    """A callable class for `Dataset.map_batches`: rows with `text` (or `tokens`) in, rows with
    `tokens` and `vectors` (and a pipeline's `ents`, `heads`, `deps`) out; every other input
    column, `id` included, is passed through.

    model (Optional[str]): embed with this biLM: a model directory, `en_elmo_cpu`, a published
        name, an ELMoForManyLangs directory, or an AllenNLP options file with `weights`. `text`
        is split on whitespace, as `spacy-elmo embed` reads its lines.
    pipeline (Optional[str]): annotate with this trained pipeline (directory or installed
        package), every component on; `text` is tokenised by the pipeline's language.
    weights (Optional[str]): AllenNLP HDF5 weights, with an options file as `model`.
    layers (Optional[str]): the `vectors` column: "all" (L + 1, n, D), "top" or "average"
        (n, D), "mix" (the component's scalar mix, `token._.elmo`), or "none" (no vectors).
        Default: "average" with `model`, "mix" with `pipeline`.
    precision (str): with `model`, how the biLM's products run: "fp32", "bf16", "int8", "auto".
    docbin (bool): add a `docbin` column: each row's Doc as `DocBin` bytes, `doc._.elmo` kept.

    An actor with CPUs gives torch as many threads; an actor with a GPU runs on it (needs cupy).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        pipeline: str | Path | None = None,
        *,
        weights: str | Path | None = None,
        layers: str | None = None,
        precision: str = "fp32",
        docbin: bool = False,
    ) -> None:
        if (model is None) == (pipeline is None):
            raise ConfigError("ElmoMapper: give either model (to embed) or pipeline (to annotate), not both.")
        if pipeline is not None and precision != "fp32":
            raise ConfigError(
                f"ElmoMapper: precision={precision!r} steers a biLM given as model=; a pipeline runs at the "
                "precision its elmo component's config says (set components.elmo.precision there)."
            )
        use_assigned_resources()
        if pipeline is not None:
            self.annotator = Annotator.from_pipeline(pipeline, layers=layers or "mix", docbin=docbin)
        else:
            self.annotator = Annotator.from_model(
                model, weights=weights, layers=layers or "average", precision=precision, docbin=docbin
            )

    @classmethod
    def from_annotator(cls, annotator: Annotator) -> ElmoMapper:
        """A mapper around a loaded `Annotator` (for a pipeline loaded with settings of one's own)."""
        mapper = cls.__new__(cls)
        mapper.annotator = annotator
        return mapper

    def __call__(self, batch: pa.Table | dict[str, np.ndarray] | Any) -> pa.Table:
        """A batch in any of Ray's formats (numpy dict, pyarrow, pandas) -> a pyarrow table."""
        return annotated_table(self.annotator, as_arrow_table(batch))


def use_assigned_resources() -> None:
    """Inside a Ray actor: torch uses as many threads as the actor has CPUs (no oversubscription
    when several actors share a machine), and an actor given a GPU runs the pipeline on it."""
    if not ray.is_initialized():
        return
    try:
        resources = ray.get_runtime_context().get_assigned_resources()
    except AssertionError:  # Ray's answer in the driver (a notebook that ran ray.init): no resources
        return
    if resources.get("CPU"):
        import torch

        torch.set_num_threads(max(1, int(resources["CPU"])))
    if resources.get("GPU"):
        import spacy

        spacy.require_gpu()


def as_arrow_table(batch: Any) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, dict):
        check_column_lengths(batch)
    block = BlockAccessor.batch_to_block(batch)
    return block if isinstance(block, pa.Table) else pa.Table.from_pandas(block, preserve_index=False)


def check_column_lengths(batch: dict[str, Any]) -> None:
    """A batch of columns (Ray's numpy format) has one value per row in every column."""
    lengths = {name: len(values) for name, values in batch.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f'"{name}" {length}' for name, length in lengths.items())
        raise InputError(
            f"ElmoMapper: the batch's columns have different lengths ({listed} values): give every "
            "column one value per row."
        )
