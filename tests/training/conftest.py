"""A tiny synthetic corpus and one shared tiny pretraining run (the reference of several tests)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from spacy_elmo.training import load_pretrain_config, pretrain
from spacy_elmo.training.pretrain import PretrainResult

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_CONFIG = REPO_ROOT / "configs" / "pretrain_tiny.cfg"

SUBJECTS = ("the cat", "a dog", "my sister", "the old man", "our teacher", "the children", "a bird")
VERBS = ("sees", "likes", "finds", "watches", "follows", "feeds")
OBJECTS = ("the ball", "a red apple", "the river", "her friend", "the small house", "some bread")
ENDINGS = (".", " today.", " in the park.", " every morning.", " again.")


def synthetic_documents(n_documents: int, seed: int) -> list[str]:
    """Documents of 1-4 short template sentences: a language a tiny biLM learns in seconds."""
    rng = random.Random(seed)

    def sentence() -> str:
        words = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)}"
        return words[0].upper() + words[1:]

    return [" ".join(sentence() for _ in range(rng.randint(1, 4))) for _ in range(n_documents)]


def read_metrics(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tiny_corpus")
    train, dev = folder / "train.txt", folder / "dev.txt"
    train.write_text("\n".join(synthetic_documents(400, seed=0)) + "\n", encoding="utf8")
    dev.write_text("\n".join(synthetic_documents(40, seed=1)) + "\n", encoding="utf8")
    return train, dev


def tiny_overrides(tiny_corpus: tuple[Path, Path], **training: object) -> dict[str, object]:
    train, dev = tiny_corpus
    return {
        "paths.train": str(train),
        "paths.dev": str(dev),
        **{f"training.{key}": value for key, value in training.items()},
    }


@pytest.fixture(scope="session")
def tiny_run(
    tiny_corpus: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, PretrainResult]:
    """60 steps of the tiny config, uninterrupted, evaluated every 20 steps."""
    output_dir = tmp_path_factory.mktemp("tiny_run")
    config = load_pretrain_config(TINY_CONFIG, tiny_overrides(tiny_corpus))
    return output_dir, pretrain(config, output_dir)
