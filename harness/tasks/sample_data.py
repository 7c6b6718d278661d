"""The sample dataset: GSM8K-format word problems the project writes itself (nothing downloaded).

    harness sample-data                      # writes results/data/gsm8k_sample/ and math_sample/
    write_samples("results/data")            # the same from Python

Two layouts of the same problems, each a train.jsonl and a test.jsonl:

    gsm8k_sample/  {"question", "answer", "difficulty"}: GSM8K's own fields, the answer a worked
                   solution with GSM8K's calculator annotations ending in "#### N"
                   (task.data: prompt_key question, answer_key answer; verifier gsm8k or number)
    math_sample/   {"problem", "solution", "answer", "level"}: MATH's fields, the solution ending in
                   "$\\boxed{N}$", the answer N alone (verifier math; answer_key answer or solution)

Problems are drawn from templates with a seeded generator (`seed`), so the files are the same on
every machine. Difficulty = the number of arithmetic steps: easy 1, medium 2, hard 3 (GSM8K's
field `difficulty`; MATH's `level` "Level 1".."Level 3"), a third of the rows each. Numbers are
small (answers below 1000) so that a 135M-parameter chat model solves some of each kind: the
SmolLM2 run in experiments/runs/gsm8k_sample.yaml measures how many. Each question is unique;
train and test never share one (test = the rows whose question hashes below TEST_FRACTION).

A path inside DEFAULT_ROOT (results/data) that names one of these files and does not exist yet is
written on first read (harness/tasks/dataset/read.py), so configs can point at it directly.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from harness.atomic import atomic_write_text

DEFAULT_ROOT = Path("results/data")
LAYOUTS = ("gsm8k_sample", "math_sample")
FILES = ("train.jsonl", "test.jsonl")
ROWS = 4000
SEED = 0
TEST_FRACTION = 0.125
LEVELS = {1: "easy", 2: "medium", 3: "hard"}

NAMES = (
    "Tom",
    "Anna",
    "Sam",
    "Lily",
    "Ben",
    "Mia",
    "Leo",
    "Emma",
    "Noah",
    "Ava",
    "Jack",
    "Zoe",
    "Max",
    "Ella",
    "Omar",
    "Nina",
    "Ravi",
    "Sara",
    "Yuki",
    "Ivan",
    "Lucas",
    "Maya",
    "Kofi",
    "Lena",
)
ITEMS = (
    "apples",
    "pencils",
    "books",
    "marbles",
    "stickers",
    "cookies",
    "cards",
    "balloons",
    "shells",
    "stamps",
    "oranges",
    "toy cars",
    "crayons",
    "eggs",
    "flowers",
)


PLAIN_OPS = {"+": "+", "-": "-", "*": "\\times", "/": "\\div"}


class _Steps:
    """The worked solution as it is built: GSM8K lines ("... 3+4 = <<3+4=7>>7 ...") and plain lines."""

    def __init__(self):
        self.gsm8k: list[str] = []
        self.plain: list[str] = []

    def add(self, before: str, a: int, op: str, b: int, result: int, after: str) -> int:
        shown = {"+": "+", "-": "-", "*": "x", "/": "/"}[op]
        self.gsm8k.append(f"{before}{a}{shown}{b} = <<{a}{op}{b}={result}>>{result}{after}")
        self.plain.append(f"{before}{a} {PLAIN_OPS[op]} {b} = {result}{after}")
        return result


def _chain(rng: random.Random, steps: int):
    """Someone's count of one item, changed by `steps` operations (buy, give away, packs = 2, share out last)."""
    name, other = rng.sample(NAMES, 2)
    item = rng.choice(ITEMS)
    s = _Steps()
    start = rng.randint(3, 20)
    text = [f"{name} has {start} {item}."]
    value, left = start, steps
    while left:
        choices = ["add", "sub"] + (["packs"] if left >= 2 else []) + (["share"] if left == 1 and steps > 1 else [])
        kind = rng.choice(choices)
        if kind == "sub" and value < 4:
            kind = "add"
        divisors = [d for d in range(2, 7) if value % d == 0 and value // d >= 2]
        if kind == "share" and not divisors:
            kind = "add"
        if kind == "add":
            x = rng.randint(2, 15)
            text.append(
                rng.choice(
                    [
                        f"{name} buys {x} more {item}.",
                        f"{other} gives {name} {x} {item}.",
                        f"{name} finds {x} more {item}.",
                    ]
                )
            )
            value = s.add(f"Then {name} has ", value, "+", x, value + x, f" {item}.")
        elif kind == "sub":
            x = rng.randint(1, value - 1)
            text.append(
                rng.choice(
                    [
                        f"{name} gives {x} {item} to {other}.",
                        f"{name} loses {x} {item}.",
                        f"{name} uses {x} of the {item}.",
                    ]
                )
            )
            value = s.add(f"Then {name} has ", value, "-", x, value - x, f" {item}.")
        elif kind == "packs":  # two operations
            packs, per = rng.randint(2, 5), rng.randint(2, 6)
            text.append(f"Then {name} buys {packs} packs of {item} with {per} {item} in each pack.")
            got = s.add("The packs hold ", packs, "*", per, packs * per, f" {item}.")
            value = s.add(f"So {name} has ", value, "+", got, value + got, f" {item}.")
            left -= 1
        else:  # share (the last operation): the question changes
            d = rng.choice(divisors)
            text.append(f"{name} shares the {item} equally among {d} friends.")
            value = s.add("Each friend gets ", value, "/", d, value // d, f" {item}.")
            return " ".join(text) + f" How many {item} does each friend get?", s, value
        left -= 1
    return " ".join(text) + f" How many {item} does {name} have now?", s, value


def _money(rng: random.Random, steps: int):
    name = rng.choice(NAMES)
    thing = rng.choice(("notebook", "sandwich", "ticket", "toy", "cup of juice", "comic book"))
    price, count = rng.randint(2, 9), rng.randint(2, 6)
    s = _Steps()
    cost = s.add(f"The {thing}s cost ", count, "*", price, count * price, " dollars.")
    text = [f"A {thing} costs {price} dollars. {name} buys {count} of them."]
    if steps == 1:
        return " ".join(text) + " How many dollars does " + name + " spend?", s, cost
    if steps == 3:
        extra = rng.randint(2, 9)
        text.append(f"{name} also buys a pen for {extra} dollars.")
        cost = s.add("In total that is ", cost, "+", extra, cost + extra, " dollars.")
    bill = next(b for b in (10, 20, 50, 100) if b > cost)
    text.append(f"{name} pays with a {bill} dollar bill.")
    change = s.add(f"{name} gets ", bill, "-", cost, bill - cost, " dollars back.")
    return " ".join(text) + " How many dollars of change does " + name + " get?", s, change


def _pages(rng: random.Random, steps: int):
    name = rng.choice(NAMES)
    per, days = rng.randint(3, 12), rng.randint(2, 7)
    s = _Steps()
    read = s.add(f"{name} reads ", per, "*", days, per * days, " pages.")
    text = [f"{name} reads {per} pages every day for {days} days."]
    if steps == 1:
        return " ".join(text) + f" How many pages does {name} read?", s, read
    if steps == 3:
        more = rng.randint(5, 20)
        text.append(f"On the next day {name} reads {more} more pages.")
        read = s.add("Altogether that is ", read, "+", more, read + more, " pages.")
    total = read + rng.randint(5, 60)
    text.append(f"The book has {total} pages.")
    left = s.add("There are ", total, "-", read, total - read, " pages left.")
    return " ".join(text) + " How many pages are left to read?", s, left


def _ages(rng: random.Random, steps: int):
    a, b = rng.sample(NAMES, 2)
    age, gap = rng.randint(5, 15), rng.randint(2, 9)
    s = _Steps()
    text = [f"{a} is {age} years old. {b} is {gap} years older than {a}."]
    older = s.add(f"{b} is ", age, "+", gap, age + gap, " years old.")
    if steps == 1:
        return " ".join(text) + f" How old is {b}?", s, older
    later = rng.randint(2, 10)
    if steps == 3:  # a third person, then the years
        c, younger = rng.choice([n for n in NAMES if n not in (a, b)]), rng.randint(2, gap + age - 2)
        text.append(f"{c} is {younger} years younger than {b}.")
        c_age = s.add(f"{c} is ", older, "-", younger, older - younger, " years old.")
        value = s.add(f"In {later} years {c} will be ", c_age, "+", later, c_age + later, " years old.")
        return " ".join(text) + f" How old will {c} be in {later} years?", s, value
    value = s.add(f"In {later} years {b} will be ", older, "+", later, older + later, " years old.")
    return " ".join(text) + f" How old will {b} be in {later} years?", s, value


TEMPLATES = (_chain, _chain, _money, _pages, _ages)  # chains twice: most of the variety is there


def generate(rows: int = ROWS, seed: int = SEED) -> list[dict]:
    """`rows` distinct problems, a third of each difficulty: {question, steps (gsm8k lines), plain
    (lines), answer, level}."""
    rng = random.Random(f"sample-gsm8k|{seed}")
    out, seen = [], set()
    while len(out) < rows:
        level = len(out) % 3 + 1
        question, s, value = rng.choice(TEMPLATES)(rng, level)
        if question in seen or not 0 <= value < 1000 or len(s.gsm8k) != level:
            continue
        seen.add(question)
        out.append({"question": question, "gsm8k": s.gsm8k, "plain": s.plain, "answer": value, "level": level})
    return out


def is_test(question: str) -> bool:
    digest = hashlib.sha256(f"sample|{question}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < TEST_FRACTION


def gsm8k_row(p: dict) -> dict:
    return {
        "question": p["question"],
        "answer": "\n".join(p["gsm8k"]) + f"\n#### {p['answer']}",
        "difficulty": LEVELS[p["level"]],
    }


def math_row(p: dict) -> dict:
    solution = " ".join(p["plain"]) + f" The answer is $\\boxed{{{p['answer']}}}$."
    return {"problem": p["question"], "solution": solution, "answer": str(p["answer"]), "level": f"Level {p['level']}"}


def write_samples(root: str | Path = DEFAULT_ROOT, rows: int = ROWS, seed: int = SEED) -> list[Path]:
    """Write both layouts under `root` (atomically, identical bytes on every call); -> the files."""
    root = Path(root)
    problems = generate(rows, seed)
    written = []
    for layout, to_row in (("gsm8k_sample", gsm8k_row), ("math_sample", math_row)):
        for name, test in (("train.jsonl", False), ("test.jsonl", True)):
            lines = [json.dumps(to_row(p)) for p in problems if is_test(p["question"]) == test]
            path = root / layout / name
            atomic_write_text(path, "\n".join(lines) + "\n", only_if_changed=True)
            written.append(path)
    return written


def sample_root_of(path: Path) -> Path | None:
    """The root to write the samples into if `path` names a sample file that is missing, else None."""
    path = Path(path)
    if path.name in FILES and path.parent.name in LAYOUTS and not path.exists():
        if path.parent.parent.resolve() == DEFAULT_ROOT.resolve():
            return path.parent.parent
    if path.name in LAYOUTS and not path.exists() and path.parent.resolve() == DEFAULT_ROOT.resolve():
        return path.parent
    return None
