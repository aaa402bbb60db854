"""The steady-state correction of a GPU timing table's drifting launch floor."""

from __future__ import annotations

import json

import pytest

from tensor_eqsat.cost.recorded import RecordedCostModel, TimingTable, export_table, load_table
from tensor_eqsat.cost.steady import WINDOW, floor_offsets, is_probe, steady_state
from tensor_eqsat.cost.timing_cache import TimingCache


def _drifting_rows(low=0.016, high=0.023):
    """Probes recorded in a low, a high and again a low floor state, with one big conv recorded
    in the middle of each state (the same work: 0.100 ms above the floor)."""
    rows = []
    t = 0.0
    for state, floor in enumerate((low, high, low)):
        for i in range(3 * WINDOW):
            n = 64 * (i + 1) + 8 * state
            rows.append(((f"relu{state}-{i}",), "relu", ((1, n),), floor, t))
            t += 0.01
            if i == 3 * WINDOW // 2:  # the conv in the middle of its state
                x = (1, 64, 56, 56 + state)
                rows.append(((f"conv{state}",), "conv2d", (x, (64, 64, 3, 3)), floor + 0.100, t))
                t += 0.01
    return rows


def test_an_op_recorded_in_the_high_floor_state_loses_the_difference():
    rows = _drifting_rows()
    correction = floor_offsets(rows)
    assert correction.applied and correction.base_ms == pytest.approx(0.016)
    assert correction.offsets[("conv1",)] == pytest.approx(0.007)
    assert ("conv0",) not in correction.offsets and ("conv2",) not in correction.offsets
    entries = {key: ms for key, _, _, ms, _ in rows}
    at = {key: t for key, _, _, _, t in rows}
    decode = {key: (op, shapes) for key, op, shapes, _, _ in rows}
    steady, _ = steady_state(entries, at, decode, device="cuda:Test")
    # The three convs did the same work; in the steady table they cost the same.
    assert steady[("conv0",)] == pytest.approx(steady[("conv1",)]) == pytest.approx(steady[("conv2",)])
    # Probes well inside a state come to the steady floor; near a switch the window mixes states.
    inner = [k for k in steady if k[0].startswith("relu") and WINDOW <= int(k[0].split("-")[1]) < 2 * WINDOW]
    assert inner and all(steady[k] == pytest.approx(0.016) for k in inner)


def test_a_table_without_drift_is_unchanged():
    rows = _drifting_rows(high=0.016)
    assert floor_offsets(rows).offsets == {}


@pytest.mark.parametrize(
    ("device", "times", "reason"),
    [
        ("cpu:Some CPU", True, "CPU table"),
        ("cuda:Test", False, "does not say when"),
    ],
)
def test_the_correction_is_not_made_where_it_cannot_apply(device, times, reason):
    rows = _drifting_rows()
    entries = {key: ms for key, _, _, ms, _ in rows}
    at = {key: t for key, _, _, _, t in rows} if times else None
    decode = {key: (op, shapes) for key, op, shapes, _, _ in rows}
    steady, correction = steady_state(entries, at, decode, device=device)
    assert steady == entries and not correction.applied and reason in correction.reason


def test_too_few_probes_leave_the_table_as_recorded():
    rows = [r for r in _drifting_rows() if r[1] == "conv2d"]
    correction = floor_offsets(rows)
    assert not correction.applied and "probes" in correction.reason and correction.offsets == {}


def test_probes_are_small_elementwise_and_memory_ops():
    assert is_probe("concat", ((1, 64, 7, 7), (1, 64, 7, 7)))
    assert not is_probe("concat", ((1, 512, 56, 56), (1, 512, 56, 56)))
    assert not is_probe("matmul", ((1, 8), (8, 8)))


def _write_cache(tmp_path):
    import sqlite3

    path = tmp_path / "gpu.sqlite"
    with TimingCache(path) as cache:
        cache.put("cuda:Test GPU", "torch 9", "relu", "[]", "[[1,8]]", 0.02, 5)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM op_timings")
    for _, op, shapes, ms, t in _drifting_rows():
        attrs = "[]" if op == "relu" else '[[1,1],"same","none"]'
        shape_text = json.dumps([list(s) for s in shapes], separators=(",", ":"))
        conn.execute(
            "INSERT INTO op_timings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("cuda:Test GPU", "torch 9", op, attrs, shape_text, ms, 15, 1000.0 + t),
        )
    conn.commit()
    conn.close()
    return path


def test_a_recorded_profile_prices_the_steady_times_and_keeps_the_recorded_ones(tmp_path):
    table = load_table(str(_write_cache(tmp_path)))
    assert table.correction is not None and table.correction.applied
    conv = [k for k in table.entries if k[0] == "conv2d"]
    priced = sorted(table.entries[k] for k in conv)
    recorded = sorted(table.as_recorded[k] for k in conv)
    assert priced[-1] == pytest.approx(priced[0])  # the high-state conv is brought down
    assert recorded[-1] == pytest.approx(recorded[0] + 0.007)
    m = RecordedCostModel(table, mode="isolated")
    attrs = ((1, 1), "same", "none")
    x, w = (1, 64, 56, 56), (64, 64, 3, 3)
    assert m.op_cost("conv2d", attrs, (x, w), False) == pytest.approx(0.116)


def test_the_json_export_carries_the_times_and_is_corrected_the_same_way(tmp_path):
    table = load_table(str(_write_cache(tmp_path)))
    out = export_table(table, tmp_path / "gpu.json")
    data = json.loads(out.read_text())
    assert data["columns"] == ["op", "attrs", "shapes", "ms", "recorded_s"]
    assert min(r[4] for r in data["rows"]) == 0.0
    back = load_table(str(out))
    assert back.as_recorded == pytest.approx(table.as_recorded)
    assert back.entries == pytest.approx(table.entries)


def test_held_out_copies_are_corrected_from_what_is_left(tmp_path):
    table = load_table(str(_write_cache(tmp_path)))
    high = {k for k, t in (table.recorded_at or {}).items() if k[0] == "relu" and table.as_recorded[k] > 0.02}
    rest = table.without(frozenset(high))
    assert not high & set(rest.entries)
    # With the high-state probes gone, nothing shows the high state: the conv stays as recorded.
    conv = [k for k in rest.entries if k[0] == "conv2d"]
    assert [rest.entries[k] for k in conv] == [rest.as_recorded[k] for k in conv]


def test_a_json_table_must_time_every_row_or_none(tmp_path):
    from tensor_eqsat.cost.model import CostModelError

    path = tmp_path / "half.json"
    rows = [["relu", "[]", "[[1,8]]", 0.02, 0.0], ["relu", "[]", "[[1,16]]", 0.02]]
    path.write_text(json.dumps({"device": "cuda:X", "rows": rows}))
    with pytest.raises(CostModelError, match=r"half\.json: 1 of 2 rows say when"):
        load_table(str(path))
    path.write_text(json.dumps({"device": "cuda:X", "rows": [["relu", "[]", "[[1,8]]", 0.02, "soon"]]}))
    with pytest.raises(CostModelError, match=r"row 0: the fifth column"):
        load_table(str(path))


def test_the_shipped_h200_profile_is_corrected():
    h200 = load_table("h200")
    c = h200.correction
    assert c is not None and c.applied and c.probes > 300
    assert 0.015 < c.base_ms < 0.018
    assert len(c.offsets) > 0 and max(c.offsets.values()) < 0.012
    assert all(h200.entries[k] <= h200.as_recorded[k] for k in h200.entries)


def test_a_table_built_in_memory_is_left_as_given():
    t = TimingTable("x", "cuda:X", "torch", "test", {("relu", "[]", "[[1,8]]"): 0.02})
    assert t.correction is None and t.as_recorded == t.entries
