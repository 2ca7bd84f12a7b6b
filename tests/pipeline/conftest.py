"""Tiny random biLMs and small pipelines for the spaCy integration tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import spacy
import torch
from spacy.language import Language

from spacy_elmo.bilm import BiLM, BiLMConfig

TINY_CONFIG = BiLMConfig(lstm_dim=16, projection_dim=8, filters=((1, 8), (2, 8)), n_highway=1)
TEXTS = [
    "The bank raised rates near the river bank.",
    "Apple is looking at buying a U.K. startup for $1 billion.",
    "She sold seashells by the seashore in Berlin.",
    "",
    "Ok",
]


def tiny_bilm(seed: int = 0) -> BiLM:
    """A random biLM with 3 layers of width 2P = 16 (LSTMs and token encoder both random)."""
    torch.manual_seed(seed)
    return BiLM(TINY_CONFIG)


def saved_tiny_bilm(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """`tiny_bilm()` saved as our model directory (config.json + model.safetensors) in a new
    temporary folder `name`."""
    path = tmp_path_factory.mktemp(name)
    tiny_bilm().save(path)
    return path


@pytest.fixture(scope="session")
def bilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our model directory of a tiny random biLM."""
    return saved_tiny_bilm(tmp_path_factory, "tiny_bilm")


def loader_config(path: Path) -> dict:
    return {"loader": {"@misc": "spacy-elmo.ModelDir.v1", "path": str(path)}}


def make_nlp(bilm_dir: Path, elmo_config: dict | None = None) -> Language:
    """spacy.blank("en") with an initialized `elmo` component."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=elmo_config or {})
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    nlp.initialize()
    return nlp


@pytest.fixture()
def nlp_factory(bilm_dir: Path) -> Callable[..., Language]:
    def factory(**elmo_config: object) -> Language:
        return make_nlp(bilm_dir, dict(elmo_config))

    return factory


@pytest.fixture()
def nlp(bilm_dir: Path) -> Language:
    return make_nlp(bilm_dir)


TRAIN_DATA = [
    ("Alice moved to Berlin last year.", {"entities": [(0, 5, "PER"), (15, 21, "LOC")]}),
    ("Bob works for Acme in Paris.", {"entities": [(0, 3, "PER"), (14, 18, "ORG"), (22, 27, "LOC")]}),
    ("The river bank was quiet.", {"entities": []}),
    ("Carol visited London with Dave.", {"entities": [(0, 5, "PER"), (14, 20, "LOC"), (26, 30, "PER")]}),
]


def listener_config(width: int | None = 16, **settings: object) -> dict:
    return {"@architectures": "spacy-elmo.ElmoListener.v1", "width": width, **settings}


def parser_model_config(state_type: str, tok2vec: dict) -> dict:
    return {
        "model": {
            "@architectures": "spacy.TransitionBasedParser.v2",
            "state_type": state_type,
            "extra_state_tokens": False,
            "hidden_width": 16,
            "maxout_pieces": 2,
            "use_upper": True,
            "nO": None,
            "tok2vec": tok2vec,
        }
    }


def make_ner_nlp(bilm_dir: Path, *, frozen: bool = True, tok2vec: dict | None = None) -> Language:
    """elmo + ner listening to it, initialized on TRAIN_DATA."""
    from spacy.training import Example

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"frozen": frozen})
    nlp.add_pipe("ner", config=parser_model_config("ner", tok2vec or listener_config()))
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    examples = [Example.from_dict(nlp.make_doc(text), annotations) for text, annotations in TRAIN_DATA]
    nlp.initialize(lambda: examples)
    return nlp


def train_examples(nlp: Language) -> list:
    from spacy.training import Example

    return [Example.from_dict(nlp.make_doc(text), annotations) for text, annotations in TRAIN_DATA]
