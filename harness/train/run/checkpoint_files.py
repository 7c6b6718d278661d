"""A checkpoint's manifest: the size and CRC-32 of every file, written last (before the rename
that publishes the checkpoint), so that a truncated or corrupted file is found before it is
loaded (`verify`)."""
from __future__ import annotations

import json
import zlib
from pathlib import Path

MANIFEST = "manifest.json"
REQUIRED = ("config.json", "trainer_state.pt")  # a LoRA checkpoint holds adapter_config.json for config.json


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def write_manifest(folder: Path) -> None:
    files = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "crc32": _crc32(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1, sort_keys=True))


def verify(folder: Path) -> str | None:
    """None if the checkpoint is whole, else what is wrong with it (one phrase)."""
    required = [("adapter_config.json" if n == "config.json" and (folder / "adapter_config.json").is_file() else n)
                for n in REQUIRED]
    missing = [name for name in required if not (folder / name).is_file()]
    if not any(folder.glob("*.safetensors")):
        missing.append("*.safetensors")
    if missing:
        return f"missing {', '.join(missing)}"
    path = folder / MANIFEST
    if not path.is_file():
        return None  # written before manifests existed: loading it is the only check
    try:
        files = json.loads(path.read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return f"unreadable {MANIFEST}"
    for name, want in files.items():
        f = folder / name
        if not f.is_file():
            return f"missing {name}"
        if f.stat().st_size != want["size"]:
            return f"{name} has {f.stat().st_size} bytes, {want['size']} were written (truncated?)"
        if _crc32(f) != want["crc32"]:
            return f"{name} does not match its checksum (corrupted)"
    return None
