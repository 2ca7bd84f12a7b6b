"""Make a published biLM ready to load: download its files once, verify them, convert them once.

Later loads hash the downloaded files against the index (a mismatch fetches the file again) and
read the converted model directory, which needs no h5py. An ELMoForManyLangs archive is extracted
(safely: `archive.py`) into a temporary folder beside it only while it is converted.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from ..bilm import BiLM
from ..bilm.errors import ElmoError
from ..bilm.io.elmoformanylangs import SOURCE_FILES, is_elmoformanylangs_dir
from .archive import extract_zip
from .cache import CacheIndex, cache_root, converted_folder, file_sha256, model_folder
from .catalog import MIRROR_VARIABLE, PublishedModel, find_published_model, mirrored
from .download import download_file
from .errors import DownloadError, HubError

logger = logging.getLogger(__name__)


def file_name(url: str) -> str:
    """The file name a URL ends with: the name a downloaded file keeps in the cache."""
    return Path(urlsplit(url).path).name


def published_model_dir(name: str) -> Path:
    """The model directory of the published biLM `name`, downloaded and converted if need be.

    Raises `UnknownModelError` (listing the names) for an unknown name and `DownloadError`
    (saying how to place the files by hand) when the files cannot be fetched.
    """
    model = find_published_model(name)
    root = cache_root()
    index = CacheIndex(root)
    checksums = {file_name(url): _verified_download(model, url, root, index) for url in model.urls}
    converted = converted_folder(root, name)
    if not converted.is_dir() or index.converted_from(name) != checksums:
        _convert(model, root, converted)
        index.record_conversion(name, checksums)
    return converted


def _verified_download(model: PublishedModel, url: str, root: Path, index: CacheIndex) -> str:
    """The sha256 of one of the model's files in the cache, fetched first if missing or altered.

    A file placed by hand, with no checksum recorded yet, is taken as it is and recorded.
    """
    path = model_folder(root, model.name) / file_name(url)
    key = f"{model.name}/{path.name}"
    recorded = index.recorded_sha256(key)
    if path.is_file():
        sha256 = file_sha256(path)
        if recorded is None:
            index.record_sha256(key, sha256)
        if recorded in (None, sha256):
            return sha256
        logger.warning("%s does not match the sha256 recorded at its download: fetching it again.", path)
        path.unlink()
    _download_or_explain(model, url, path)
    sha256 = file_sha256(path)
    index.record_sha256(key, sha256)
    return sha256


def _download_or_explain(model: PublishedModel, url: str, path: Path) -> None:
    """Download one file; on failure, say how to get it there without this machine's network."""
    source = mirrored(url)
    logger.info("Downloading %s from %s", path.name, source)
    try:
        download_file(source, path)
    except DownloadError as error:
        if model.source_format == "elmoformanylangs":
            by_hand = (
                f"download {model.weights_url} elsewhere and place it in {path.parent} under that file "
                f"name; or set {MIRROR_VARIABLE} to a server that holds NLPL's paths (repository/11/); "
                "or unzip it and convert it with `spacy-elmo convert MODEL_DIR DIR` and use "
                "`--paths.elmo DIR`."
            )
        else:
            by_hand = (
                f"download {model.options_url} and {model.weights_url} elsewhere and place them in "
                f"{path.parent} under those file names; or set {MIRROR_VARIABLE} to a server that holds "
                "AllenNLP's paths; or convert the two files with `spacy-elmo convert OPTIONS WEIGHTS DIR` "
                "and use `--paths.elmo DIR`."
            )
        raise DownloadError(f"{error} To install {model.name!r} without network access, {by_hand}") from None


def _read_downloaded(model: PublishedModel, folder: Path, scratch: Path) -> BiLM:
    """The biLM of a model's downloaded files; an archive is extracted under `scratch` first."""
    files = [folder / file_name(url) for url in model.urls]
    if model.source_format == "allennlp":
        return BiLM.from_allennlp(*files)
    extract_zip(files[0], scratch)
    candidates = [scratch, *sorted(path for path in scratch.rglob("*") if path.is_dir())]
    model_dir = next((path for path in candidates if is_elmoformanylangs_dir(path)), None)
    if model_dir is None:
        raise HubError(
            f"{files[0]} holds no ELMoForManyLangs model (a folder with {', '.join(SOURCE_FILES)})."
        )
    return BiLM.from_elmoformanylangs(model_dir)


def _convert(model: PublishedModel, root: Path, target: Path) -> None:
    """Convert a model's downloaded files into our model directory at `target`, which appears only
    when complete; an extracted archive is removed again."""
    logger.info("Converting %s to %s (once)", model.name, target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    scratch = Path(tempfile.mkdtemp(prefix=".extracted.", dir=target.parent))
    retired = target.with_name(f".{target.name}.old")
    try:
        _read_downloaded(model, model_folder(root, model.name), scratch).save(staging)
        if target.exists():
            os.replace(target, retired)
        os.replace(staging, target)
    except ElmoError as error:
        raise HubError(
            f"{error} The downloaded files of {model.name!r} do not form a biLM: delete {target.parent} "
            "and run again to download them afresh."
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(retired, ignore_errors=True)
