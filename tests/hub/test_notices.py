"""THIRD_PARTY_NOTICES.md has a row for every model of the catalogue, each saying what its source
states about a licence (or that it states none, or that it was not verified)."""

from __future__ import annotations

import re

from spacy_elmo.hub import PUBLISHED_MODELS
from spacy_elmo.hub.catalog import ELMOFORMANYLANGS_MODELS

from ..conftest import REPO_ROOT

EFML_ROW = "`efml-<code>`"


def model_rows() -> dict[str, str]:
    """The table of published biLMs: each name of its first column -> that row's last column."""
    text = (REPO_ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf8")
    section = text.split("\n## The published biLMs\n", 1)[1]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or set(cells[0]) <= {"-"} or cells[0] == "names":
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        for name in names or [cells[0]]:
            rows[f"`{name}`" if name == "efml-<code>" else name] = cells[2]
    return rows


def test_every_catalogue_model_has_a_row_saying_what_its_source_states():
    rows = model_rows()
    efml_names = {name for name, *_ in ELMOFORMANYLANGS_MODELS}
    for name in PUBLISHED_MODELS:
        statement = rows.get(EFML_ROW if name in efml_names else name)
        assert statement, f"{name} has no row in THIRD_PARTY_NOTICES.md"
        assert re.search(r"licen[cs]e|not verified|BSD|MIT|Apache", statement), (name, statement)
    assert set(rows) - {EFML_ROW} <= set(PUBLISHED_MODELS), "a row names a model the catalogue lacks"


def test_the_notices_count_and_name_the_elmoformanylangs_models_as_the_catalogue_does():
    rows = model_rows()
    text = (REPO_ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf8")
    assert f"the {len(ELMOFORMANYLANGS_MODELS)} `efml-<code>` models" in text
    assert "Gigaword" in rows["efml-zhs"] and "LDC" in rows["efml-zhs"]
    assert "BSD-2-Clause" in rows["de"]
    assert "AllenNLP's terms" not in text  # a page that states no terms is not cited for them
