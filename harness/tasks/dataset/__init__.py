"""The dataset task (task.name: dataset): the user's rows, verifiers and reward functions.

read.py    files and folders -> rows (the `datasets` library; JSONL, Parquet, CSV, save_to_disk)
fields.py  dotted paths, prompt templates, chat-message prompts
task.py    DatasetTask: rows -> problems, splits, drawing, scoring
checks.py  the checks before any model loads (reference answers scored as completions)
"""

from harness.tasks.dataset.checks import check_reference_answers
from harness.tasks.dataset.task import DatasetTask

__all__ = ["DatasetTask", "check_reference_answers"]
