"""`ElmoMapper` refuses what it would ignore or misread, in one line, before any batch: a
precision with a pipeline, and a batch whose columns have different lengths (before, pandas'
own message). No cluster: the mapper is called as Ray's actors call it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')

from spacy_elmo.bilm.errors import ConfigError, InputError  # noqa: E402
from spacy_elmo.ray_data import ElmoMapper  # noqa: E402


def test_a_precision_with_a_pipeline_is_refused(pipeline_path):
    with pytest.raises(ConfigError) as raised:
        ElmoMapper(pipeline=pipeline_path, precision="int8")
    assert str(raised.value).startswith(
        "ElmoMapper: precision='int8' steers a biLM given as model=; a pipeline runs at the precision"
    )


def test_columns_of_different_lengths_are_refused_in_one_line(bilm_path):
    mapper = ElmoMapper(model=bilm_path)
    batch = {"id": np.array([1, 2, 3]), "text": np.array(["a b", "c"], dtype=object)}
    with pytest.raises(InputError) as raised:
        mapper(batch)
    assert str(raised.value) == (
        'ElmoMapper: the batch\'s columns have different lengths ("id" 3, "text" 2 values): give every '
        "column one value per row."
    )
    table = mapper({"id": np.array([1, 2]), "text": np.array(["a b", "c"], dtype=object)})
    assert table.column("tokens").to_pylist() == [["a", "b"], ["c"]]
