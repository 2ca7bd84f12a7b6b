"""What `Annotator` refuses, each as one `ElmoError` naming the row, column, setting or file:
nothing is dropped or guessed (issue #63)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import spacy

from spacy_elmo.annotation.annotator import Annotator
from spacy_elmo.annotation.rows import BadRowError
from spacy_elmo.bilm.errors import ConfigError

from ..numerics import assert_within_tolerance
from ..pipeline.conftest import loader_config, saved_tiny_bilm


@pytest.fixture(scope="module")
def bilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_tiny_bilm(tmp_path_factory, "bilm")


@pytest.fixture(scope="module")
def annotator(bilm_dir: Path) -> Annotator:
    return Annotator.from_model(bilm_dir)


@pytest.fixture(scope="module")
def pipeline_dir(bilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    nlp.initialize()
    path = tmp_path_factory.mktemp("pipeline") / "pipeline"
    nlp.to_disk(path)
    return path


def test_fewer_ids_than_rows_is_refused_not_a_shorter_output(annotator: Annotator) -> None:
    with pytest.raises(BadRowError, match='column "id" has 1 values but column "text" has 2: give'):
        annotator.annotate("text", ["x y", "z"], [1])


def test_more_ids_than_rows_is_refused(annotator: Annotator) -> None:
    with pytest.raises(BadRowError, match='column "tokens" has 1 values but column "id" has 2'):
        annotator.annotate("tokens", [["x"]], [1, 2])


def test_an_unknown_source_column_is_an_error_not_text(annotator: Annotator) -> None:
    with pytest.raises(BadRowError, match='source "body": the words of a row come from "text" or "tokens"'):
        annotator.annotate("body", ["x y"], [1])


@pytest.mark.parametrize(
    "source, value, where",
    [("text", "a \ud800 b", 'column "text"'), ("tokens", ["a", "b\udfff"], 'column "tokens"')],
)
def test_a_lone_surrogate_is_named_by_its_row(
    annotator: Annotator, source: str, value: object, where: str
) -> None:
    with pytest.raises(BadRowError, match=f"row id 7: {where} holds a lone surrogate"):
        annotator.annotate(source, ["fine", value] if source == "text" else [["fine"], value], [6, 7])


def test_a_batch_of_text_rows_and_token_rows_reads_each_row_in_its_own_form(annotator: Annotator) -> None:
    columns = {"id": [1, 2, 3], "text": ["x y", None, "z"], "tokens": [None, ["a", "b", "c"], None]}
    output = annotator.annotate_columns(columns)
    assert output["tokens"] == [["x", "y"], ["a", "b", "c"], ["z"]]
    alone = annotator.annotate("tokens", [["a", "b", "c"]], [2])
    assert_within_tolerance(output["vectors"][1], alone["vectors"][0])  # another row count


def test_a_row_with_neither_text_nor_tokens_is_named_by_its_own_id(annotator: Annotator) -> None:
    columns = {"id": [1, 2], "text": ["x y", None], "tokens": [None, None]}
    with pytest.raises(BadRowError, match='row id 2 has neither "text" nor "tokens"'):
        annotator.annotate_columns(columns)


def test_columns_of_different_lengths_are_refused(annotator: Annotator) -> None:
    with pytest.raises(BadRowError, match='column "id" has 1 values but column "text" has 2'):
        annotator.annotate_columns({"id": [1], "text": ["x", "y"]})


@pytest.mark.parametrize("argument", ["model", "weights"])
def test_a_model_that_is_no_path_or_name_is_refused(bilm_dir: Path, argument: str) -> None:
    arguments: dict = {"model": bilm_dir, argument: 123}
    with pytest.raises(ConfigError, match=f"{argument} = 123 \\(int\\): give"):
        Annotator.from_model(**arguments)


def test_a_pipeline_that_is_no_path_or_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="pipeline = 123 \\(int\\): give"):
        Annotator.from_pipeline(123)  # type: ignore[arg-type]


def damaged_copy(pipeline_dir: Path, tmp_path: Path, name: str, content: str) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(pipeline_dir, copy)
    (copy / name).write_text(content, encoding="utf8")
    return copy


@pytest.mark.parametrize("cut", [120, 200])
def test_a_truncated_config_is_one_error_naming_it(pipeline_dir: Path, tmp_path: Path, cut: int) -> None:
    text = (pipeline_dir / "config.cfg").read_text(encoding="utf8")
    damaged = damaged_copy(pipeline_dir, tmp_path, "config.cfg", text[:cut])
    with pytest.raises(
        ConfigError, match=f"Cannot load the pipeline {damaged}: its config.cfg is invalid"
    ) as error:
        Annotator.from_pipeline(damaged)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("content", ['{"lang": "en", ', "[1, 2]"])
def test_a_bad_meta_json_is_one_error_naming_it(pipeline_dir: Path, tmp_path: Path, content: str) -> None:
    damaged = damaged_copy(pipeline_dir, tmp_path, "meta.json", content)
    with pytest.raises(ConfigError, match=f"Cannot load the pipeline {damaged}: its meta.json"):
        Annotator.from_pipeline(damaged)
