"""The GPU path: the biLM, the spaCy component (outputs handed to Thinc on the device) and a
pretraining step on CUDA give what the CPU gives. Skipped, with the reason, where there is no GPU;
run them wherever one is available (`python -m pytest tests/test_cuda.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import batch_to_ids
from spacy_elmo.training.metrics import METRICS_FILE

from .pipeline.conftest import TINY_CONFIG, loader_config, tiny_bilm

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none"
)
SENTENCES = [["The", "bank", "raised", "rates", "."], ["Ok"], ["naïve", "café", "😀"]]


@needs_cuda
def test_the_biLM_gives_the_cpu_layers_on_cuda() -> None:
    bilm = tiny_bilm()
    char_ids = batch_to_ids(SENTENCES, TINY_CONFIG.max_characters_per_token)
    with torch.no_grad():
        on_cpu, _ = bilm(char_ids)
        on_gpu, _ = bilm.to("cuda")(char_ids.to("cuda"))
    np.testing.assert_allclose(on_gpu.cpu().numpy(), on_cpu.numpy(), rtol=1e-4, atol=1e-5)


@needs_cuda
def test_the_component_keeps_its_layers_on_the_gpu_and_matches_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("cupy", reason="spaCy's GPU ops need cupy")
    import spacy

    tiny_bilm().save(tmp_path / "bilm")
    texts = [" ".join(sentence) for sentence in SENTENCES]

    def layers_of(use_gpu: bool) -> list[np.ndarray]:
        if use_gpu:
            spacy.require_gpu()
        try:
            nlp = spacy.blank("en")
            nlp.add_pipe("elmo")
            nlp.config["initialize"]["components"]["elmo"] = loader_config(tmp_path / "bilm")
            nlp.initialize()
            docs = [nlp.make_doc(text) for text in texts]
            outputs = nlp.get_pipe("elmo").predict(docs)
            if use_gpu:
                assert all(type(output).__module__.startswith("cupy") for output in outputs)
                nlp.get_pipe("elmo").set_annotations(docs, outputs)
                for doc, output in zip(docs, outputs):  # listeners read the device array itself,
                    assert doc._.elmo.device_layers is output  # users get numpy on request
                    assert isinstance(doc._.elmo.layers, np.ndarray)
                    np.testing.assert_array_equal(doc._.elmo.layers, output.get())
            return [nlp.get_pipe("elmo").model.ops.to_numpy(output) for output in outputs]
        finally:
            if use_gpu:
                spacy.require_cpu()

    for on_gpu, on_cpu in zip(layers_of(True), layers_of(False)):
        np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)


@needs_cuda
def test_a_pretraining_run_on_the_gpu_learns(tmp_path: Path) -> None:
    from spacy_elmo.training import load_pretrain_config, pretrain

    text = tmp_path / "train.txt"
    text.write_text("\n".join(" ".join(sentence) for sentence in SENTENCES * 40) + "\n", encoding="utf8")
    config_path = Path(__file__).resolve().parent.parent / "configs" / "pretrain_tiny.cfg"
    overrides = {"paths.train": str(text), "paths.dev": str(text), "training.max_steps": 30}
    result = pretrain(load_pretrain_config(config_path, overrides), tmp_path / "run", gpu_id=0)
    assert next(result.objective.parameters()).device.type == "cuda"
    records = [json.loads(line) for line in (tmp_path / "run" / METRICS_FILE).read_text().splitlines()]
    assert records[0]["step"] == 0 and records[-1]["step"] == 30
    assert records[-1]["dev_perplexity"] < 0.95 * records[0]["dev_perplexity"]  # 12.0 -> 9.9 on a CPU
