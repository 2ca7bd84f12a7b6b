"""Any Unicode a user's documents hold goes through `nlp.pipe` to finite layers of the right shape."""

from __future__ import annotations

import functools

import numpy as np
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import TINY_CONFIG, loader_config

SPECIAL_TEXTS = [
    "\x00\x01\x1f\x7f",  # NUL and control characters
    "שלום עולם مرحبا بالعالم",  # right-to-left scripts
    "\u202eevil\u202c text",  # bidirectional override marks
    "👩‍👩‍👧‍👦 🏳️‍🌈 🇩🇪",  # emoji with zero-width joiners and flags
    "e\u0301\u0302\u0303\u0304 a\u20dd",  # stacked combining marks
    "x" * 1000 + " y",  # a 1,000-character token
    "   \t\n  ",  # whitespace only
    "",
    "\ud7ff\ue000\U0010ffff",  # edges of the Unicode planes
]

texts = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(categories=["Cc", "Mn", "Zs", "So"]), max_size=40),
    st.sampled_from(SPECIAL_TEXTS),
    st.builds(lambda n, c: c * n, st.integers(min_value=1, max_value=1200), st.characters()),
)


@functools.cache
def shared_nlp(bilm_dir: str) -> spacy.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    nlp.initialize()
    return nlp


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=6))
def test_layers_have_the_docs_shape_and_are_finite(bilm_dir, batch: list[str]) -> None:
    nlp = shared_nlp(str(bilm_dir))
    width = 2 * TINY_CONFIG.projection_dim
    for text, doc in zip(batch, nlp.pipe(batch, batch_size=3)):
        layers = doc._.elmo.layers
        assert layers.shape == (TINY_CONFIG.n_layers + 1, len(doc), width), repr(text)
        assert np.isfinite(layers).all(), repr(text)
        assert np.isfinite(doc._.elmo.mixed).all()


def test_the_special_texts_are_embedded_alone_as_in_a_batch(bilm_dir) -> None:
    nlp = shared_nlp(str(bilm_dir))
    batched = [doc._.elmo.layers for doc in nlp.pipe(SPECIAL_TEXTS, batch_size=len(SPECIAL_TEXTS))]
    for text, layers in zip(SPECIAL_TEXTS, batched):
        np.testing.assert_allclose(nlp(text)._.elmo.layers, layers, atol=1e-6, err_msg=repr(text))
