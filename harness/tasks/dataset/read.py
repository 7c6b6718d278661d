"""Reading a dataset file or folder into rows (plain dicts), with the `datasets` library.

    rows, columns = read_rows("data/gsm8k/train.jsonl", fmt="auto", split="train", key="task.data.train")

Formats (`task.data.format`, default auto: from the name):
    json     .jsonl / .json (JSON Lines, or one JSON array), optionally .gz / .bz2 / .xz / .zst
    parquet  .parquet (verl's files: a prompt that is a list of chat messages, nested columns)
    csv      .csv / .tsv
    arrow    a folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk` (a
             DatasetDict's split is chosen by task.data.train_split / eval_split)
A folder that `save_to_disk` did not write is read as the files inside it (every file of the
one format found, sorted by name). Several paths (a list) are read as one table.

Nothing is downloaded: the library runs with HF_DATASETS_OFFLINE=1, its cache goes to a
temporary folder removed after reading (nothing is written under ~/.cache), and the rows are
kept in memory. A read is memoised per process on (paths, size, mtime), so the check before
training and the run read a file once each process. A missing path that names a file of the
sample dataset under results/data is written first (harness/tasks/sample_data.py).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import stat
import tempfile
from pathlib import Path

from harness.tasks.sample_data import sample_root_of, write_samples

FORMATS = ("auto", "json", "parquet", "csv", "arrow")
_SUFFIXES = {
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
_FORMAT_NAMES = {"json": "JSON Lines / JSON", "parquet": "Parquet", "csv": "CSV", "arrow": "a save_to_disk folder"}
_MEMO: dict = {}
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": None}


_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_a_file(path: str | os.PathLike, folder_ok: bool = False) -> str | None:
    """What an existing `path` is when it is not a regular file ("a named pipe", "a socket", "a character
    device", ...; a folder too unless folder_ok), from os.stat without opening it: opening a named pipe waits
    for a writer and /dev/zero never ends. None for a regular file, an allowed folder, or a missing path."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    return next((what for test, what in _KINDS if test(mode)), "a special file")


def check_regular(path: str | os.PathLike, key: str, folder_ok: bool = False) -> None:
    """ValueError naming `key` and `path` when it exists but is not a regular file (nor an allowed folder)."""
    what = not_a_file(path, folder_ok)
    if what is not None:
        allowed = "a regular file or a folder" if folder_ok else "a regular file"
        raise ValueError(f"{key}={str(path)!r} is {what}, not a regular file; allowed: {allowed}")


def _datasets():
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def format_of(path: Path) -> str | None:
    """json | parquet | csv | arrow from a path's name (None: cannot tell)."""
    if path.is_dir():
        if (
            (path / "dataset_info.json").exists()
            or (path / "dataset_dict.json").exists()
            or (path / "state.json").exists()
        ):
            return "arrow"
        found = {format_of(p) for p in path.iterdir() if p.is_file() and not p.name.startswith(".")} - {None}
        return found.pop() if len(found) == 1 else None
    name = path.name.lower()
    for c in _COMPRESSED:
        name = name.removesuffix(c)
    return _SUFFIXES.get(Path(name).suffix)


def _files(path: Path, fmt: str) -> list[str]:
    if path.is_dir():
        return sorted(str(p) for p in path.iterdir() if p.is_file() and format_of(p) == fmt)
    return [str(path)]


def _cause(err: BaseException) -> str:
    """The innermost message of an exception chain, on one line."""
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__
    return f"{type(err).__name__}: {' '.join(str(err).split())}"[:300]


def stat_key(paths: list[Path]) -> tuple:
    out = []
    for p in paths:
        files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        out += [(str(q), q.stat().st_size, q.stat().st_mtime_ns) for q in files]
    return tuple(out)


def fingerprint(paths: str | list[str]) -> str:
    """sha256 over the bytes of every file of `paths` (folders: every file inside, by name): the data's
    identity in cache keys (warm start, step-0 eval, pass rates), so an edited file is never stale."""
    h = hashlib.sha256()
    for p in [Path(x) for x in ([paths] if isinstance(paths, str) else paths)]:
        files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for q in files:
            h.update(str(q.relative_to(p) if p.is_dir() else q.name).encode())
            with open(q, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def check_utf8(files: list[str], key: str) -> None:
    """ValueError naming `key`, the file and the line of the first byte that is not UTF-8 (JSON Lines and CSV
    are read as UTF-8 text; a compressed file's lines once decompressed, but for .zst)."""
    for f in files:
        opener = _OPENERS.get(Path(f.lower()).suffix, open)
        if opener is None:
            continue  # .zst: read by the library only
        n, line = 0, b""
        try:
            with opener(f, "rb") as fh:
                for line in fh:
                    n += 1
                    line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{key}: {f} line {n} is not UTF-8 text (byte {line[err.start]:#04x} at column "
                f"{err.start + 1}); save the file as UTF-8 (iconv -f <its encoding> -t utf-8)"
            ) from None
        except (OSError, EOFError, lzma.LZMAError):
            continue  # a broken archive: the reader names it ("does not parse")


def read_rows(paths: str | list[str], fmt: str, split: str, key: str, split_key: str) -> tuple[list[dict], list[str]]:
    """(rows, column names) of a file, folder or list of them; ValueError naming `key` when a path is
    missing, the format unknown or the file does not parse."""
    given = [paths] if isinstance(paths, str) else list(paths)
    if not given:
        raise ValueError(f"{key}=[]: name at least one file or folder")
    ps = [Path(p) for p in given]
    for p in ps:
        root = sample_root_of(p)
        if root is not None:  # the sample dataset, not written yet: the project writes it itself
            write_samples(root)
            print(f"[harness] wrote the sample dataset into {root} (harness sample-data)", flush=True)
        if not p.exists():
            raise ValueError(f"{key}={str(p)!r} does not exist (relative paths are read from {os.getcwd()})")
        check_regular(p, key, folder_ok=True)
    kinds = {p: (fmt if fmt != "auto" else format_of(p)) for p in ps}
    for p, kind in kinds.items():
        if kind is None:
            raise ValueError(
                f"{key}={str(p)!r}: cannot tell its format from the name; set task.data.format "
                f"(one of {', '.join(FORMATS[1:])})"
            )
    if len(set(kinds.values())) > 1:
        raise ValueError(f"{key}: the paths have different formats ({sorted(set(kinds.values()))}); give one format")
    kind = kinds[ps[0]]
    memo = (stat_key(ps), kind, split)
    if memo not in _MEMO:
        if kind in ("json", "csv"):
            check_utf8([f for p in ps for f in _files(p, kind)], key)
        _MEMO[memo] = _read(ps, kind, split, key, split_key)
    rows, columns = _MEMO[memo]
    return [dict(r) for r in rows], list(columns)


def _blank(file: str) -> bool:
    """Whether a data file holds nothing but white space (read only when it is small)."""
    size = Path(file).stat().st_size
    return size == 0 or (size < 4096 and not Path(file).read_bytes().strip())


def _read(ps: list[Path], kind: str, split: str, key: str, split_key: str) -> tuple[list[dict], list[str]]:
    ds_lib = _datasets()
    shown = str(ps[0]) if len(ps) == 1 else str([str(p) for p in ps])
    blank = kind != "arrow" and all(_blank(f) for p in ps for f in _files(p, kind))
    if blank and any(_files(p, kind) for p in ps):  # datasets would say only StopIteration
        raise ValueError(f"{key}={shown!r} is empty: no rows")
    try:
        if kind == "arrow":
            if len(ps) > 1:
                raise ValueError("several save_to_disk folders")
            ds = ds_lib.load_from_disk(str(ps[0]), keep_in_memory=True)
            if isinstance(ds, ds_lib.DatasetDict):
                if split not in ds:
                    raise KeyError(split)
                ds = ds[split]
        else:
            files = [f for p in ps for f in _files(p, kind)]
            if not files:
                raise ValueError(f"no {_FORMAT_NAMES[kind]} files inside")
            kwargs = {"delimiter": "\t"} if kind == "csv" and all(f.endswith(".tsv") for f in files) else {}
            with tempfile.TemporaryDirectory(prefix="harness-datasets-") as cache:
                ds = ds_lib.load_dataset(
                    kind, data_files=files, split="train", cache_dir=cache, keep_in_memory=True, **kwargs
                )
    except KeyError:
        splits = list(ds_lib.load_from_disk(str(ps[0])).keys())
        raise ValueError(f"{split_key}={split!r} is not a split of {key}={shown!r}; its splits: {splits}") from None
    except Exception as err:  # noqa: BLE001 -- datasets/pyarrow raise many kinds; one line for the user
        raise ValueError(f"{key}={shown!r} does not parse as {_FORMAT_NAMES[kind]} ({_cause(err)})") from None
    return ds.to_list(), list(ds.column_names)
