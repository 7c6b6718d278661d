"""The dataset task (task.name: dataset): the user's rows, verifiers and reward functions.

read.py    files and folders -> rows (the `datasets` library; JSONL, Parquet, CSV, save_to_disk)
fields.py  dotted paths, prompt templates, chat-message prompts
task.py    DatasetTask: task.data's defaults, the splits, drawing, the Task contract
splits.py  files -> the train and eval splits (where, field checks, unique ids, hash split, shuffle, overlap)
problem.py one row -> a Problem (prompt text or messages, answer, difficulty, solution, id; each checked)
rewards.py DatasetRewards: verifiers, functions and reward models, normalised and summed
checks.py  the checks before any model loads (reference answers scored as completions)
"""

from harness.tasks.dataset.checks import check_reference_answers
from harness.tasks.dataset.task import DatasetTask

__all__ = ["DatasetTask", "check_reference_answers"]
