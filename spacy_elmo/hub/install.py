"""Make a published biLM ready to load: download its files once, verify them, convert them once.

One process at a time works on one model: the model's lock (`cache.cache_lock`) is held around
the download, the checks, the conversion and the index updates, so N processes that ask for one
name give one download, and the others wait and then use the finished model.

What is hashed, and when: the first install records the sha256 of each downloaded file and of
each file of the converted model directory in the cache's index (and checks a file against the
MD5 its source publishes, where it publishes one). A later load that finds every file where and as
it was last checked (`cache.installed_model`: paths, sizes, times and inodes) takes the model
directory without a lock and hashes nothing. Otherwise (a file touched or rewritten, the cache
copied or moved, a file missing) the files are hashed again under the lock: a downloaded file
that differs from the index is fetched again, and must then match the index (a mirror that
serves another file than the first install's is refused); a model directory that differs is
converted again. Loads read the converted model directory, which needs no h5py. Weights never
run code: safetensors, HDF5, and ELMoForManyLangs' torch files only through
`torch.load(weights_only=True)`, which refuses anything but tensors. An ELMoForManyLangs archive
is extracted (safely: `archive.py`) into a temporary folder beside it only while it is converted.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from ..bilm import BiLM
from ..bilm.errors import ElmoError
from ..bilm.io.atomic import new_folder
from ..bilm.io.cache_home import cache_root
from ..bilm.io.elmoformanylangs import SOURCE_FILES, is_elmoformanylangs_dir
from ..bilm.io.model_dir import CONFIG_FILE, WEIGHTS_FILE
from .archive import extract_archive
from .cache import (
    CacheIndex,
    cache_lock,
    converted_folder,
    file_sha256,
    folder_checksums,
    installed_model,
    model_folder,
    record_installed,
)
from .catalog import MIRROR_VARIABLE, PublishedModel, find_published_model, mirror_root, mirrored
from .download import download_file
from .errors import DownloadError, HubError

logger = logging.getLogger(__name__)
STAGING_PREFIX = "."
"""Folders whose names start with this in a model's folder are work in progress of a conversion."""


def file_name(url: str) -> str:
    """The file name a URL ends with: the name a downloaded file keeps in the cache."""
    return Path(urlsplit(url).path).name


def source_names(model: PublishedModel) -> list[str]:
    """The names the model's downloaded files keep in the cache."""
    return [file_name(url) for url in model.urls]


def cached_model_dir(name: str) -> Path | None:
    """The model directory of the published biLM `name` if the cache holds it ready, else None;
    nothing is downloaded, locked or hashed."""
    model = find_published_model(name)
    return installed_model(cache_root(), name, source_names(model), required=[CONFIG_FILE, WEIGHTS_FILE])


def published_model_dir(name: str) -> Path:
    """The model directory of the published biLM `name`, downloaded and converted if need be.

    Safe to call from many processes at once on one cache. Raises `UnknownModelError` (listing
    the names) for an unknown name, `HubError` for a `$SPACY_ELMO_MIRROR` that is not a URL (before
    anything is written), and `DownloadError` (saying how to place the files by hand) when the
    files cannot be fetched; a model folder left empty by a failure is removed.
    """
    model = find_published_model(name)
    mirror_root()
    ready = cached_model_dir(name)
    if ready is not None:
        return ready
    root = cache_root()
    with cache_lock(root, name):
        try:
            converted = _install(model, root)
            record_installed(root, name, source_names(model))
            return converted
        finally:
            with contextlib.suppress(OSError):
                model_folder(root, name).rmdir()  # only an empty one: nothing to resume from


def _install(model: PublishedModel, root: Path) -> Path:
    """Download, verify and convert under the model's lock (held by the caller)."""
    _remove_unfinished_conversions(model_folder(root, model.name))
    index = CacheIndex(root)
    md5s = model.md5 or (None,) * len(model.urls)
    checksums = {
        file_name(url): _verified_download(model, url, md5, root, index) for url, md5 in zip(model.urls, md5s)
    }
    converted = converted_folder(root, model.name)
    if index.converted_from(model.name) != checksums or not _intact(converted, index.model_files(model.name)):
        _convert(model, root, converted)
        index.record_install(model.name, checksums, folder_checksums(converted))
    return converted


def _intact(converted: Path, recorded: dict[str, str] | None) -> bool:
    """Whether a model directory holds its required files, each file as recorded at its conversion."""
    complete = all((converted / required).is_file() for required in (CONFIG_FILE, WEIGHTS_FILE))
    if not complete or recorded is None:
        return False
    if folder_checksums(converted) == recorded:
        return True
    logger.warning("%s differs from the model directory converted there: converting it again.", converted)
    return False


def _remove_unfinished_conversions(folder: Path) -> None:
    """Remove what a conversion killed half-way left behind (its staging and extraction folders)."""
    if folder.is_dir():
        for path in folder.iterdir():
            if path.name.startswith(STAGING_PREFIX) and path.is_dir():
                logger.info("Removing %s, left by a conversion that did not finish.", path)
                shutil.rmtree(path, ignore_errors=True)


def _verified_download(
    model: PublishedModel, url: str, md5: str | None, root: Path, index: CacheIndex
) -> str:
    """The sha256 of one of the model's files in the cache, fetched first if missing or altered.

    A file placed by hand, with no checksum recorded yet, is taken as it is (and recorded with
    the install). A new file is checked against the MD5 its source publishes, where it publishes
    one, and against the sha256 the first install recorded, where there was one.
    """
    path = model_folder(root, model.name) / file_name(url)
    recorded = index.recorded_sha256(model.name, path.name)
    if path.is_file():
        sha256 = file_sha256(path)
        if recorded is None:
            _check_md5(model, path, md5)
        if recorded in (None, sha256):
            return sha256
        logger.warning(
            "%s does not match the sha256 recorded at its first install: fetching it again (a new "
            "version placed there on purpose is taken once %s is deleted).",
            path,
            index.path,
        )
        path.unlink()
    source = _download_or_explain(model, url, path)
    _check_md5(model, path, md5)
    sha256 = file_sha256(path)
    if recorded is None and md5 is None and urlsplit(url).scheme == "http":
        _say_nothing_proves_it(model, url, source, sha256)
    elif recorded is not None and sha256 != recorded:
        path.unlink()
        raise HubError(
            f"{path}, downloaded from {source}, has the sha256 {sha256}, but the file first installed "
            f"there had {recorded}: it is deleted and not used. The server (or {MIRROR_VARIABLE}) serves "
            f"another file than the first install's; if its source really replaced the file, delete "
            f"{index.path} (the cache then records each file as it next finds it) and run again."
        )
    return sha256


def _say_nothing_proves_it(model: PublishedModel, url: str, source: str, sha256: str) -> None:
    """Say, at a file's first install, that its source serves it over plain HTTP with no checksum."""
    fetched = "" if source == url else f" (fetched from {source})"
    logger.warning(
        "%s of %r comes from %s%s, served over plain HTTP, and its source publishes no checksum for "
        "it (%s): nothing can prove it is the file its authors published. Its sha256 is %s: the "
        "install records it, and every later install of it must match.",
        file_name(url),
        model.name,
        url,
        fetched,
        model.source,
        sha256,
    )


def _check_md5(model: PublishedModel, path: Path, md5: str | None) -> None:
    """Delete `path` and raise `HubError` when its MD5 is not the one its source publishes."""
    if md5 is None:
        return
    with open(path, "rb") as handle:
        actual = hashlib.file_digest(handle, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()
    if actual != md5:
        path.unlink()
        raise HubError(
            f"{path} has the MD5 {actual}, but {model.source} publishes {md5} for it: the file is "
            "deleted. Run again to download it afresh; if it fails again, the file on the server (or "
            f"on {MIRROR_VARIABLE}) is not the published one."
        )


def _download_or_explain(model: PublishedModel, url: str, path: Path) -> str:
    """Download one file and return the URL it came from (the mirror's, where one is set); on
    failure, say how to get it there without this machine's network."""
    source = mirrored(url)
    logger.info("Downloading %s from %s", path.name, source)
    try:
        download_file(source, path)
        return source
    except DownloadError as error:
        if model.source_format == "elmoformanylangs":
            by_hand = (
                f"download {model.weights_url} elsewhere and place it in {path.parent} under that file "
                f"name; or set {MIRROR_VARIABLE} to a server that holds its path; or unpack it and "
                "convert it with `spacy-elmo convert MODEL_DIR DIR` and use `--paths.elmo DIR`."
            )
        else:
            by_hand = (
                f"download {model.options_url} and {model.weights_url} elsewhere and place them in "
                f"{path.parent} under those file names; or set {MIRROR_VARIABLE} to a server that holds "
                "their paths; or convert the two files with `spacy-elmo convert OPTIONS WEIGHTS DIR` "
                "and use `--paths.elmo DIR`."
            )
        raise DownloadError(f"{error} To install {model.name!r} without network access, {by_hand}") from None


def _read_downloaded(model: PublishedModel, folder: Path, scratch: Path) -> BiLM:
    """The biLM of a model's downloaded files; an archive is extracted under `scratch` first."""
    files = [folder / file_name(url) for url in model.urls]
    if model.source_format == "allennlp":
        return BiLM.from_allennlp(*files)
    extract_archive(files[0], scratch)
    candidates = [scratch, *sorted(path for path in scratch.rglob("*") if path.is_dir())]
    model_dir = next((path for path in candidates if is_elmoformanylangs_dir(path)), None)
    if model_dir is None:
        raise HubError(
            f"{files[0]} holds no ELMoForManyLangs model (a folder with {', '.join(SOURCE_FILES)})."
        )
    return BiLM.from_elmoformanylangs(model_dir)


def _work_folder(target: Path, purpose: str) -> Path:
    """A new folder beside `target` with the umask's permissions, so a shared cache stays readable."""
    return new_folder(target.with_name(f"{STAGING_PREFIX}{target.name}.{purpose}.{os.getpid()}"))


def _convert(model: PublishedModel, root: Path, target: Path) -> None:
    """Convert a model's downloaded files into our model directory at `target`, which appears only
    when complete; an extracted archive is removed again."""
    logger.info("Converting %s to %s (once)", model.name, target)
    staging = _work_folder(target, "staging")
    scratch = _work_folder(target, "extracted")
    retired = target.with_name(f"{STAGING_PREFIX}{target.name}.old")
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
