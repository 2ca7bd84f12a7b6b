"""The catalogue of published ELMo biLMs: short names for their files.

- AllenNLP's format (options.json + HDF5), listed on AllenNLP's ELMo page: the four English
  models AllenNLP trained and the contributed ones;
- ELMoForManyLangs (HIT-SCIR, `efml-<language>`): 44 languages, one zip archive each on the NLPL
  vectors repository, as its README links them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from .errors import UnknownModelError

ALLENNLP_SERVER = "https://s3-us-west-2.amazonaws.com/allennlp/"
NLPL_SERVER = "http://vectors.nlpl.eu/"
MIRRORED_SERVERS = (ALLENNLP_SERVER, NLPL_SERVER)
"""The servers whose paths `$SPACY_ELMO_MIRROR` stands in for."""
MIRROR_VARIABLE = "SPACY_ELMO_MIRROR"
BYTES_PER_PARAMETER = 4  # the HDF5 files hold float32 tensors and nothing else of note
SourceFormat = Literal["allennlp", "elmoformanylangs"]


@dataclass(frozen=True)
class PublishedModel:
    """One published biLM: where its files are and what it is.

    urls (tuple[str, ...]): AllenNLP's options file and weights, as its page links them; or the
        one zip archive of an ELMoForManyLangs model.
    language (str): the language and the training text.
    parameters_millions (Optional[float]): the biLM's size as published, None where not stated.
    source_format (str): "allennlp" or "elmoformanylangs".
    """

    name: str
    urls: tuple[str, ...]
    language: str
    parameters_millions: float | None
    source_format: SourceFormat = "allennlp"

    @property
    def options_url(self) -> str:
        """The options file of an AllenNLP model (the archive of an ELMoForManyLangs one)."""
        return self.urls[0]

    @property
    def weights_url(self) -> str:
        """The weight file of an AllenNLP model (the archive of an ELMoForManyLangs one)."""
        return self.urls[-1]

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
    return PublishedModel(
        name, (f"{stem}_options.json", f"{stem}_weights.hdf5"), language, parameters_millions
    )


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
            (
                f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
                f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            ),
            "English biomedical, PubMed",
            93.6,
        ),
        PublishedModel(
            "pt-wikipedia",
            (f"{_CONTRIBUTED}pt/wikipedia/options.json", f"{_CONTRIBUTED}pt/wikipedia/elmo_pt_weights.hdf5"),
            "Portuguese, Wikipedia",
            None,
        ),
        PublishedModel(
            "pt-brwac",
            (f"{_CONTRIBUTED}pt/brwac/options.json", f"{_CONTRIBUTED}pt/brwac/elmo_pt_weights_dgx1.hdf5"),
            "Portuguese, brWaC web corpus",
            None,
        ),
        PublishedModel(
            "ja",
            (
                "https://exawizardsallenlp.blob.core.windows.net/data/options.json",
                "https://exawizardsallenlp.blob.core.windows.net/data/weights.hdf5",
            ),
            "Japanese, Wikipedia (hosted by its contributor, not on AllenNLP's server)",
            None,
        ),
    )
}

# ELMoForManyLangs: (name, language, NLPL repository id), in the order of its README's table. The
# names use spaCy's language codes, so `spacy.blank(code)` tokenises for the model.
ELMOFORMANYLANGS_MODELS = (
    ("efml-ar", "Arabic", 136),
    ("efml-bg", "Bulgarian", 137),
    ("efml-ca", "Catalan", 138),
    ("efml-cs", "Czech", 139),
    ("efml-cu", "Old Church Slavonic", 140),
    ("efml-da", "Danish", 141),
    ("efml-de", "German", 142),
    ("efml-el", "Greek", 143),
    ("efml-en", "English", 144),
    ("efml-es", "Spanish", 145),
    ("efml-et", "Estonian", 146),
    ("efml-eu", "Basque", 147),
    ("efml-fa", "Persian", 148),
    ("efml-fi", "Finnish", 149),
    ("efml-fr", "French", 150),
    ("efml-ga", "Irish", 151),
    ("efml-gl", "Galician", 152),
    ("efml-grc", "Ancient Greek", 153),
    ("efml-he", "Hebrew", 154),
    ("efml-hi", "Hindi", 155),
    ("efml-hr", "Croatian", 156),
    ("efml-hu", "Hungarian", 157),
    ("efml-id", "Indonesian", 158),
    ("efml-it", "Italian", 159),
    ("efml-ja", "Japanese", 160),
    ("efml-ko", "Korean", 161),
    ("efml-la", "Latin", 162),
    ("efml-lv", "Latvian", 163),
    ("efml-nb", "Norwegian Bokmål", 165),
    ("efml-nl", "Dutch", 164),
    ("efml-nn", "Norwegian Nynorsk", 166),
    ("efml-pl", "Polish", 167),
    ("efml-pt", "Portuguese", 168),
    ("efml-ro", "Romanian", 169),
    ("efml-ru", "Russian", 170),
    ("efml-sk", "Slovak", 171),
    ("efml-sl", "Slovene", 172),
    ("efml-sv", "Swedish", 173),
    ("efml-tr", "Turkish", 174),
    ("efml-ug", "Uyghur", 175),
    ("efml-uk", "Ukrainian", 176),
    ("efml-ur", "Urdu", 177),
    ("efml-vi", "Vietnamese", 178),
    ("efml-zh", "Chinese (traditional script)", 179),
)
_EFML_TEXT = (
    "CoNLL 2018 shared task raw text (Wikipedia + Common Crawl), 20M words sampled (ELMoForManyLangs)"
)
PUBLISHED_MODELS |= {
    name: PublishedModel(
        name,
        (f"{NLPL_SERVER}repository/11/{repository_id}.zip",),
        f"{language}, {_EFML_TEXT}",
        None,
        "elmoformanylangs",
    )
    for name, language, repository_id in ELMOFORMANYLANGS_MODELS
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
    """`url` with AllenNLP's or NLPL's server replaced by `$SPACY_ELMO_MIRROR` when that is set.

    A mirror holds the same paths under its own root (`models/elmo/...` for AllenNLP's files,
    `repository/11/NNN.zip` for ELMoForManyLangs'); files hosted elsewhere keep their URL.
    """
    mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
    server = next((server for server in MIRRORED_SERVERS if url.startswith(server)), None)
    if not mirror or server is None:
        return url
    return mirror.rstrip("/") + "/" + url.removeprefix(server)
