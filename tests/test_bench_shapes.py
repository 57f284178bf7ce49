"""benchmarks/bench_shapes.py: its ratios are paired repetition by repetition, and its table says what it measured.

The sides are replaced by fakes with known chunk times (the real workers run in the README-commands test, slow tier).
"""

import pytest

from benchmarks import bench_shapes

ROW = dict(bench_shapes.ROWS["5w1s16q-28"], episodes=10)


class FakeSide:
  """Chunk times per side: new's drift upward with the 'load'; old is always 1.5× new's, torch 0.8× of it."""

  scale = {"new": 1.0, "old": 1.5, "torch": 0.8}

  def __init__(self, name, side, tree, row):
    self.name, self.calls = name, 0
    self.facts = {"first_call_s": 5.0, "cores": 2, **({"gflop_per_episode": 4.0, "peak_gflops": 200.0}
                                                      if row.get("count_flops") else {})}

  def chunk(self):
    self.calls += 1
    return self.scale[self.name] * (1.0 + 0.5 * self.calls)  # 1.5, 2.0, 2.5, ... times the side's scale

  def close(self):
    pass


def test_ratios_are_paired_and_the_table_names_each_side(monkeypatch):
  monkeypatch.setattr(bench_shapes, "Side", FakeSide)
  result = bench_shapes.measure("5w1s16q-28", ROW, {"new": ".", "old": "old", "torch": "."}, repeats=3)
  sides = result["sides"]
  assert sides["new"]["chunk_s"] == [1.5, 2.0, 2.5]
  assert sides["new"]["ms_per_episode"] == pytest.approx(200.0)  # the median chunk, 2.0 s, over 10 episodes
  assert sides["old"]["new_speedup"] == pytest.approx(1.5) and sides["torch"]["new_speedup"] == pytest.approx(0.8)
  assert sides["new"]["compile_s"] == pytest.approx(3.0) and sides["torch"]["compile_s"] is None
  assert sides["new"]["peak_fraction"] == pytest.approx(4.0 * 10 / 2.0 / 200.0)
  table = bench_shapes.table([result])
  assert table.splitlines()[0] == ("| row | new ms/ep (peak) | compile s | old ms/ep | old / new | torch ms/ep | "
                                   "torch / new |")
  assert "| 5w1s16q-28 | 200.0 (10%) | 3.0 | 300.0 | 1.50 | 160.0 | 0.80 |" in table


def test_a_group_row_counts_every_run_s_episodes(monkeypatch):
  monkeypatch.setattr(bench_shapes, "Side", FakeSide)
  result = bench_shapes.measure("group3-28", dict(bench_shapes.ROWS["group3-28"], episodes=10), {"new": "."}, 1)
  assert result["sides"]["new"]["ms_per_episode"] == pytest.approx(1.5 / 30 * 1e3)


def test_unknown_rows_are_refused_in_one_line(capsys):
  with pytest.raises(SystemExit):
    bench_shapes.parse_args(["--rows", "5w1s16q-28,60w"])
  assert "unknown --rows 60w; choose among 5w1s16q-28" in capsys.readouterr().err
