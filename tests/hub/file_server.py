"""A local HTTP server in a thread that plays AllenNLP's file server, with faults on request (fixtures)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spacy_elmo.hub import find_published_model
from spacy_elmo.hub.catalog import mirror_path

from ..bilm.random_weights import write_random_elmo


@dataclass
class FileServer:
    """What the server holds (URL path -> bytes), the faults it plays, and what it was asked.

    cut_after: send only this many bytes of a longer answer, then close the connection;
    cuts_left: how many answers are cut that way (then it serves files whole);
    extra_announced: bytes added to Content-Length beyond the real size (a lying server);
    ignore_range: answer every request with the whole file (200);
    hold_after: send only this many bytes of a longer answer, then wait until `release` is set
        before sending the rest (a slow server, or one a client can be killed in the middle of);
    after_cut: called after each answer cut short (to change a file between two attempts);
    send_etag, send_last_modified: the validators each answer carries (both derived from the
        file's bytes, so they change when the file does, as a real server's do);
    honour_if_range: answer a Range request whose If-Range names another version with the whole
        file (200), as HTTP says; False plays a server that ignores If-Range;
    last_modified_on_partial: False leaves Last-Modified out of 206 answers, as HTTP allows.
    """

    root_url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: int | None = None
    cuts_left: int = 0
    extra_announced: int = 0
    ignore_range: bool = False
    hold_after: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    after_cut: Callable[[], None] | None = None
    send_etag: bool = True
    send_last_modified: bool = True
    honour_if_range: bool = True
    last_modified_on_partial: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    if_ranges: list[str | None] = field(default_factory=list)

    def serve(self, url: str, data: bytes) -> None:
        """Serve `data` where a mirror holds the published `url`."""
        self.files["/" + mirror_path(url)] = data

    def publish_archive(self, name: str, members: dict[str, bytes]) -> bytes:
        """Serve an archive of `members` (member name -> bytes) at the URL of model `name`: a zip,
        or a tar archive (any compression) where the URL ends with `.tar.*`."""
        url = find_published_model(name).weights_url
        buffer = io.BytesIO()
        if ".tar" in url:
            with tarfile.open(fileobj=buffer, mode=f"w:{url.rsplit('.', 1)[-1]}") as archive:
                for member, data in members.items():
                    info = tarfile.TarInfo(member)
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
        else:
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for member, data in members.items():
                    archive.writestr(member, data)
        self.serve(url, buffer.getvalue())
        return buffer.getvalue()

    def publish(self, name: str, source: Path) -> tuple[bytes, bytes]:
        """Serve tiny random AllenNLP files at the URLs of published model `name`."""
        options_file, weights_file = write_random_elmo(source / name)
        model = find_published_model(name)
        for url, path in ((model.options_url, options_file), (model.weights_url, weights_file)):
            self.serve(url, path.read_bytes())
        return options_file.read_bytes(), weights_file.read_bytes()


def etag(body: bytes) -> str:
    """The (strong) ETag the server gives `body`."""
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def last_modified(body: bytes) -> str:
    """The Last-Modified date the server gives `body`: one that changes with its bytes."""
    return formatdate(int(hashlib.sha256(body).hexdigest()[:8], 16), usegmt=True)


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            path, asked_range = urlsplit(self.path).path, self.headers.get("Range")
            if_range = self.headers.get("If-Range")
            server.requests.append((path, asked_range))
            server.if_ranges.append(if_range)
            if path not in server.files:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            body = server.files[path]
            start = int(asked_range.removeprefix("bytes=").rstrip("-")) if asked_range else 0
            validators = {
                "ETag": etag(body) if server.send_etag else None,
                "Last-Modified": last_modified(body) if server.send_last_modified else None,
            }
            other_version = if_range is not None and if_range not in validators.values()
            if server.ignore_range or not asked_range or (server.honour_if_range and other_version):
                start, status = 0, HTTPStatus.OK
            elif start >= len(body):
                self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                return
            else:
                status = HTTPStatus.PARTIAL_CONTENT
            if status == HTTPStatus.PARTIAL_CONTENT and not server.last_modified_on_partial:
                validators["Last-Modified"] = None
            self.send_response(status)
            self.send_header("Content-Length", str(len(body) - start + server.extra_announced))
            for header, value in validators.items():
                if value is not None:
                    self.send_header(header, value)
            if status == HTTPStatus.PARTIAL_CONTENT:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.end_headers()
            cut = server.cut_after is not None and len(body) - start > server.cut_after
            if cut and server.cuts_left > 0:
                server.cuts_left -= 1
                body = body[: start + server.cut_after]
                if server.after_cut is not None:
                    server.after_cut()
            self.close_connection = True
            try:
                if server.hold_after is not None and len(body) - start > server.hold_after:
                    self.wfile.write(body[start : start + server.hold_after])
                    self.wfile.flush()
                    server.release.wait()
                    start += server.hold_after
                self.wfile.write(body[start:])
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client is gone (killed mid-transfer, in a test that means to)

    return Handler


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    """A `FileServer` on 127.0.0.1 at a free port, stopped after the test."""
    server = FileServer()
    http_server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    server.root_url = f"http://127.0.0.1:{http_server.server_address[1]}/"
    thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    http_server.shutdown()
    http_server.server_close()


@pytest.fixture
def hub_environment(file_server: FileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileServer:
    """The cache in `tmp_path/cache` and AllenNLP's server replaced by the local one."""
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", file_server.root_url)
    return file_server
