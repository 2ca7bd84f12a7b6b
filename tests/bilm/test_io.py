"""Weight files: AllenNLP HDF5 in and out bit for bit, our safetensors format, clear errors."""

from __future__ import annotations

import json
import os
import stat

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import PRESETS, BiLM, ConfigError, WeightFileError
from spacy_elmo.bilm.io import atomic, model_dir
from spacy_elmo.bilm.io.state_dict import softmax_head_state_dict_shapes

from .random_weights import TINY_OPTIONS, write_random_elmo

SENTENCES = [["Weights", "go", "out", "and", "back", "."], ["again"]]


def read_hdf5(path):
    arrays = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, item: arrays.__setitem__(name, item[...]) if isinstance(item, h5py.Dataset) else None
        )
    return arrays


def test_export_reproduces_the_imported_file_bit_for_bit(random_elmo_files, tmp_path):
    options_file, weight_file = random_elmo_files
    BiLM.from_allennlp(options_file, weight_file).to_allennlp(
        tmp_path / "options.json", tmp_path / "weights.hdf5"
    )
    original, exported = read_hdf5(weight_file), read_hdf5(tmp_path / "weights.hdf5")
    assert exported.keys() == original.keys()
    for name, array in original.items():
        assert exported[name].dtype == np.float32 and exported[name].shape == array.shape, name
        assert np.array_equal(exported[name], array), name
    assert json.loads((tmp_path / "options.json").read_text()) == TINY_OPTIONS


def test_import_of_an_export_gives_identical_parameters(tmp_path):
    trained = BiLM(BiLM.from_allennlp(*write_random_elmo(tmp_path / "a", seed=3)).config)  # fresh init
    trained.to_allennlp(tmp_path / "o.json", tmp_path / "w.hdf5")
    reloaded = BiLM.from_allennlp(tmp_path / "o.json", tmp_path / "w.hdf5")
    for name, tensor in trained.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name


def test_native_directory_round_trip(bilm, tmp_path):
    bilm.save(tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json", "model.safetensors"]
    loaded = BiLM.load(tmp_path / "model")
    assert loaded.config == bilm.config
    for name, tensor in bilm.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    for before, after in zip(bilm.embed_sentences(SENTENCES), loaded.embed_sentences(SENTENCES)):
        assert np.array_equal(before, after)


def test_native_config_holds_allennlp_options(bilm, tmp_path):
    bilm.save(tmp_path / "model")
    document = json.loads((tmp_path / "model" / "config.json").read_text())
    assert document["format"] == "spacy-elmo-bilm" and document["options"] == TINY_OPTIONS


def test_failed_save_keeps_the_previous_model_and_leaves_no_temporary_files(bilm, tmp_path, monkeypatch):
    bilm.save(tmp_path / "model")
    before = (tmp_path / "model" / "model.safetensors").read_bytes()

    def broken_save(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("safetensors.torch.save_file", broken_save)  # atomic imports it when saving
    with pytest.raises(OSError, match="disk full"):
        BiLM(bilm.config).save(tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json", "model.safetensors"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_writes_get_the_modes_of_new_files_without_touching_the_umask(tmp_path, monkeypatch, umask):
    """Other threads may create files meanwhile: the umask is read by the kernel, never set."""
    previous = os.umask(umask)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(os, "umask", lambda mask: pytest.fail("atomic writes changed the umask"))
            atomic.atomic_write_text(tmp_path / "written.txt", "text")
            atomic.atomic_save_tensors(tmp_path / "written.safetensors", {"x": torch.zeros(2)})
        reference = tmp_path / "plain.txt"
        reference.write_text("text")
    finally:
        os.umask(previous)
    for name in ("written.txt", "written.safetensors"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o666 & ~umask == stat.S_IMODE(reference.stat().st_mode), name
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "plain.txt",
        "written.safetensors",
        "written.txt",
    ]


def test_missing_dataset_is_named(random_elmo_files, tmp_path):
    options_file, weight_file = random_elmo_files
    broken = tmp_path / "broken.hdf5"
    with h5py.File(broken, "w") as target:
        for name, array in read_hdf5(weight_file).items():
            if name != "CNN_high_1/W_carry":
                target.create_dataset(name, data=array)
    with pytest.raises(WeightFileError, match="no dataset 'CNN_high_1/W_carry'"):
        BiLM.from_allennlp(options_file, broken)


def test_wrong_shape_names_dataset_and_both_shapes(random_elmo_files, tmp_path):
    options_file, weight_file = random_elmo_files
    broken = tmp_path / "broken.hdf5"
    with h5py.File(broken, "w") as target:
        for name, array in read_hdf5(weight_file).items():
            target.create_dataset(name, data=array[:-1] if name == "CNN_proj/b_proj" else array)
    with pytest.raises(WeightFileError, match=r"'CNN_proj/b_proj' has shape \(7,\).*describe \(8,\)"):
        BiLM.from_allennlp(options_file, broken)


def test_options_that_do_not_match_the_weights(random_elmo_files, tmp_path):
    _, weight_file = random_elmo_files
    fewer_highways = json.loads(json.dumps(TINY_OPTIONS))
    fewer_highways["char_cnn"]["n_highway"] = 1
    (tmp_path / "o1.json").write_text(json.dumps(fewer_highways))
    with pytest.raises(WeightFileError, match="'CNN_high_1/.*' that the options do not describe"):
        BiLM.from_allennlp(tmp_path / "o1.json", weight_file)
    wider = json.loads(json.dumps(TINY_OPTIONS))
    wider["lstm"]["dim"] = 32
    (tmp_path / "o2.json").write_text(json.dumps(wider))
    with pytest.raises(WeightFileError, match="does not match the weights"):
        BiLM.from_allennlp(tmp_path / "o2.json", weight_file)


def test_unreadable_weight_files(random_elmo_files, tmp_path):
    options_file, _ = random_elmo_files
    with pytest.raises(WeightFileError, match="does not exist"):
        BiLM.from_allennlp(options_file, tmp_path / "missing.hdf5")
    (tmp_path / "junk.hdf5").write_bytes(b"not hdf5")
    with pytest.raises(WeightFileError, match="not a readable HDF5"):
        BiLM.from_allennlp(options_file, tmp_path / "junk.hdf5")


def test_native_directory_errors(bilm, tmp_path):
    with pytest.raises(ConfigError, match="config.json is missing.*spacy-elmo convert OPTIONS WEIGHTS"):
        BiLM.load(tmp_path)
    bilm.save(tmp_path / "model")
    (tmp_path / "model" / "model.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(WeightFileError, match="not a readable safetensors"):
        BiLM.load(tmp_path / "model")


def test_native_weights_of_another_shape_are_named(bilm, tmp_path):
    bilm.save(tmp_path / "model")
    other = BiLM(bilm.config.replace(lstm_dim=12))
    model_dir.save_model_dir(tmp_path / "other", other.config, other.state_dict())
    (tmp_path / "model" / "model.safetensors").write_bytes(
        (tmp_path / "other" / "model.safetensors").read_bytes()
    )
    with pytest.raises(WeightFileError, match="forward_lstm.layers.0.input_weight' has shape"):
        BiLM.load(tmp_path / "model")


def test_written_files_follow_the_umask_not_mkstemps_private_mode(bilm, tmp_path):
    import os

    previous = os.umask(0o022)
    try:
        bilm.save(tmp_path / "model")
    finally:
        os.umask(previous)
    assert (tmp_path / "model" / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "model" / "config.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_expected_shapes_come_from_a_meta_model_without_random_init(preset):
    config = PRESETS[preset]
    generator_state = torch.get_rng_state()
    shapes = BiLM.state_dict_shapes(config)
    assert torch.equal(torch.get_rng_state(), generator_state)
    assert shapes == {name: tuple(tensor.shape) for name, tensor in BiLM(config).state_dict().items()}
    assert softmax_head_state_dict_shapes(7, config.projection_dim) == {
        "weight": (7, config.projection_dim),
        "bias": (7,),
    }
