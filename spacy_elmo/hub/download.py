"""Fetch one URL into one file: streamed with a progress bar, resumable, atomic, length-checked.

The bytes go to `<target>.part`, which is renamed to `<target>` only once complete. A transfer
cut short is resumed with an HTTP Range request, both on the next attempt within one call and
on a later call. A resume never splices two versions of a file: the version's validators (its
ETag and Last-Modified date, as the answer that began the transfer gave them) are kept beside
the `.part` file, and the Range request carries `If-Range`, so a server whose file changed sends
the new version whole (200), which is read from the start. A server that ignores Range (200)
is read from the start too; one that answers 206 with other validators (it ignored If-Range)
has its partial file dropped and is read again; and a partial file whose server gave neither
validator is not resumed, as nothing could tell whether the file changed.
The standard library's urllib does all of this; no HTTP client dependency is needed.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
from dataclasses import asdict, dataclass
from email.message import Message
from http import HTTPStatus
from pathlib import Path
from typing import BinaryIO
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from tqdm import tqdm

from ..bilm.io.atomic import atomic_write_text
from .errors import DownloadError

PARTIAL_SUFFIX = ".part"
VALIDATORS_SUFFIX = ".validators"
CHUNK_BYTES = 1 << 20
TIMEOUT_SECONDS = 60.0
ATTEMPTS = 3
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; Windows creates no symbolic links unasked
logger = logging.getLogger(__name__)


class InterruptedTransfer(Exception):
    """A transfer that stopped early but may be resumed (internal: retried, then reported)."""


@dataclass(frozen=True)
class Validators:
    """What names one version of a file: its URL, and the ETag and Last-Modified date its server
    gave it (None where the server gives none)."""

    url: str
    etag: str | None
    last_modified: str | None

    @classmethod
    def of(cls, url: str, headers: Message) -> Validators:
        return cls(url, headers.get("ETag"), headers.get("Last-Modified"))

    @property
    def if_range(self) -> str | None:
        """What `If-Range` asks for this version by: a strong ETag, else the Last-Modified date
        (HTTP allows no weak ETag there); None where neither is known."""
        if self.etag is not None and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified

    def contradicts(self, known: Validators) -> bool:
        """Whether these (a resumed answer's) name another version than `known`: a validator both
        give that differs (a 206 need not repeat Last-Modified)."""
        pairs = ((self.etag, known.etag), (self.last_modified, known.last_modified))
        return any(mine is not None and theirs is not None and mine != theirs for mine, theirs in pairs)


def partial_path(target: Path) -> Path:
    """Where the bytes of `target` collect until the transfer is complete."""
    return target.with_name(target.name + PARTIAL_SUFFIX)


def validators_path(partial: Path) -> Path:
    """Where the validators of the version a partial file holds are kept."""
    return partial.with_name(partial.name + VALIDATORS_SUFFIX)


def _read_validators(partial: Path) -> Validators | None:
    """The validators of the version `partial` holds; None if unknown (or the record unreadable)."""
    try:
        return Validators(**json.loads(validators_path(partial).read_text(encoding="utf8")))
    except (OSError, ValueError, TypeError):
        return None


def _discard(partial: Path) -> None:
    """Remove a partial file and the record of its version."""
    partial.unlink(missing_ok=True)
    validators_path(partial).unlink(missing_ok=True)


def download_file(url: str, target: Path, *, attempts: int = ATTEMPTS) -> None:
    """Download `url` to `target`, trying up to `attempts` times, each resuming the last.

    Raises `DownloadError` naming the URL when the server cannot be reached, answers an HTTP
    error, or keeps sending fewer bytes than it announced; a partial file is kept for resuming.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(target)
    interruption = InterruptedTransfer(f"{url}: no attempt was made")
    for attempt in range(1, attempts + 1):
        try:
            _transfer(url, partial, label=target.name)
        except InterruptedTransfer as error:
            logger.warning("%s (attempt %d of %d).", error, attempt, attempts)
            interruption = error
            continue
        validators_path(partial).unlink(missing_ok=True)
        os.replace(partial, target)
        return
    kept = f" {partial} is kept: run again to resume." if partial.exists() else ""
    raise DownloadError(f"{interruption} (after {attempts} attempts).{kept}")


def _resume_point(url: str, partial: Path) -> tuple[int, Validators | None]:
    """Where to resume `partial` from, and the validators of the version it holds: from its end
    where that version is known by a validator, else from the first byte."""
    if partial.is_symlink():
        logger.warning("%s is a link, not a file of this cache: removing the link.", partial)
        _discard(partial)
    size = partial.stat().st_size if partial.exists() else 0
    if size == 0:
        return 0, None
    known = _read_validators(partial)
    if known is None or known.url != url or known.if_range is None:
        logger.warning(
            "%s: the %s bytes in %s cannot be resumed safely (no ETag or Last-Modified of this URL "
            "is known for the version they came from): downloading from the first byte.",
            url,
            f"{size:,}",
            partial,
        )
        return 0, None
    return size, known


def _transfer(url: str, partial: Path, *, label: str) -> None:
    """One request: append to `partial` from where it ends if the file is the version it began
    with, or rewrite it if the server starts over."""
    offset, known = _resume_point(url, partial)
    with _open(url, offset, known, partial) as response:
        if response.status != HTTPStatus.PARTIAL_CONTENT:
            offset = 0  # a full answer (200): a new version, the server ignored Range, or none was asked
        elif known is not None and Validators.of(url, response.headers).contradicts(known):
            _discard(partial)
            raise InterruptedTransfer(f"{url}: the file changed on the server since its transfer began")
        elif not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            _discard(partial)
            raise InterruptedTransfer(f"{url}: the server resumed at another byte than {offset:,}")
        if offset == 0:
            record = asdict(Validators.of(url, response.headers))
            atomic_write_text(validators_path(partial), json.dumps(record) + "\n")
        announced = response.headers.get("Content-Length")
        expected = offset + int(announced) if announced is not None else None
        with (
            _open_partial(partial, append=offset > 0) as sink,
            tqdm(
                total=expected, initial=offset, desc=label, unit="B", unit_scale=True, disable=None
            ) as progress,
        ):
            while chunk := _read_chunk(response, url):
                sink.write(chunk)  # a full disk is an OSError for the caller, not a broken transfer
                sink.flush()  # what arrived is on disk for a resume, even after `kill -9`
                progress.update(len(chunk))
    received = partial.stat().st_size
    if expected is not None and received != expected:
        raise InterruptedTransfer(
            f"{url}: received {received:,} bytes where the server announced {expected:,}"
        )


def _open_partial(partial: Path, *, append: bool) -> BinaryIO:
    """`partial` opened to append to or to rewrite, never through a link (one planted there
    since it was checked fails to open, and its target is left alone)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC) | NO_FOLLOW
    return os.fdopen(os.open(partial, flags, 0o666), "ab" if append else "wb")


def _read_chunk(response: http.client.HTTPResponse, url: str) -> bytes:
    """The next bytes of the body as they arrive, up to `CHUNK_BYTES` (empty at its end); a broken
    connection may be resumed."""
    try:
        return response.read1(CHUNK_BYTES)
    except (OSError, http.client.HTTPException) as error:
        raise InterruptedTransfer(f"{url}: the connection broke ({error})") from None


def _open(url: str, offset: int, known: Validators | None, partial: Path) -> http.client.HTTPResponse:
    """The server's response, asking for the bytes from `offset` on of the version `known` when
    some are there already."""
    headers = {"Range": f"bytes={offset}-", "If-Range": known.if_range} if offset and known else {}
    try:
        return urlopen(Request(url, headers=headers), timeout=TIMEOUT_SECONDS)
    except HTTPError as error:
        error.close()
        if error.code == HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE:
            _discard(partial)
            raise InterruptedTransfer(f"{url}: the server cannot resume at byte {offset:,}") from None
        if error.code >= HTTPStatus.INTERNAL_SERVER_ERROR:
            raise InterruptedTransfer(f"{url}: the server answered HTTP {error.code}") from None
        raise DownloadError(f"{url}: the server answered HTTP {error.code} {error.reason}.") from None
    except (URLError, OSError) as error:
        reason = error.reason if isinstance(error, URLError) else error
        raise DownloadError(f"{url} cannot be reached ({reason}).") from None
