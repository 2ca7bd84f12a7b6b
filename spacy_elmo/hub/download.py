"""Fetch one URL into one file: streamed with a progress bar, resumable, atomic, length-checked.

The bytes go to `<target>.part`, which is renamed to `<target>` only once complete. A transfer
cut short is resumed with an HTTP Range request, both on the next attempt within one call and
on a later call; a server that ignores Range (answering 200) is read again from the start.
The standard library's urllib does all of this; no HTTP client dependency is needed.
"""

from __future__ import annotations

import http.client
import logging
import os
from http import HTTPStatus
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from tqdm import tqdm

from .errors import DownloadError

PARTIAL_SUFFIX = ".part"
CHUNK_BYTES = 1 << 20
TIMEOUT_SECONDS = 60.0
ATTEMPTS = 3
logger = logging.getLogger(__name__)


class InterruptedTransfer(Exception):
    """A transfer that stopped early but may be resumed (internal: retried, then reported)."""


def partial_path(target: Path) -> Path:
    """Where the bytes of `target` collect until the transfer is complete."""
    return target.with_name(target.name + PARTIAL_SUFFIX)


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
        os.replace(partial, target)
        return
    kept = f" {partial} is kept: run again to resume." if partial.exists() else ""
    raise DownloadError(f"{interruption} (after {attempts} attempts).{kept}")


def _transfer(url: str, partial: Path, *, label: str) -> None:
    """One request: append to `partial` from where it ends, or rewrite it if the server starts over."""
    offset = partial.stat().st_size if partial.exists() else 0
    with _open(url, offset, partial) as response:
        if response.status != HTTPStatus.PARTIAL_CONTENT:
            offset = 0  # a full answer (200): the server ignored Range or none was asked
        elif not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            partial.unlink()
            raise InterruptedTransfer(f"{url}: the server resumed at another byte than {offset:,}")
        announced = response.headers.get("Content-Length")
        expected = offset + int(announced) if announced is not None else None
        with (
            open(partial, "ab" if offset else "wb") as sink,
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


def _read_chunk(response: http.client.HTTPResponse, url: str) -> bytes:
    """The next bytes of the body as they arrive, up to `CHUNK_BYTES` (empty at its end); a broken
    connection may be resumed."""
    try:
        return response.read1(CHUNK_BYTES)
    except (OSError, http.client.HTTPException) as error:
        raise InterruptedTransfer(f"{url}: the connection broke ({error})") from None


def _open(url: str, offset: int, partial: Path) -> http.client.HTTPResponse:
    """The server's response, asking for the bytes from `offset` on when some are there already."""
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        return urlopen(Request(url, headers=headers), timeout=TIMEOUT_SECONDS)
    except HTTPError as error:
        error.close()
        if error.code == HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE:
            partial.unlink(missing_ok=True)
            raise InterruptedTransfer(f"{url}: the server cannot resume at byte {offset:,}") from None
        if error.code >= HTTPStatus.INTERNAL_SERVER_ERROR:
            raise InterruptedTransfer(f"{url}: the server answered HTTP {error.code}") from None
        raise DownloadError(f"{url}: the server answered HTTP {error.code} {error.reason}.") from None
    except (URLError, OSError) as error:
        reason = error.reason if isinstance(error, URLError) else error
        raise DownloadError(f"{url} cannot be reached ({reason}).") from None
