"""One local Ray cluster for every Ray test (starting one takes seconds), a tiny biLM, and a tiny
trained pipeline (elmo, ner and parser listening to it) on disk, as workers load them."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import spacy
from spacy.training import Example

from ...pipeline.conftest import (
    TRAIN_DATA,
    listener_config,
    loader_config,
    parser_model_config,
    saved_tiny_bilm,
)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3 API server on 127.0.0.1 (moto's), pointed at by the standard AWS variables of this
    process and of everything it starts (the Ray cluster below, the commands): as a user points
    spacy-elmo at S3, MinIO or any other S3 store. Yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's line per request
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    settings = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    yield endpoint
    server.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def ray_cluster(s3_server: str) -> Iterator[str]:
    """A 2-CPU local cluster joined by this process; yields its address for subprocesses. Its
    workers see the S3 server (they inherit the environment of the process that starts it)."""
    ray = pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
    context = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield context.address_info["address"]
    ray.shutdown()


@pytest.fixture(scope="session")
def bilm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_tiny_bilm(tmp_path_factory, "ray_bilm")


@pytest.fixture(scope="session")
def pipeline_path(tmp_path_factory: pytest.TempPathFactory, bilm_path: Path) -> Path:
    """elmo, and ner and parser listening to it (initialized, not trained), then an entity ruler
    so that the rows surely have entities."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.add_pipe("ner", config=parser_model_config("ner", listener_config()))
    nlp.add_pipe("parser", config=parser_model_config("parser", listener_config()))
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_path)
    examples = []
    for text, entities in TRAIN_DATA:
        doc = nlp.make_doc(text)
        tree = {"heads": [0] * len(doc), "deps": ["ROOT"] + ["attr"] * (len(doc) - 1)}
        examples.append(Example.from_dict(doc, {**entities, **tree}))
    nlp.initialize(lambda: examples)
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "LOC", "pattern": city} for city in ("Berlin", "Paris", "London")])
    path = tmp_path_factory.mktemp("ray_pipeline") / "pipeline"
    nlp.to_disk(path)
    return path
