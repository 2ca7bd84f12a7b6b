"""The catalogue of published ELMo biLMs: short names for their files, each with its public source.

- AllenNLP's format (options.json + HDF5): the four English models AllenNLP trained and the
  models others contributed, as AllenNLP's ELMo page lists them (the first Portuguese model as it
  listed it until 2020 and flair still loads it), and the files those pages point to;
- ELMoForManyLangs (HIT-SCIR, `efml-<language>`): 44 languages, one zip archive each on the NLPL
  vectors repository, and one simplified-Chinese `.tar.bz2`, as its README links them.

Models a public page names that spacy-elmo cannot load are in `UNSUPPORTED_MODELS`, with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from .errors import HubError, UnknownModelError

ALLENNLP_SERVER = "https://s3-us-west-2.amazonaws.com/allennlp/"
NLPL_SERVER = "http://vectors.nlpl.eu/"
MIRRORED_SERVERS = (ALLENNLP_SERVER, NLPL_SERVER)
"""The servers whose paths sit at the root of `$SPACY_ELMO_MIRROR`; other hosts go under their name."""
MIRROR_VARIABLE = "SPACY_ELMO_MIRROR"
MIRROR_SCHEMES = ("http", "https", "file")
BYTES_PER_PARAMETER = 4  # the HDF5 files hold float32 tensors and nothing else of note
MULTI_LANGUAGE = "xx"
"""spaCy's multi-language tokenizer: the route for a language spaCy has no class for."""
SourceFormat = Literal["allennlp", "elmoformanylangs"]

ALLENNLP_PAGE = "https://allennlp.org/elmo"
ALLENNLP_PAGE_2018 = "https://allennlp.org/elmo (2018-11 to 2020-03, allenai/allennlp-website 40d800e)"
FLAIR_ELMO = "flair's ELMoEmbeddings('pt') (flairNLP/flair, flair/embeddings/token.py)"
_LINKED = f"(README, linked from {ALLENNLP_PAGE})"
GERMAN_README = f"https://github.com/t-systems-on-site-services-gmbh/german-elmo-model {_LINKED}"
_PLUR = "https://github.com/stefan-it/plur"
BASQUE_README = f"{_PLUR} (README, linked from the Basque row of {ALLENNLP_PAGE})"
TAMIL_README = f"{_PLUR} (README, its Tamil section; {ALLENNLP_PAGE} does not list it)"
BILM_TF_README = "https://github.com/allenai/bilm-tf (README)"
_ORIGINAL_CHECKPOINT = f"{ALLENNLP_SERVER}models/elmo/2x4096_512_2048cnn_2xhighway_tf_checkpoint/"
TFHUB_ELMO = "https://tfhub.dev/google/elmo/3"
"""The module's current version: bilm-tf's README links version 2, which version 3 supersedes."""
EFML_README = "https://github.com/HIT-SCIR/ELMoForManyLangs (README)"


@dataclass(frozen=True)
class PublishedModel:
    """One published biLM: where its files are, what it is, and who says so.

    urls (tuple[str, ...]): the options file and weights, as its source links them; or the one
        archive of an ELMoForManyLangs model.
    language (str): the language and the training text.
    parameters_millions (Optional[float]): the biLM's size as its source states it, None where not.
    source (str): the public page that gives the URLs.
    spacy_lang (str): the spaCy language to pair it with (`xx` where spaCy has none).
    source_format (str): "allennlp" or "elmoformanylangs".
    md5 (tuple[str, ...]): the MD5 of each file in `urls`, where its source publishes them.
    """

    name: str
    urls: tuple[str, ...]
    language: str
    parameters_millions: float | None
    source: str
    spacy_lang: str
    source_format: SourceFormat = "allennlp"
    md5: tuple[str, ...] = ()

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
        """The size for people: parameters and download, or that its source gives none."""
        if self.parameters_millions is None:
            return "size not published"
        return f"{self.parameters_millions:.1f}M parameters, ~{self.download_megabytes:.0f} MB"


@dataclass(frozen=True)
class UnsupportedModel:
    """A model a public page names that spacy-elmo cannot load, and why."""

    name: str
    url: str
    source: str
    reason: str


def _allennlp_english(name: str, directory: str, parameters_millions: float, language: str) -> PublishedModel:
    """A model AllenNLP trained: `models/elmo/{dir}/elmo_{dir}_{options.json|weights.hdf5}`."""
    stem = f"{ALLENNLP_SERVER}models/elmo/{directory}/elmo_{directory}"
    return PublishedModel(
        name,
        (f"{stem}_options.json", f"{stem}_weights.hdf5"),
        language,
        parameters_millions,
        ALLENNLP_PAGE,
        "en",
    )


_CONTRIBUTED = f"{ALLENNLP_SERVER}models/elmo/contributed/"
_GERMAN_RELEASE = (
    "https://github.com/t-systems-on-site-services-gmbh/german-elmo-model/releases/download/files_1/"
)
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
            "English, Wikipedia (1.9B tokens) + WMT 2008-2012 news crawl (3.6B tokens)",
        ),
        PublishedModel(
            "pubmed",
            (
                f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
                f"{_CONTRIBUTED}pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            ),
            "English biomedical, PubMed",
            None,
            ALLENNLP_PAGE,
            "en",
        ),
        PublishedModel(
            "pt",
            (f"{_CONTRIBUTED}pt/elmo_pt_options.json", f"{_CONTRIBUTED}pt/elmo_pt_weights.hdf5"),
            "Portuguese, the first contributed model (Federal University of Goiás)",
            None,
            f"{ALLENNLP_PAGE_2018}; {FLAIR_ELMO}",
            "pt",
        ),
        PublishedModel(
            "pt-wikipedia",
            (f"{_CONTRIBUTED}pt/wikipedia/options.json", f"{_CONTRIBUTED}pt/wikipedia/elmo_pt_weights.hdf5"),
            "Portuguese, Wikipedia",
            None,
            ALLENNLP_PAGE,
            "pt",
        ),
        PublishedModel(
            "pt-brwac",
            (f"{_CONTRIBUTED}pt/brwac/options.json", f"{_CONTRIBUTED}pt/brwac/elmo_pt_weights_dgx1.hdf5"),
            "Portuguese, brWaC web corpus",
            None,
            ALLENNLP_PAGE,
            "pt",
        ),
        PublishedModel(
            "ja",
            (
                "https://exawizardsallenlp.blob.core.windows.net/data/options.json",
                "https://exawizardsallenlp.blob.core.windows.net/data/weights.hdf5",
            ),
            "Japanese, Wikipedia (ExaWizards)",
            None,
            ALLENNLP_PAGE,
            "ja",
        ),
        PublishedModel(
            "de",
            (f"{_GERMAN_RELEASE}options.json", f"{_GERMAN_RELEASE}weights.hdf5"),
            "German, Wikipedia articles and talk pages (T-Systems onsite, ~963M tokens)",
            None,
            GERMAN_README,
            "de",
            md5=("da99676f2fe2838ff2663a6d9bad97dd", "f3ab3a68caae6d42bac47c230b3a65bf"),
        ),
        PublishedModel(
            "eu",
            (
                "https://schweter.eu/cloud/eu-elmo/options.json",
                "https://schweter.eu/cloud/eu-elmo/weights.hdf5",
            ),
            "Basque, Wikipedia + OPUS + Leipzig corpora (~73M tokens; Stefan Schweter)",
            None,
            BASQUE_README,
            "eu",
        ),
        PublishedModel(
            "ta",
            (
                "https://schweter.eu/cloud/ta-elmo/options.json",
                "https://schweter.eu/cloud/ta-elmo/weights.hdf5",
            ),
            "Tamil, Wikipedia + OPUS + Leipzig corpora (~22M tokens; Stefan Schweter)",
            None,
            TAMIL_README,
            "ta",
        ),
    )
}

UNSUPPORTED_MODELS: dict[str, UnsupportedModel] = {
    model.name: model
    for model in (
        UnsupportedModel(
            "transformer-elmo",
            f"{ALLENNLP_SERVER}models/transformer-elmo-2019.01.10.tar.gz",
            ALLENNLP_PAGE,
            "a transformer biLM in an AllenNLP model archive: another architecture than the char-CNN + "
            "LSTM biLM spacy-elmo runs, and no options.json + HDF5 weights to convert",
        ),
        UnsupportedModel(
            "de-checkpoint",
            f"{_GERMAN_RELEASE}bilm-output-result.tgz.part-00",
            GERMAN_README,
            "the German model's TensorFlow training checkpoint in four parts, for bilm-tf's fine-tuning: "
            "use `de`, the options and weights of the same model",
        ),
        UnsupportedModel(
            "original-tf-checkpoint",
            f"{_ORIGINAL_CHECKPOINT}model.ckpt-935588.data-00000-of-00001",
            BILM_TF_README,
            "bilm-tf's TensorFlow training checkpoint of `original` (with its .index, .meta and "
            "vocabulary files, for restarting its training): only TensorFlow reads it, and spacy-elmo "
            "loads AllenNLP's options JSON + HDF5 weights: use `original`, the same model in those files",
        ),
        UnsupportedModel(
            "tfhub-elmo",
            TFHUB_ELMO,
            BILM_TF_README,
            "ELMo as a TensorFlow Hub module (a TensorFlow graph and its variables): only TensorFlow "
            "reads it, and spacy-elmo loads AllenNLP's options JSON + HDF5 weights: use `original` "
            "or another English model here",
        ),
    )
}
"""Models public pages name that spacy-elmo cannot load; `download --list` shows them with the reason."""

# ELMoForManyLangs: (name, language, NLPL repository id, spaCy language), in the order of its
# README's table. The names use spaCy's language codes where spaCy has the language.
ELMOFORMANYLANGS_MODELS = (
    ("efml-ar", "Arabic", 136, "ar"),
    ("efml-bg", "Bulgarian", 137, "bg"),
    ("efml-ca", "Catalan", 138, "ca"),
    ("efml-cs", "Czech", 139, "cs"),
    ("efml-cu", "Old Church Slavonic", 140, MULTI_LANGUAGE),
    ("efml-da", "Danish", 141, "da"),
    ("efml-de", "German", 142, "de"),
    ("efml-el", "Greek", 143, "el"),
    ("efml-en", "English", 144, "en"),
    ("efml-es", "Spanish", 145, "es"),
    ("efml-et", "Estonian", 146, "et"),
    ("efml-eu", "Basque", 147, "eu"),
    ("efml-fa", "Persian", 148, "fa"),
    ("efml-fi", "Finnish", 149, "fi"),
    ("efml-fr", "French", 150, "fr"),
    ("efml-ga", "Irish", 151, "ga"),
    ("efml-gl", "Galician", 152, MULTI_LANGUAGE),
    ("efml-grc", "Ancient Greek", 153, "grc"),
    ("efml-he", "Hebrew", 154, "he"),
    ("efml-hi", "Hindi", 155, "hi"),
    ("efml-hr", "Croatian", 156, "hr"),
    ("efml-hu", "Hungarian", 157, "hu"),
    ("efml-id", "Indonesian", 158, "id"),
    ("efml-it", "Italian", 159, "it"),
    ("efml-ja", "Japanese", 160, "ja"),
    ("efml-ko", "Korean", 161, "ko"),
    ("efml-la", "Latin", 162, "la"),
    ("efml-lv", "Latvian", 163, "lv"),
    ("efml-nb", "Norwegian Bokmål", 165, "nb"),
    ("efml-nl", "Dutch", 164, "nl"),
    ("efml-nn", "Norwegian Nynorsk", 166, "nn"),
    ("efml-pl", "Polish", 167, "pl"),
    ("efml-pt", "Portuguese", 168, "pt"),
    ("efml-ro", "Romanian", 169, "ro"),
    ("efml-ru", "Russian", 170, "ru"),
    ("efml-sk", "Slovak", 171, "sk"),
    ("efml-sl", "Slovene", 172, "sl"),
    ("efml-sv", "Swedish", 173, "sv"),
    ("efml-tr", "Turkish", 174, "tr"),
    ("efml-ug", "Uyghur", 175, MULTI_LANGUAGE),
    ("efml-uk", "Ukrainian", 176, "uk"),
    ("efml-ur", "Urdu", 177, "ur"),
    ("efml-vi", "Vietnamese", 178, "vi"),
    ("efml-zh", "Chinese (traditional script)", 179, "zh"),
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
        EFML_README,
        spacy_lang,
        "elmoformanylangs",
    )
    for name, language, repository_id, spacy_lang in ELMOFORMANYLANGS_MODELS
}
PUBLISHED_MODELS["efml-zhs"] = PublishedModel(
    "efml-zhs",
    ("http://39.96.43.154/zhs.model.tar.bz2",),
    "Chinese (simplified script), Xinhua part of Chinese Gigaword v5 (ELMoForManyLangs)",
    None,
    EFML_README,
    "zh",
    "elmoformanylangs",
)


def find_published_model(name: str) -> PublishedModel:
    """The catalogue entry for `name`; `UnknownModelError` listing the known names otherwise."""
    if name in UNSUPPORTED_MODELS:
        unsupported = UNSUPPORTED_MODELS[name]
        raise UnknownModelError(
            f"{name!r} ({unsupported.url}) cannot be loaded by spacy-elmo: {unsupported.reason}."
        )
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


def mirror_root() -> str | None:
    """`$SPACY_ELMO_MIRROR` without its trailing slash, None when unset; `HubError` if not a URL."""
    mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
    if not mirror:
        return None
    parts = urlsplit(mirror)
    if parts.scheme not in MIRROR_SCHEMES or not (parts.netloc or parts.scheme == "file"):
        raise HubError(
            f"{MIRROR_VARIABLE}={mirror!r} is not a URL: give the root of a server that holds the "
            "models' paths, e.g. https://models.example.org/elmo/ or file:///srv/elmo/, or unset it."
        )
    return mirror.rstrip("/")


def mirror_path(url: str) -> str:
    """Where a mirror holds `url`, relative to its root: the path of AllenNLP's and NLPL's servers
    (`models/elmo/...`, `repository/11/NNN.zip`), or any other host's name and path
    (`github.com/...`, `schweter.eu/cloud/...`)."""
    server = next((server for server in MIRRORED_SERVERS if url.startswith(server)), None)
    if server is not None:
        return url.removeprefix(server)
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path}"


def mirrored(url: str) -> str:
    """`url` on `$SPACY_ELMO_MIRROR` (at `mirror_path(url)`) when that is set, else `url`."""
    mirror = mirror_root()
    return url if mirror is None else f"{mirror}/{mirror_path(url)}"
