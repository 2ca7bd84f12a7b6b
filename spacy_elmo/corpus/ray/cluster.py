"""Ray itself: imported quietly for a run's time only, a cluster joined (or started, and shut
down with its session folder) with a one-line error when it cannot be, and an error raised in a
worker brought back as our one line."""

from __future__ import annotations

import functools
import logging
import re
import shutil
import signal
import socket
import threading
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from ...bilm.errors import ElmoError

INSTALL_HINT = 'pip install "spacy-elmo[ray]"'
CONNECT_TIMEOUT_S = 10.0
# the last line of a worker's traceback that is one of our errors: "spacy_elmo.x.SomeError: message"
WORKER_ERROR = re.compile(r"^spacy_elmo\.[\w.]+?Error: (.+)$", re.MULTILINE)
RAY_LOGGERS = ("ray", "ray.data")
# the levels of Ray's loggers as the running `leaves_ray_as_found` call found them
found_levels: ContextVar[dict[str, int] | None] = ContextVar("found_levels", default=None)
Run = TypeVar("Run", bound=Callable[..., Any])
# the session folders (/tmp/ray/session_*) of the local clusters `connect` started in this process
STARTED_SESSIONS: list[str] = []


class RayEngineError(ElmoError, RuntimeError):
    """Ray is missing, the cluster cannot be joined, or a run failed on it."""


def import_ray() -> Any:
    """Ray Data, quiet: it logs only errors (our progress bar and summary speak instead). Within
    `leaves_ray_as_found`, for that call's time only."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise RayEngineError(f"--engine ray needs Ray Data, not installed here: {INSTALL_HINT}.") from None
    found = found_levels.get()
    for name in RAY_LOGGERS:
        logger = logging.getLogger(name)
        if found is not None:
            found.setdefault(name, logger.level)
        logger.setLevel(logging.ERROR)
    # Ray Data's advice when a small input cannot keep every worker busy: our runs size themselves
    warnings.filterwarnings(
        "ignore", message=r"The (maximum|minimum) number of concurrent", category=UserWarning
    )
    return ray


def leaves_ray_as_found(run: Run) -> Run:
    """`run` quiets Ray (`import_ray`) for its own time: when it returns or raises, Ray's loggers
    are at the levels it found them at (those Ray set on its import, if `run` imported it) and
    the process's warning filters are the ones it found, as the user's program set them."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        found: dict[str, int] = {}
        scope = found_levels.set(found)
        try:
            with warnings.catch_warnings():
                return run(*args, **kwargs)
        finally:
            found_levels.reset(scope)
            for name, level in found.items():
                logging.getLogger(name).setLevel(level)

    return wrapper  # type: ignore[return-value]


def check_reachable(address: str) -> None:
    """A `HOST:PORT` address must parse and accept a connection within seconds; Ray itself
    would retry for minutes. "auto" and `ray://` addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayEngineError(
            f"--address {address!r} is not HOST:PORT (the head node's address, as `ray start --head` "
            "prints it, e.g. 10.0.0.5:6379), nor auto."
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise RayEngineError(
            f"Cannot join the Ray cluster at {address}: nothing answers there ({error.strerror or error}). "
            "Start one with `ray start --head` on that machine, or leave out --address to start a local "
            "cluster."
        ) from None


def connect(ray: Any, address: str | None) -> None:
    """Join the cluster at `address` ("auto": the one `ray start` runs on this machine), or start
    a local one; a process already connected (a notebook, a test) keeps its cluster."""
    if ray.is_initialized():
        return
    if address is not None:
        check_reachable(address)
    # ray.init replaces the process's SIGTERM handler with its own (sys.exit): the program's stays
    main_thread = threading.current_thread() is threading.main_thread()
    sigterm_handler = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        context = ray.init(
            address=address or "local",
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except (ConnectionError, ValueError) as error:
        raise RayEngineError(
            f"Cannot join the Ray cluster at {address}: {str(error).rstrip('.')}. Start one with "
            "`ray start --head`, or leave out --address to start a local cluster."
        ) from None
    except Exception as error:  # noqa: BLE001  ray.init raises a plain Exception when a node cannot start
        if address is not None:
            raise
        raise RayEngineError(
            f"Cannot start a local Ray cluster: {str(error).splitlines()[0].rstrip('.')}. Its processes "
            "write logs under /tmp/ray: check that its disk has room and that the file size limit "
            "(ulimit -f) allows them."
        ) from None
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, sigterm_handler)
    if address is None:
        STARTED_SESSIONS.append(context.address_info["session_dir"])


def shut_down_started_cluster() -> None:
    """Stop the local cluster `connect` started in this process, if it did, and remove its
    session folder (logs and sockets under /tmp/ray), which Ray would leave to pile up."""
    if not STARTED_SESSIONS:
        return
    import ray

    ray.shutdown()
    for folder in STARTED_SESSIONS:
        shutil.rmtree(folder, ignore_errors=True)
    STARTED_SESSIONS.clear()


def worker_error(error: Exception) -> Exception:
    """Our own error (a bad row, a model that does not load) as raised in the worker, as our one
    line; else Ray's error. The public way first: the task error's `cause`, which Ray sends back
    whole (Ray Data too, as the engine asks it to with `raise_original_map_exception`). A
    Dataset the user made keeps its own DataContext, where Ray Data wraps the error in a
    `UserCodeException` that carries only the traceback's text: there our line is read off it."""
    import ray.exceptions

    cause = error.cause if isinstance(error, ray.exceptions.RayTaskError) else None
    if isinstance(cause, ElmoError):
        # Ray Data appends its advice about retries to the message, after our line
        return RayEngineError(str(cause).splitlines()[0])
    messages = WORKER_ERROR.findall(str(error))
    return RayEngineError(messages[-1]) if messages else error
