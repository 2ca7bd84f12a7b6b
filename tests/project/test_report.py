"""The project's report: mean ± std over seeds and relative error reduction, from eval JSONs."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))  # as `python scripts/report.py` has it
report = importlib.import_module("report")


def write(directory, name, **scores):
    (directory / f"{name}.json").write_text(json.dumps(scores))


def test_table_has_means_stds_and_error_reduction(tmp_path):
    write(tmp_path, "ner__cnn__1.0__seed0", ents_f=0.80)
    write(tmp_path, "ner__cnn__1.0__seed1", ents_f=0.82)
    write(tmp_path, "ner__elmo__1.0__seed0", ents_f=0.85)
    write(tmp_path, "ner__elmo__1.0__seed1", ents_f=0.87)
    write(tmp_path, "parser__cnn__0.1__seed0", dep_las=0.70, dep_uas=0.75)
    table = report.markdown_table(report.collect(tmp_path))
    assert "| (a) CNN tok2vec | 81.00 ± 1.41 (n=2) |" in table
    # baseline error 19, ELMo error 14: 5/19 = 26.3% fewer errors
    assert "| (c) ELMo, frozen biLM | 86.00 ± 1.41 (n=2), RER +26.3% |" in table
    assert "### LAS (parser, EWT test)" in table and "70.00 ± 0.00 (n=1)" in table


def test_gains_are_weighed_against_twice_the_larger_std_over_seeds(tmp_path):
    for seed, (cnn, elmo, elmo_hash) in enumerate([(0.80, 0.85, 0.79), (0.82, 0.87, 0.86)]):
        write(tmp_path, f"ner__cnn__1.0__seed{seed}", ents_f=cnn)
        write(tmp_path, f"ner__elmo__1.0__seed{seed}", ents_f=elmo)
        write(tmp_path, f"ner__elmo_hash__1.0__seed{seed}", ents_f=elmo_hash)
    write(tmp_path, "parser__cnn__0.1__seed0", dep_las=0.70, dep_uas=0.75)
    write(tmp_path, "parser__elmo__0.1__seed0", dep_las=0.72, dep_uas=0.76)
    table = report.gains_table(report.collect(tmp_path))
    # stds: cnn 1.41, elmo 1.41, elmo_hash 4.95; gains +5.00 and +1.50
    assert "| NER F1 | 100% | (c) ELMo, frozen biLM | (a) | +5.00 | 2.83 | yes |" in table
    assert "| NER F1 | 100% | (d) ELMo + hash embeddings | (a) | +1.50 | 9.90 | no |" in table
    assert (
        "| LAS | 10% | (c) ELMo, frozen biLM | (a) | +2.00 | – | n/a (one seed) |" in table
    )  # no std: no bar
    assert "(a) CNN tok2vec |" not in table
    assert "| (b)" not in table  # (b) was not run: no rows against it


def test_elmo_is_weighed_against_both_baselines_and_b_against_a(tmp_path):
    scores = {"cnn": (0.80, 0.82), "cnn_pretrain": (0.84, 0.84), "elmo": (0.85, 0.87)}
    for system, values in scores.items():
        for seed, score in enumerate(values):
            write(tmp_path, f"ner__{system}__0.1__seed{seed}", ents_f=score)
    table = report.gains_table(report.collect(tmp_path))
    # stds: cnn 1.41, cnn_pretrain 0.00, elmo 1.41
    assert "| NER F1 | 10% | (b) CNN + spacy pretrain | (a) | +3.00 | 2.83 | yes |" in table
    assert "| NER F1 | 10% | (c) ELMo, frozen biLM | (a) | +5.00 | 2.83 | yes |" in table
    assert "| NER F1 | 10% | (c) ELMo, frozen biLM | (b) | +2.00 | 2.83 | no |" in table
    assert table.count("| NER F1 |") == 3


def test_gains_table_is_left_out_when_only_a_baseline_ran(tmp_path):
    for seed, score in enumerate([0.80, 0.82]):
        write(tmp_path, f"ner__cnn__0.1__seed{seed}", ents_f=score)
    assert report.gains_table(report.collect(tmp_path)) == ""


def test_claim_table_weighs_each_elmo_system_against_each_baseline_per_fraction(tmp_path):
    # NER F1 per seed (0, 1), at 10% and 100% of the data; parsing for (a) and (d) at 100%, one seed.
    scores = {
        "cnn": {0.1: (0.40, 0.42), 1.0: (0.60, 0.62)},
        "cnn_pretrain": {0.1: (0.44, 0.44), 1.0: (0.63, 0.63)},
        "elmo_hash": {0.1: (0.47, 0.49), 1.0: (0.64, 0.66)},
    }
    for system, by_fraction in scores.items():
        for fraction, values in by_fraction.items():
            for seed, score in enumerate(values):
                write(tmp_path, f"ner__{system}__{fraction}__seed{seed}", ents_f=score)
    write(tmp_path, "parser__cnn__1.0__seed0", dep_las=0.80, dep_uas=0.85)
    write(tmp_path, "parser__elmo_hash__1.0__seed0", dep_las=0.82, dep_uas=0.86)
    table = report.claim_table(report.collect(tmp_path))
    header = "| system | NER F1, 10% | NER F1, 100% | LAS, 100% | NER F1: larger with less data? |"
    assert header + " LAS: larger with less data? |" in table
    # stds 1.41 for (a) and (d), 0 for (b): every bar is 2.83
    assert (
        "| (d) ELMo + hash embeddings over (a) | **+7.00** (2.83) | **+4.00** (2.83) | +2.00 (one seed) "
        "| yes | – |" in table
    )
    assert "| (d) ELMo + hash embeddings over (b) | **+4.00** (2.83) | +2.00 (2.83) | – | yes | – |" in table
    write(tmp_path, "parser__cnn__0.1__seed0", dep_las=0.70, dep_uas=0.75)
    write(tmp_path, "parser__elmo_hash__0.1__seed0", dep_las=0.75, dep_uas=0.80)
    table = report.claim_table(report.collect(tmp_path))
    assert (
        "| +5.00 (one seed) | +2.00 (one seed) | yes | yes (one seed) |" in table
    )  # a verdict without a bar
    assert table.count("| (") == 2  # (c) and the joint pipeline were not run; (b) is no ELMo system


def test_claim_table_says_when_the_gain_with_less_data_is_not_larger_and_shows_a_near_tie(tmp_path):
    rows = [(0.50, 0.51, 0.60, 0.70), (0.52, 0.53, 0.62, 0.72)]  # every std 1.41
    for seed, (cnn_10, elmo_10, cnn_100, elmo_100) in enumerate(rows):
        write(tmp_path, f"ner__cnn__0.1__seed{seed}", ents_f=cnn_10)
        write(tmp_path, f"ner__elmo__0.1__seed{seed}", ents_f=elmo_10)
        write(tmp_path, f"ner__cnn__1.0__seed{seed}", ents_f=cnn_100)
        write(tmp_path, f"ner__elmo__1.0__seed{seed}", ents_f=elmo_100)
    table = report.claim_table(report.collect(tmp_path))
    assert "| (c) ELMo, frozen biLM over (a) | +1.00 (2.83) | **+10.00** (2.83) | no |" in table
    assert "LAS" not in table  # no parser runs: no LAS columns
    assert report._claim_cell(report.Gain(4.1749, 4.1721)) == "**+4.175** (4.172)"
    assert report._claim_cell(report.Gain(4.1721, 4.1749)) == "+4.172 (4.175)"
    assert report.claim_table(report.collect(tmp_path / "none")) == ""


def test_plots_are_written(tmp_path):
    for seed, score in enumerate([0.6, 0.62]):
        write(tmp_path, f"ner__cnn__0.1__seed{seed}", ents_f=score)
        write(tmp_path, f"ner__cnn__1.0__seed{seed}", ents_f=score + 0.2)
    written = report.plot_scores(report.collect(tmp_path), tmp_path)
    assert [path.name for path in written] == ["ner_ents_f_by_fraction.png"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_fraction_gives_a_bar_per_system(tmp_path):
    for seed, score in enumerate([0.80, 0.81]):
        write(tmp_path, f"parser__cnn__1.0__seed{seed}", dep_las=score, dep_uas=score + 0.05)
        write(tmp_path, f"parser__elmo_hash__1.0__seed{seed}", dep_las=score + 0.02, dep_uas=score + 0.06)
    written = report.plot_scores(report.collect(tmp_path), tmp_path)
    assert [path.name for path in written] == ["parser_dep_las_by_system.png", "parser_dep_uas_by_system.png"]
    assert all(path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for path in written)


def test_bar_plot_legend_covers_no_bar_and_every_error_bar_is_inside_the_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import Bbox

    # A tall first bar, in the corner where a legend inside the axes would sit.
    points = {"cnn": [(1.0, (90.0, 1.5))], "elmo": [(1.0, (60.0, 0.5))], "elmo_hash": [(1.0, (61.0, 0.5))]}
    figure, axes = plt.subplots()
    report._bars_by_system(axes, points)
    figure.canvas.draw()
    legend_box = axes.get_legend().get_window_extent()
    for bar in axes.patches:  # the part of each bar the axes show
        shown = Bbox.intersection(bar.get_window_extent(), axes.get_window_extent())
        assert shown is not None and not legend_box.overlaps(shown)
    bottom, top = axes.get_ylim()
    assert all(bottom < mean - std and mean + std < top for [(_, (mean, std))] in points.values())
    plt.close(figure)


@pytest.mark.parametrize("draw", ["_lines_by_fraction", "_bars_by_system"])
def test_a_system_has_the_same_colour_whichever_systems_a_plot_holds(draw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex
    from matplotlib.container import BarContainer

    colours = {}
    for systems in (["cnn", "cnn_pretrain", "elmo", "elmo_hash"], ["cnn", "elmo_hash"]):
        figure, axes = plt.subplots()
        getattr(report, draw)(axes, {system: [(1.0, (80.0 + i, 0.5))] for i, system in enumerate(systems)})
        for container in axes.containers:  # one per system: its error bars' line, or its bar
            if container.get_label() in report.SYSTEMS.values():
                drawn = (
                    container.patches[0].get_facecolor()
                    if isinstance(container, BarContainer)
                    else container.lines[0].get_color()
                )
                colours.setdefault(container.get_label(), set()).add(to_hex(drawn))
        plt.close(figure)
    assert len(colours) == 4 and all(len(found) == 1 for found in colours.values())


def test_mix_weight_plot_reads_the_grids_mix_files_and_the_table_ignores_them(tmp_path):
    write(tmp_path, "ner__elmo__1.0__seed0", ents_f=0.85)
    mix = {"ner": {"weights": [0.2, 0.5, 0.3], "gamma": 1.1}}
    (tmp_path / "ner__elmo__1.0__seed0.mix.json").write_text(json.dumps(mix))
    (tmp_path / "parser__elmo__1.0__seed0.mix.json").write_text(json.dumps({"parser": mix["ner"]}))
    assert list(report.collect(tmp_path)) == [("ner", "ents_f", "elmo", 1.0)]
    path = report.plot_mix_weights(report.collect_mixes(tmp_path), tmp_path)
    assert path.name == "mix_weights.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot_mix_weights({}, tmp_path) is None


def test_a_report_of_no_runs_says_where_it_looked_and_writes_nothing(tmp_path, monkeypatch):
    report_path = tmp_path / "out" / "report.md"
    monkeypatch.setattr(sys, "argv", ["report.py", str(tmp_path), str(report_path)])
    with pytest.raises(SystemExit, match="No evaluation files") as error:
        report.main()
    assert str(tmp_path) in str(error.value)
    assert not report_path.parent.exists()


def test_mix_table_has_each_systems_mean_layer_weights_per_fraction(tmp_path):
    for seed, (weights, gamma) in enumerate([([0.2, 0.5, 0.3], 1.0), ([0.4, 0.3, 0.3], 1.5)]):
        mix = {"parser": {"weights": weights, "gamma": gamma}}
        (tmp_path / f"parser__elmo__0.1__seed{seed}.mix.json").write_text(json.dumps(mix))
    mix = {"ner": {"weights": [0.1, 0.1, 0.8], "gamma": 2.0}}
    (tmp_path / "ner__elmo_hash__1.0__seed0.mix.json").write_text(json.dumps(mix))
    table = report.mix_table(report.collect_mixes(tmp_path))
    assert "| task | system | train | token | LSTM 1 | LSTM 2 | gamma | n |" in table
    assert "| parser | (c) ELMo, frozen biLM | 10% | 0.30 | 0.40 | 0.30 | 1.25 | 2 |" in table
    assert "| ner | (d) ELMo + hash embeddings | 100% | 0.10 | 0.10 | 0.80 | 2.00 | 1 |" in table
    assert table.index("| ner |") < table.index("| parser |")
    assert report.mix_table(report.collect_mixes(tmp_path / "empty")) == ""


def test_provenance_names_each_systems_weights_and_counts_unrecorded_runs(tmp_path):
    def record(name, minutes, cpu="Xeon", **weights):
        entry = {"command": "python -m spacy train ...", "max_steps": 2000, "minutes": minutes, "cpu": cpu}
        entry.update({key: {"path": path, "sha256": sha * 64} for key, (path, sha) in weights.items()})
        (tmp_path / f"{name}.run.json").write_text(json.dumps(entry))

    for seed in range(2):
        write(tmp_path, f"ner__cnn_pretrain__1.0__seed{seed}", ents_f=0.6)
        write(tmp_path, f"ner__elmo__1.0__seed{seed}", ents_f=0.6)
    write(tmp_path, "ner__cnn__1.0__seed0", ents_f=0.5)
    record("ner__cnn_pretrain__1.0__seed0", 4.2, pretrained_tok2vec=("models/cnn-pretrain/model4.bin", "a"))
    record("ner__cnn_pretrain__1.0__seed1", 5.1, pretrained_tok2vec=("models/cnn-pretrain/model4.bin", "a"))
    record("ner__elmo__1.0__seed0", 3.9, bilm=("models/bilm-ewt", "b"))
    record("ner__elmo__1.0__seed1", 4.0, cpu="EPYC", bilm=("models/bilm-other", "c"))
    for task in ("ner", "parser"):  # two runs of (a), one per task, with the same seed and fraction
        write(tmp_path, f"{task}__cnn__0.1__seed0", ents_f=0.5, dep_las=0.6)
        record(f"{task}__cnn__0.1__seed0", 3.0 if task == "ner" else 20.0)
    for task in ("ner", "parser"):  # one joint run, scored for both tasks
        write(tmp_path, f"{task}__elmo_joint__0.1__seed0", ents_f=0.6, dep_las=0.7)
        record(f"{task}__elmo_joint__0.1__seed0", 13.0, bilm=("models/bilm-ewt", "b"))
    assert sorted(report.collect(tmp_path)) == [
        ("ner", "ents_f", "cnn", 0.1),
        ("ner", "ents_f", "cnn", 1.0),
        ("ner", "ents_f", "cnn_pretrain", 1.0),
        ("ner", "ents_f", "elmo", 1.0),
        ("ner", "ents_f", "elmo_joint", 0.1),
        ("parser", "dep_las", "cnn", 0.1),
        ("parser", "dep_las", "elmo_joint", 0.1),
    ]  # the records are not scores
    table = report.provenance_table(tmp_path)
    # (a): its NER and parser runs of one seed and fraction are two runs; one of three has no record
    assert "| (a) CNN tok2vec | 3 | 2 | – | – | 2000 | Xeon | 3.0–20.0 |" in table
    pretrained = "`models/cnn-pretrain/model4.bin` (aaaaaaaaaaaa)"
    assert f"| (b) CNN + spacy pretrain | 2 | 2 | – | {pretrained} | 2000 | Xeon | 4.2–5.1 |" in table
    bilms = "`models/bilm-ewt` (bbbbbbbbbbbb); `models/bilm-other` (cccccccccccc)"
    assert f"| (c) ELMo, frozen biLM | 2 | 2 | {bilms} | – | 2000 | EPYC; Xeon | 3.9–4.0 |" in table
    joint = "| joint NER+parser, one ELMo | 1 | 1 | `models/bilm-ewt` (bbbbbbbbbbbb) | – | 2000 | Xeon |"
    assert f"{joint} 13.0–13.0 |" in table
    assert table.index("(a)") < table.index("(b)") < table.index("(c)") < table.index("joint")


def write_ood(directory, name, **scores):
    (directory / f"{name}.ood.json").write_text(json.dumps(scores))


def test_out_of_domain_gains_are_weighed_as_in_domain_and_compared_with_them(tmp_path):
    for seed, (cnn, elmo) in enumerate([(0.80, 0.85), (0.82, 0.87)]):
        write(tmp_path, f"ner__cnn__1.0__seed{seed}", ents_f=cnn)
        write(tmp_path, f"ner__elmo__1.0__seed{seed}", ents_f=elmo)
        write_ood(tmp_path, f"ner__cnn__1.0__seed{seed}", ents_f=cnn - 0.20)
        write_ood(tmp_path, f"ner__elmo__1.0__seed{seed}", ents_f=elmo - 0.12)
    runs, ood_runs = report.collect(tmp_path), report.collect(tmp_path, ".ood.json")
    assert runs[("ner", "ents_f", "cnn", 1.0)] == pytest.approx([80.0, 82.0])  # .ood.json stays out
    assert ood_runs[("ner", "ents_f", "elmo", 1.0)] == pytest.approx([73.0, 75.0])
    table = report.out_of_domain_table(runs, ood_runs)
    # out of domain: 74 - 61 = +13 (bar 2.83), in domain +5 (2.83): larger out of domain
    assert (
        "| NER F1 | 100% | (c) ELMo, frozen biLM | (a) | **+13.00** (2.83) | **+5.00** (2.83) | yes |"
        in table
    )
    assert "LAS" not in table  # no parsing runs out of domain
    assert report.out_of_domain_table(runs, {}) == ""
    assert "### NER F1 (ner, out of domain" in report.markdown_table(ood_runs, "out of domain")


def test_the_domain_plot_puts_each_system_in_domain_against_out_of_domain(tmp_path):
    write(tmp_path, "parser__cnn__1.0__seed0", dep_las=0.80, dep_uas=0.85)
    write_ood(tmp_path, "parser__cnn__1.0__seed0", dep_las=0.70, dep_uas=0.75)
    path = report.plot_domains(report.collect(tmp_path), report.collect(tmp_path, ".ood.json"), tmp_path)
    assert path.name == "in_vs_out_of_domain.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot_domains(report.collect(tmp_path), {}, tmp_path) is None
