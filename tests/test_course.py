"""The course as a learner needs it, read from the notebooks' sources (nothing executes here):
one path per notebook, a prediction before every measured step, the tiers defined before the
first measurement, no measured number typed into the prose, nothing cited that a reader does not
have; and each row of the 2026-12-05 expert audit, checked where the fix can be seen in a source
(the behaviour behind the others is tested in test_results_lesson.py and test_clocks.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fusedkit import problems, report

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
COURSE = ["01_p12_simt", "02_p12_hopper", "03_p45", "04_small_batches", "05_precision_lab", "06_results"]


def cells(stem: str) -> list[dict]:
    return json.loads(NOTEBOOKS[stem].read_text())["cells"]


def source(stem: str, kind: str | None = None) -> str:
    return "\n".join("".join(c["source"]) for c in cells(stem) if kind in (None, c["cell_type"]))


def test_the_course_is_six_notebooks_committed_without_outputs():
    assert list(NOTEBOOKS) == COURSE
    for stem in COURSE:
        dirty = [i for i, c in enumerate(cells(stem)) if c["cell_type"] == "code"
                 and (c.get("outputs") or c.get("execution_count"))]
        assert not dirty, f"{stem}: cells {dirty} carry outputs"


@pytest.mark.parametrize("stem", COURSE)
def test_a_notebook_opens_with_its_parameters_then_pickers_reading_them(stem):
    code = [c for c in cells(stem) if c["cell_type"] == "code"]
    assert code[0]["metadata"].get("tags") == [report.PARAMETERS_TAG]
    assert "".join(code[0]["source"]).startswith("SIZES = {}")
    first = "".join(code[1]["source"])
    assert first.count("SizePicker(") == len(re.findall(r"SizePicker\([^()]*(?:\([^()]*\))?[^()]*sizes=SIZES\.get\(", first)) > 0


@pytest.mark.parametrize("stem", COURSE)
def test_the_contents_list_is_the_headings(stem):
    text = source(stem, "markdown")
    listed = re.findall(r"^\d+\. (.+)$", text.split("**Contents**", 1)[1].split("\n\n", 1)[0], re.M)
    headings = re.findall(r"^## \d+\. (.+)$", text, re.M)
    assert listed == headings


def test_every_ladder_step_is_shown_once_with_a_prediction():
    shown: dict[str, set[str]] = {"p12": set(), "p45": set()}
    for stem in COURSE:
        for call in re.findall(r"\b(?:page\d?|pg)\.step\((.*?)\)\n(?=\S|$)", source(stem, "code") + "\n", re.S):
            assert "predict=" in call, f"{stem}: a step without a prediction: {call[:80]}"
            key = "p45" if stem == "03_p45" else "p12"
            shown[key] |= set(re.findall(r'"(\w+)"', call.split("predict=")[0].split(", counters")[0]))
    shown["p45"] |= {"faithful_by_batch"}   # notebook 04 shows both problems' by-batch steps in one loop
    for key, seen in shown.items():
        missing = [v.slug for v in problems.get(key).ladder() if v.slug not in seen]
        assert not missing, f"{key}: steps no notebook shows: {missing}"


def test_the_tiers_and_the_roundings_come_before_the_first_measurement():
    nb = cells("01_p12_simt")
    first_step = next(i for i, c in enumerate(nb) if ".step(" in "".join(c["source"]))
    defined = next(i for i, c in enumerate(nb) if "| `fp32-faithful` |" in "".join(c["source"]))
    split = next(i for i, c in enumerate(nb) if "fp16x3" in "".join(c["source"]) and c["cell_type"] == "code")
    assert defined < split < first_step
    assert all(f"| `{tier}` |" in "".join(nb[defined]["source"]) for tier in ("reference", "fp32-faithful",
                                                                              "kb-pass", "fast"))


# -- no measured number typed into the prose -------------------------------------------------------

UNITS = r"(?:ms|µs|us|%|TFLOP/s|GB/s|TB/s|GiB|MiB|MB|GB|KB)"
MEASURED = re.compile(rf"(?<![\w.^⁻])(?:\d+(?:\.\d+)?\s?{UNITS}(?![\w/])|\d+(?:\.\d+)?[x×](?![\w\d]))")
LABELLED = re.compile(r"predict|expect|should|datasheet|allow", re.IGNORECASE)


def typed_numbers(text: str) -> list[str]:
    """Measured-looking numbers (a time, a rate, a share, a speed-up) in markdown ``text``,
    code spans left out, in sentences that do not say they are a prediction or a datasheet value."""
    text = re.sub(r"`[^`]*`", " ", re.sub(r"```.*?```", " ", text, flags=re.S))
    return [m.group(0) for s in re.split(r"(?<=[.!?;])\s+", text) for m in MEASURED.finditer(s)
            if not LABELLED.search(s)]


def test_the_pattern_catches_a_typed_measurement_and_passes_a_labelled_one():
    assert typed_numbers("Step 7 took 3.504 ms, 0.78x eager.") == ["3.504 ms", "0.78x"]
    assert typed_numbers("The datasheet gives 4.8 TB/s. A prediction of 2.7 ms. `9 ms` in code.") == []


@pytest.mark.parametrize("stem", COURSE)
def test_prose_carries_no_typed_in_measurement(stem):
    assert typed_numbers(source(stem, "markdown")) == []


@pytest.mark.parametrize("stem", COURSE)
def test_a_lesson_cites_nothing_a_reader_does_not_have(stem):
    text = source(stem)
    assert not re.search(r"/work/|shared/|reviews?/|audit", text)
    assert not re.findall(r"(?<![\w./])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w])", source(stem, "markdown"))


# -- the audit's rows --------------------------------------------------------------------------------

def test_h1_m1_m2_clocks_are_read_over_each_timed_loop_alone():
    """One clocks computation (lesson.clock_table, over each row's own window), in notebook 01
    only; no page reads another run's readings or a whole run's median any more."""
    assert "lesson.clock_table(" in source("01_p12_simt", "code")
    for stem in COURSE:
        code = source(stem, "code")
        assert not re.search(r"clocks\.(of_run|summarize|readings_of|readings_beside|problem_runs)", code), stem
        assert "cannot be reached by any kernel" not in source(stem)


def test_m3_the_timed_against_profiled_gap_is_called_unexplained():
    assert "not explained here" in source("02_p12_hopper", "markdown")


def test_m4_no_page_says_recorded_minus_profiled():
    assert not any("recorded − profiled" in source(stem) for stem in COURSE)


def test_m6_the_by_batch_range_has_one_definition_everywhere():
    for stem in ("04_small_batches", "06_results"):
        assert "results.by_batch_range(" in source(stem, "code"), stem


def test_l1_the_descriptor_hint_says_which_fields_count_16_byte_units():
    text = source("02_p12_hopper", "markdown")
    assert "the three address fields" in text and "the swizzle mode is a\ncode" in text.replace("a code", "a\ncode")


def test_l2_l3_the_precision_lab_says_a_common_scale_does_not_average_away_and_computes_the_tail():
    assert "does not average away" in source("05_precision_lab", "markdown")
    assert "np.sqrt(2 * np.log(1024 * 8192))" in source("05_precision_lab", "code")


def test_l4_l5_l6_the_cuda_core_steps_cite_boehm_right_and_leave_open_what_is_open():
    text = source("01_p12_simt", "markdown")
    assert "double buffering is kernels\n11 and 12" in text or "double buffering is kernels 11 and 12" in text
    assert "It is unexplained." in text
    assert "bound by L1 wavefronts" in source("03_p45", "markdown")


def test_l7_l8_the_small_batch_page_names_the_wide_steps_from_the_records():
    assert "spread wide in some sweep" in source("04_small_batches", "code")
    assert "it is not\nrecorded here" in source("04_small_batches", "markdown") or \
           "it is not recorded here" in source("04_small_batches", "markdown")


def test_l11_l12_the_results_page_splits_ceilings_by_shape_and_kernelbench_both_ways():
    assert "KernelBench's shapes (compute-bound)" in source("06_results", "code")
    assert "can go either way" in source("06_results", "markdown")
    assert "speedup\"] > 10" in source("06_results", "code")


def test_l13_the_shown_kernel_carries_no_hash_or_unshown_share():
    text = (ROOT / "fusedkit" / "kernels" / "p45" / "hopper_lse.cuh").read_text()   # step 07's mainloop
    comment = text[text.index("The epilogue's loads go out now"):text.index("const auto params")]
    assert not re.search(r"\d+%|[0-9a-f]{7}", comment)


def test_l14_each_change_is_judged_against_the_step_it_changes():
    code = source("02_p12_hopper", "code")
    for slug, base in (("wgmma_fp16x3_fused_split", "wgmma_fp16x3"), ("wgmma_fp16x3_multicast", "wgmma_fp16x3")):
        call = code.split(f'page.step("{slug}"', 1)[1].split("\n\n", 1)[0]
        assert f'against="{base}"' in call
    assert "both lose time" not in source("02_p12_hopper")
