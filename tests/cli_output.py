"""What a training command writes on stderr: its progress lines (``fewshot/training/progress.py``: what trains
where, the data split, a line per checkpoint, the test) and, when it stops, its one line saying why.
"""

import re

PROGRESS = re.compile(r"^(data: .*|[^:]+: (training .+ on .+|\w+ \d+/\d+, .*|testing .*))$")


def error_lines(stderr: str) -> list[str]:
  """The non-empty lines of ``stderr`` that are not progress lines; a command that stopped leaves exactly one,
  its last line.
  """
  lines = [line for line in stderr.splitlines() if line.strip()]
  kept = [line for line in lines if not PROGRESS.match(line)]
  assert not kept or kept[-1] == lines[-1], f"progress after the last message:\n{stderr[-3000:]}"
  return kept

