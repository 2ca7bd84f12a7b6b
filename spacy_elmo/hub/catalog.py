"""The catalogue of published ELMo biLMs: short names for AllenNLP's options.json + HDF5 pairs.

Every entry is a model in AllenNLP's own format (the same options file and weight layout), listed
on AllenNLP's ELMo page: the four English models AllenNLP trained and the contributed ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import UnknownModelError

ALLENNLP_SERVER = "https://s3-us-west-2.amazonaws.com/allennlp/"
MIRROR_VARIABLE = "SPACY_ELMO_MIRROR"
BYTES_PER_PARAMETER = 4  # the HDF5 files hold float32 tensors and nothing else of note


@dataclass(frozen=True)
class PublishedModel:
    """One published biLM: where its two files are and what it is.

    options_url / weights_url (str): the files as AllenNLP's page links them.
    language (str): the language and the training text.
    parameters_millions (Optional[float]): the biLM's size as published, None where not stated.
    """

    name: str
    options_url: str
    weights_url: str
    language: str
    parameters_millions: float | None

    @property
    def download_megabytes(self) -> float | None:
        """The weight file's approximate size in MB (float32 parameters), None where unknown."""
        if self.parameters_millions is None:
            return None
        return self.parameters_millions * BYTES_PER_PARAMETER

    @property
    def size(self) -> str:
        """The size for people: parameters and download, or that it is not published."""
        if self.parameters_millions is None:
            return "size not published"
        return f"{self.parameters_millions:.1f}M parameters, ~{self.download_megabytes:.0f} MB"


def _allennlp_english(name: str, directory: str, parameters_millions: float, language: str) -> PublishedModel:
    """A model AllenNLP trained: `models/elmo/{dir}/elmo_{dir}_{options.json|weights.hdf5}`."""
    stem = f"{ALLENNLP_SERVER}models/elmo/{directory}/elmo_{directory}"
    return PublishedModel(name, f"{stem}_options.json", f"{stem}_weights.hdf5", language, parameters_millions)


_CONTRIBUTED = f"{ALLENNLP_SERVER}models/elmo/contributed/"
_ONE_BILLION_WORDS = "English, 1B Word Benchmark (news, ~800M tokens)"

PUBLISHED_MODELS: dict[str, PublishedModel] = {
    model.name: model
    for model in (
        _allennlp_english("small", "2x1024_128_2048cnn_1xhighway", 13.6, _ONE_BILLION_WORDS),
        _allennlp_english("medium", "2x2048_256_2048cnn_1xhighway", 28.0, _ONE_BILLION_WORDS),
        _allennlp_english("original", "2x4096_512_2048cnn_2xhighway", 93.6, _ONE_BILLION_WORDS),
        _allennlp_english(
            "original-5.5b",
            "2x4096_512_2048cnn_2xhighway_5.5B",
            93.6,
            "English, Wikipedia + WMT 2008-2012 news crawl (5.5B tokens)",
        ),
        PublishedModel(
            "pubmed",
            f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
            f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            "English biomedical, PubMed",
            93.6,
        ),
        PublishedModel(
            "pt-wikipedia",
            f"{_CONTRIBUTED}pt/wikipedia/options.json",
            f"{_CONTRIBUTED}pt/wikipedia/elmo_pt_weights.hdf5",
            "Portuguese, Wikipedia",
            None,
        ),
        PublishedModel(
            "pt-brwac",
            f"{_CONTRIBUTED}pt/brwac/options.json",
            f"{_CONTRIBUTED}pt/brwac/elmo_pt_weights_dgx1.hdf5",
            "Portuguese, brWaC web corpus",
            None,
        ),
        PublishedModel(
            "ja",
            "https://exawizardsallenlp.blob.core.windows.net/data/options.json",
            "https://exawizardsallenlp.blob.core.windows.net/data/weights.hdf5",
            "Japanese, Wikipedia (hosted by its contributor, not on AllenNLP's server)",
            None,
        ),
    )
}


def find_published_model(name: str) -> PublishedModel:
    """The catalogue entry for `name`; `UnknownModelError` listing the known names otherwise."""
    try:
        return PUBLISHED_MODELS[name]
    except KeyError:
        raise UnknownModelError(
            f"{name!r} is not a published ELMo model. Known names: {', '.join(PUBLISHED_MODELS)} "
            "(`spacy-elmo download --list` shows their sizes and sources)."
        ) from None


def is_published_name(name: str) -> bool:
    """Whether `name` is in the catalogue."""
    return name in PUBLISHED_MODELS


def mirrored(url: str) -> str:
    """`url` with AllenNLP's server replaced by `$SPACY_ELMO_MIRROR` when that is set.

    A mirror holds the same paths under its own root; files hosted elsewhere keep their URL.
    """
    mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
    if not mirror or not url.startswith(ALLENNLP_SERVER):
        return url
    return mirror.rstrip("/") + "/" + url.removeprefix(ALLENNLP_SERVER)
