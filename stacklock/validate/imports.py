"""Import each module named in ``[validate] imports`` inside the venv, one process
each, and explain a failure.

The failure that costs days when unnamed: ``sgl_kernel`` (or ``flashinfer``) raising
``ImportError: .../common_ops.abi3.so: undefined symbol: _ZN3c10...``. The extension
was compiled against another torch than the one installed; the C++ ABI of libtorch
changes between releases, so the fix is a pair of wheels that agree, not a rebuild of
the venv. The diagnosis names both wheels, their versions and CUDA labels, and the
torch the extension's metadata asks for.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.native.demangle import demangle
from stacklock.native.installed import explain_missing_soname
from stacklock.validate.checks import FAIL, PASS, SKIP, CheckResult, needs_driver
from stacklock.validate.probes import PROBE_SCRIPT, last_json, probe_env

if TYPE_CHECKING:
    from stacklock.lock import Lock

__all__ = ["cause_line", "check_imports", "diagnose_import"]

_UNDEFINED = re.compile(r"(?P<lib>[^\s:]+\.so[^\s:]*): undefined symbol: (?P<sym>\S+)")
_CANNOT_OPEN = re.compile(
    r"(?P<soname>[^\s:/]+\.so[^\s:/]*): cannot open shared object")
_NAMED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ")
TORCH_EXTENSIONS = ("sgl_kernel", "sglang_kernel", "flashinfer", "flash_attn",
                    "vllm", "deep_gemm", "torchvision", "torchaudio")


def _label(version: str | None) -> str:
    """``2.11.0+cu130`` -> ``cu130``; ``0.3.21`` -> ``""``."""
    try:
        return Version(version).local or "" if version else ""
    except InvalidVersion:
        return ""


def _describe(name: str, dists: dict[str, Any], lock: Lock | None) -> str:
    installed = next((d for d in dists.get("distributions", [])
                      if canonicalize_name(d["name"]) == canonicalize_name(name)), None)
    version = installed["version"] if installed else None
    locked = lock.package(name) if lock is not None else None
    text = f"{name} {version or '(not installed)'}"
    cuda = locked.cuda if locked and locked.cuda else None
    label = _label(version)
    if cuda:
        text += f" (CUDA {cuda})"
    elif label:
        text += f" ({label})"
    if locked is not None and locked.version is not None and version is not None \
            and str(locked.version) != version:
        text += f", locked {locked.version}"
    return text


def _torch_pin(dist_name: str, dists: dict[str, Any]) -> str | None:
    """The torch requirement in the extension's own METADATA, if it states one."""
    for dist in dists.get("distributions", []):
        if canonicalize_name(dist["name"]) != canonicalize_name(dist_name):
            continue
        for text in dist.get("requires", []):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) == "torch" and req.marker is None:
                return str(req)
    return None


def _texts(result: dict[str, Any]) -> list[str]:
    """The message, then each exception behind it, innermost last."""
    return [str(result.get("message", "")),
            *(str(c) for c in result.get("causes", ()) or ())]


def cause_line(result: dict[str, Any]) -> str:
    """The one line that says why an import failed. A loader's own error
    (``cannot open shared object file``, ``undefined symbol``) wins wherever it
    sits: sgl_kernel's loader re-raises with a message that starts with a blank
    line and keeps the loader's words inside it or in the chained cause. Else the
    first line with text of the message, else of the innermost cause."""
    texts = _texts(result)
    for text in texts:
        for line in text.splitlines():
            if _CANNOT_OPEN.search(line) or _UNDEFINED.search(line):
                return line.strip().lstrip("- ").strip()
    for text in (texts[0], *reversed(texts[1:])):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return "(the exception has no message)"


def _with_type(result: dict[str, Any], line: str) -> str:
    """``ImportError: line`` unless the line names its exception already."""
    if _NAMED.match(line):
        return line
    return f"{result.get('error_type')}: {line}"


def diagnose_import(result: dict[str, Any], dists: dict[str, Any],
                    lock: Lock | None) -> str:
    """One line saying why the import failed, and which wheels disagree."""
    module = str(result["module"])
    message = "\n".join(_texts(result))
    match = _UNDEFINED.search(message)
    root = module.split(".")[0]
    owners = dists.get("modules", {}).get(root, [])
    owner = owners[0] if owners else root.replace("_", "-")
    if match is None:
        line = _with_type(result, cause_line(result))
        if needs_driver(line):
            return (f"import {module} failed: {line} (the NVIDIA driver's library, "
                    f"which no wheel ships: this machine has no driver, or the "
                    f"loader cannot see it)")
        missing = _missing_library(message, root, owner, dists, lock)
        if missing is not None:
            return f"import {module} failed: {missing}"
        return f"import {module} failed: {line}"
    library = match["lib"].rsplit("/", 1)[-1]
    symbol = match["sym"]
    demangled = demangle([symbol]).get(symbol)
    sym_text = f"{symbol} ({demangled})" if demangled else symbol
    suspect = any(part in match["lib"] or root == part for part in TORCH_EXTENSIONS)
    if not suspect:
        return (f"import {module} failed: {library} needs {sym_text}, which no loaded "
                f"library defines ({_describe(owner, dists, lock)})")
    pin = _torch_pin(owner, dists)
    pin_text = f" (its metadata asks for {pin})" if pin else ""
    return (f"ABI mismatch: {library} in {_describe(owner, dists, lock)}{pin_text} "
            f"was built against another torch than {_describe('torch', dists, lock)}: "
            f"undefined symbol {sym_text}; lock a {owner} wheel built for this torch, "
            f"or the torch it was built for")


def _missing_library(message: str, root: str, owner: str, dists: dict[str, Any],
                     lock: Lock | None) -> str | None:
    """For "libX.so.N: cannot open shared object file": who needs it and what the
    venv has instead, read from the installed files by the native reader."""
    found = _CANNOT_OPEN.search(message)
    infos = [d.get("dist_info") for d in dists.get("distributions", [])]
    if found is None or not any(infos):
        return None
    site = Path(next(i for i in infos if i)).parent
    explained = explain_missing_soname(site, root, found["soname"])
    if explained is None:
        return None
    return (f"{explained} ({_describe(owner, dists, lock)}); lock a {owner} built "
            f"for the libraries the venv has, or the package that ships "
            f"{found['soname']} (stacklock check LOCK finds this before install)")


def _run_import(python: Path, module: str, timeout: float) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [str(python), str(PROBE_SCRIPT), "import", module], capture_output=True,
            text=True, errors="replace", timeout=timeout, env=probe_env(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"module": module, "ok": False, "error_type": "Timeout",
                "message": f"import took over {timeout:.0f} s"}
    data = last_json(proc.stdout)
    if data is not None:
        return data
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"module": module, "ok": False, "error_type": f"exit {proc.returncode}",
            "message": tail}


def check_imports(python: Path, modules: tuple[str, ...], dists: dict[str, Any],
                  lock: Lock | None, *, allow_no_gpu: bool = False,
                  timeout: float = 300.0) -> list[CheckResult]:
    """One named check per module: ``import:<module>``. With ``allow_no_gpu`` an
    import that fails only because the driver's ``libcuda.so.1`` is absent is a
    skip with that reason; any other failure is a failure."""
    results = []
    for module in modules:
        outcome = _run_import(python, module, timeout)
        if outcome.get("ok"):
            where = outcome.get("version") or outcome.get("file") or "built-in"
            results.append(CheckResult(name=f"import:{module}", status=PASS,
                                       reason=f"imports ({where})"))
            continue
        reason = diagnose_import(outcome, dists, lock)
        driver = needs_driver(cause_line(outcome))
        status = SKIP if allow_no_gpu and driver else FAIL
        if status == SKIP:
            reason = f"needs the NVIDIA driver ({driver}; --allow-no-gpu): {reason}"
        results.append(CheckResult(
            name=f"import:{module}", status=status, reason=reason,
            details={"error_type": outcome.get("error_type"),
                     "message": str(outcome.get("message", ""))[:2000],
                     "causes": [str(c)[:2000] for c in outcome.get("causes", [])]},
        ))
    return results
