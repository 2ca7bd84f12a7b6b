"""THIRD_PARTY_NOTICES.md has a row for every model of the catalogue, each saying what its source
states about a licence (or that it states none, or that it was not verified)."""

from __future__ import annotations

import re

from spacy_elmo.hub import PUBLISHED_MODELS, UNSUPPORTED_MODELS
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


def test_the_notices_cite_what_the_maintainers_answered_about_the_models():
    rows = model_rows()
    for name in ("small", "medium", "original", "original-5.5b"):
        assert "https://github.com/allenai/allennlp/issues/1462" in rows[name]
        assert "We don't impose any restrictions on our models." in rows[name]
    efml = rows[EFML_ROW]
    assert "https://github.com/HIT-SCIR/ELMoForManyLangs/issues/64" in efml and "It's under MIT." in efml
    assert "2020-05-12" in efml and "with the code's packaging" not in efml
    assert "issues/64" in rows["efml-zhs"]


def test_the_sources_say_which_page_links_which_model():
    assert "Basque row" in PUBLISHED_MODELS["eu"].source
    assert "does not list it" in PUBLISHED_MODELS["ta"].source
    assert UNSUPPORTED_MODELS["tfhub-elmo"].url.endswith("/elmo/3")
    for path in ("docs/published-models.md", "README.md", "THIRD_PARTY_NOTICES.md"):
        for line in (REPO_ROOT / path).read_text(encoding="utf8").splitlines():
            assert "google/elmo/2" not in line or "elmo/3" in line, (path, line)  # never cited as current
