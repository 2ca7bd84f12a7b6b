"""Every way a listener can miss its `elmo` gets its own message, and none reads zeros instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.language import Language

from spacy_elmo.pipeline import ElmoPipelineError

from .conftest import listener_config, make_ner_nlp, parser_model_config, train_examples

TEXT = "Alice moved to Berlin last year."


def ner_config(upstream: str = "elmo") -> dict:
    return parser_model_config("ner", listener_config(upstream=upstream))


def initialize(nlp: Language) -> None:
    nlp.initialize(lambda: train_examples(nlp))


def entities(nlp: Language) -> list[tuple[int, int, str]]:
    return [(ent.start, ent.end, ent.label_) for ent in nlp(TEXT).ents]


def test_a_pipeline_without_elmo_names_the_missing_component_and_both_fixes() -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config=ner_config())
    with pytest.raises(ElmoPipelineError) as error:
        initialize(nlp)
    message = str(error.value)
    assert "'ner' listens to 'elmo'" in message and "has no elmo component (its components: ner)" in message
    assert 'add_pipe("elmo", source=other_nlp' in message and "replace_listeners" in message


def test_elmo_after_its_listener_is_told_to_move() -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", config=ner_config())
    nlp.add_pipe("elmo")
    expected = r"comes after it in the pipeline \(ner, elmo\)\. Move 'elmo'"
    with pytest.raises(ElmoPipelineError, match=expected):
        initialize(nlp)


@pytest.mark.parametrize("upstream", ["elmmo", "ELMo"])
def test_a_misspelt_upstream_is_named_with_the_real_elmo_components(upstream: str) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.add_pipe("ner", config=ner_config(upstream))
    with pytest.raises(ElmoPipelineError) as error:
        initialize(nlp)
    message = str(error.value)
    assert f"'ner' listens to '{upstream}', but no component has that name" in message
    assert "elmo components are 'elmo' (all its components: elmo, ner)" in message
    assert 'Set upstream = "elmo"' in message


def test_the_three_mistakes_get_three_different_messages() -> None:
    messages = set()
    for order, upstream in ((["ner"], "elmo"), (["ner", "elmo"], "elmo"), (["elmo", "ner"], "elmmo")):
        nlp = spacy.blank("en")
        for name in order:
            nlp.add_pipe(name, config=ner_config(upstream) if name == "ner" else {})
        with pytest.raises(ElmoPipelineError) as error:
            initialize(nlp)
        messages.add(str(error.value).split(".")[0])
    assert len(messages) == 3


@pytest.fixture(scope="module")
def trained_nlp(bilm_dir: Path) -> Language:
    nlp = make_ner_nlp(bilm_dir)
    optimizer = nlp.create_optimizer()
    for _ in range(40):
        nlp.update(train_examples(nlp), sgd=optimizer)
    return nlp


def test_sourcing_a_listening_component_without_its_elmo_stops_with_the_fixes(trained_nlp: Language) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", source=trained_nlp)
    with pytest.raises(ElmoPipelineError, match="has no elmo component .* source that pipeline's elmo too"):
        nlp(TEXT)


def test_a_sourced_component_does_not_read_another_pipelines_elmo(trained_nlp: Language) -> None:
    """An elmo elsewhere in the process (here in the source pipeline) must not stand in."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.add_pipe("ner", source=trained_nlp, before="elmo")
    with pytest.raises(ElmoPipelineError, match="comes after it"):
        list(nlp.pipe([TEXT, TEXT]))


def test_both_fixes_give_the_source_pipelines_predictions(trained_nlp: Language, tmp_path: Path) -> None:
    expected = entities(trained_nlp)
    with_elmo = spacy.blank("en")
    with_elmo.add_pipe("elmo", source=trained_nlp)
    with_elmo.add_pipe("ner", source=trained_nlp)
    assert entities(with_elmo) == expected

    replaced = spacy.blank("en")
    trained_nlp.to_disk(tmp_path / "source")
    source = spacy.load(tmp_path / "source")
    source.replace_listeners("elmo", "ner", ["model.tok2vec"])
    replaced.add_pipe("ner", source=source)
    assert replaced.pipe_names == ["ner"] and entities(replaced) == expected


def test_a_saved_sourced_component_fails_with_the_message_in_a_fresh_process(
    trained_nlp: Language, tmp_path: Path
) -> None:
    """spacy.load in a new process (where no elmo registered its extensions): before the fix this
    was spaCy's E046 AttributeError; with an elmo pipeline loaded beside it, all-zero inputs."""
    nlp = spacy.blank("en")
    nlp.add_pipe("ner", source=trained_nlp)
    nlp.to_disk(tmp_path / "sourced")
    trained_nlp.to_disk(tmp_path / "complete")
    script = (
        "import spacy\n"
        f"nlp = spacy.load({str(tmp_path / 'sourced')!r})\n"
        "for other in (None, 'complete'):\n"
        "    if other:\n"
        f"        spacy.load({str(tmp_path / 'complete')!r})  # an elmo now exists in the process\n"
        "    try:\n"
        f"        nlp({TEXT!r})\n"
        "        print('NO ERROR')\n"
        "    except Exception as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = "ElmoPipelineError 'ner' listens to 'elmo', but the pipeline has no elmo"
    assert len(lines) == 2 and all(line.startswith(expected) for line in lines), done.stdout


def test_a_working_pipeline_never_walks_the_call_stack(bilm_dir: Path, monkeypatch) -> None:
    """Stack inspection is for the way to an error: initializing, training and predicting with
    a correct pipeline must not pay for it."""
    from spacy_elmo.pipeline import listener

    def no_stack_walk() -> None:
        raise AssertionError("the call stack was inspected in a working pipeline")

    monkeypatch.setattr(listener, "calling_pipeline", no_stack_walk)
    nlp = make_ner_nlp(bilm_dir)
    nlp.update(train_examples(nlp), sgd=nlp.create_optimizer())
    assert len(list(nlp.pipe([TEXT, TEXT]))) == 2
