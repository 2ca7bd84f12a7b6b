"""The English biLM shipped inside the package: what `nlp.add_pipe("elmo")` uses when given no weights.

The weights live in `en_elmo_cpu/` as an ordinary model directory (`config.json` +
`model.safetensors`), next to `card.json` (the facts `spacy-elmo info` prints) and
`MODEL_CARD.md` (how it was trained, on what, and how well it does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..bilm.model import BiLM

BUNDLED_NAME = "en_elmo_cpu"
BUNDLED_PATH = Path(__file__).parent / BUNDLED_NAME


def load_bundled_bilm(*, stateful: bool = False) -> BiLM:
    """The bundled English biLM, in full precision."""
    from ..bilm.model import BiLM  # here: BUNDLED_NAME is read where torch is not needed

    return BiLM.load(BUNDLED_PATH, stateful=stateful)


def bundled_card() -> dict[str, Any]:
    """The model card's facts: corpus, licences, tokens, steps, hours, hardware, perplexity, stages."""
    return json.loads((BUNDLED_PATH / "card.json").read_text(encoding="utf8"))
