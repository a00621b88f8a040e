"""Code that says it runs on CUDA only: a hardcoded `.cuda()` costs it no portability it was meant
to have. Read from one tree, from a whole notebook, or from the project a checked file lives in:
a repository built on cupy is CUDA-only in every one of its files, also the ones that never
import it (a script that asserts a GPU speaks only for itself)."""

from __future__ import annotations

import ast
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path

from .nodes import remember, terminal_name
from .source import prepare

# libraries that only run on an NVIDIA GPU: code built on them cannot run without CUDA anyway
_CUDA_ONLY_LIBRARIES = ("apex", "cupy", "pycuda", "numba.cuda")
# imported for its effect: picks a free NVIDIA GPU (via nvidia-smi) for this script
_GPU_PICKERS = frozenset({"setGPU"})
_CUDA_PRESENT = re.compile(r"^(torch\.)?cuda\.(is_available\(\)|device_count\(\)( > 0| >= 1| != 0)?)$")
_NOT_AVAILABLE = r"not (torch\.)?cuda\.is_available\(\)"
_CUDA_ABSENT = re.compile(rf"^({_NOT_AVAILABLE}|(torch\.)?cuda\.device_count\(\) (== 0|< 1))$")
# `if not torch.cuda.is_available() or not dist.is_initialized():`: one of the ways out is no CUDA
CUDA_UNAVAILABLE = re.compile(_NOT_AVAILABLE)
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
# a cheap look at the raw text before any parse: the text of every declaration matches this
_LIBRARY_TOKENS = (b"apex", b"cupy", b"pycuda", b"numba", b"cuda_sources", b".cu'", b'.cu"')
_LIBRARY_MENTIONS = re.compile(r"\b(import|from)\s+(apex|cupy|pycuda|numba)\b|cuda_sources|\.cu['\"]")
_MENTIONS = re.compile(
    _LIBRARY_MENTIONS.pattern
    + r"|assert\s+(torch\.)?cuda\.(is_available|device_count)"
    + r"|not\s+(torch\.)?cuda\.is_available|cuda\.device_count\(\)\s*(==|<)"
    + r"|device_count\(\)|[\'\"]nccl[\'\"]|\bimport\s+setGPU\b|cuda\.set_device\("
)
# the author says so in a comment: "# this code will not run without a compatible NVIDIA GPU",
# "# the script requires a CUDA GPU". Only statements about the code as a whole: "# AMP needs a
# GPU" speaks of one feature, not of where the script runs.
_GPU = r"(an? )?((compatible|cuda[- ]capable|cuda[- ]enabled|nvidia) )*(gpu|cuda)"
_COMMENT_DECLARATION = re.compile(
    r"#[^\n]*?\b(this|the|our) (code|script|notebook|program|example|training)s? "
    rf"((will not|won't|cannot|can't|does not|doesn't) (run|work) without {_GPU}"
    rf"|(only )?(requires|needs|must have) {_GPU}"
    rf"|(only )?(runs|works) (only )?on {_GPU})\b",
    re.IGNORECASE,
)
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})

# what marks the top of a project, nearest first wins
_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt")
# folders that hold other people's code or build output, never the project's own
_SKIPPED_DIRS = frozenset(
    {"node_modules", "site-packages", "dist-packages", "build", "dist", "__pycache__", "venv", "env"}
    # a test that needs a GPU (`if not torch.cuda.is_available(): raise SkipTest`) says nothing
    # of where the project's own code runs
    | {"test", "tests", "testing"}
)
MAX_PROJECT_FILES = 3000
MAX_FILE_BYTES = 1_000_000


def declares_cuda_only(tree: ast.AST, *, library_only: bool = False) -> bool:
    """The tree asserts a GPU (`assert torch.cuda.is_available(), "..."`), stops without one
    (`if not torch.cuda.is_available(): sys.exit(...)`), imports `setGPU` (which picks an NVIDIA
    GPU for the script as it is imported), or is built on a library that only runs
    on CUDA (apex, cupy, pycuda, numba.cuda, a custom `.cu` extension loaded with
    `torch.utils.cpp_extension`). An import that the code survives without (`try: import apex`
    / `except ImportError: apex = None`) is an option, not a requirement.
    `library_only`: only what the code is built on (libraries, extensions), which holds for
    every file that uses it; an assert or an exit says only that its own script needs a GPU."""
    key = "cuda_only_library" if library_only else "cuda_only"
    return remember(tree, key, lambda: _any_declaration(tree, False, library_only, _gpu_counts(tree)))


def _gpu_counts(tree: ast.AST) -> frozenset[str]:
    """Names bound to the number of GPUs (`n_gpus = torch.cuda.device_count()`)."""
    return frozenset(
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and _is_device_count(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    )


def _is_device_count(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in (
        "torch.cuda.device_count",
        "cuda.device_count",
    )


def _asserts_gpus(test: ast.AST, counts: frozenset[str]) -> bool:
    """`assert n_gpus >= 2`, `assert torch.cuda.device_count() > 1`: at least one GPU."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not (_is_device_count(left) or (isinstance(left, ast.Name) and left.id in counts)):
        return False
    if not (isinstance(right, ast.Constant) and isinstance(right.value, int)):
        return False
    return (isinstance(op, ast.GtE) and right.value >= 1) or (isinstance(op, ast.Gt) and right.value >= 0)


def _nccl(call: ast.Call) -> bool:
    """`dist.init_process_group("nccl", ...)`: NCCL runs on NVIDIA GPUs only."""
    backend = (
        call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
    )
    return isinstance(backend, ast.Constant) and backend.value == "nccl"


def _any_declaration(node: ast.AST, optional: bool, library_only: bool, counts: frozenset[str]) -> bool:
    if not optional and _says_cuda_only(node, library_only, counts):
        return True
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        guarded = _survives_import_error(node)  # type: ignore[arg-type]
        parts: list[tuple[list[ast.AST], bool]] = [
            (node.body, optional or guarded),  # type: ignore[attr-defined]
            (node.handlers, optional),  # type: ignore[attr-defined]
            (node.orelse, optional or guarded),  # type: ignore[attr-defined]
            (node.finalbody, optional),  # type: ignore[attr-defined]
        ]
        return any(
            _any_declaration(child, opt, library_only, counts) for nodes, opt in parts for child in nodes
        )
    return any(
        _any_declaration(child, optional, library_only, counts) for child in ast.iter_child_nodes(node)
    )


def _survives_import_error(node: ast.Try) -> bool:
    """A handler that catches a failed import and goes on (does not raise or exit)."""
    for handler in node.handlers:
        caught = handler.type
        names = (
            [caught] if caught is None or not isinstance(caught, ast.Tuple) else list(caught.elts)  # type: ignore[list-item]
        )
        if not any(n is None or terminal_name(n) in _IMPORT_ERRORS for n in names):
            continue
        if not any(_stops(s) for s in handler.body):
            return True
    return False


def _stops(stmt: ast.stmt) -> bool:
    """`raise ...` or `sys.exit(...)`: the program ends here."""
    return isinstance(stmt, ast.Raise) or (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and ast.unparse(stmt.value.func) in _EXITS
    )


def _says_cuda_only(node: ast.AST, library_only: bool, counts: frozenset[str] = frozenset()) -> bool:
    if library_only and isinstance(node, (ast.Assert, ast.If)):
        return False
    if isinstance(node, ast.Assert):
        return bool(_CUDA_PRESENT.match(ast.unparse(node.test))) or _asserts_gpus(node.test, counts)
    if not library_only and isinstance(node, ast.Call) and terminal_name(node.func) == "init_process_group":
        return _nccl(node)
    if not library_only and isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
        return any(_sets_a_cuda_device(stmt) for stmt in node.body)
    if isinstance(node, ast.If) and _CUDA_ABSENT.match(ast.unparse(node.test)) and node.body:
        return _stops(node.body[-1])
    if isinstance(node, ast.Import):
        if not library_only and any(a.name in _GPU_PICKERS for a in node.names):
            return True
        return any(_cuda_only_library(a.name) for a in node.names)
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return _cuda_only_library(node.module) or any(
            _cuda_only_library(f"{node.module}.{a.name}") for a in node.names
        )
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        if name == "load_inline" and any(k.arg == "cuda_sources" for k in node.keywords):
            return True
        if name == "load":  # `cpp_extension.load(name, sources=["k.cpp", "k.cu"])`
            return any(
                isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.endswith(".cu")
                for arg in (*node.args, *(k.value for k in node.keywords))
                for c in ast.walk(arg)
            )
    return False


def _sets_a_cuda_device(stmt: ast.stmt) -> bool:
    """`torch.cuda.set_device(rank)` as a statement of its own in a function's (or the script's)
    body, not under an `if`: that path initialises CUDA and raises without it."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and ast.unparse(stmt.value.func) in ("torch.cuda.set_device", "cuda.set_device")
    )


def _cuda_only_library(module: str) -> bool:
    return any(module == lib or module.startswith(lib + ".") for lib in _CUDA_ONLY_LIBRARIES)


def text_declares_cuda_only(text: str) -> bool:
    """`declares_cuda_only` of a whole document (a notebook around its cells, asked once per
    cell: the parse is kept)."""
    if not _MENTIONS.search(text):
        return False
    tree = parsed_document(text)
    return tree is not None and declares_cuda_only(tree)


@lru_cache(maxsize=16)
def comment_declares_cuda_only(text: str) -> bool:
    """A comment of the file or notebook says the code needs a GPU to run at all."""
    return _COMMENT_DECLARATION.search(text) is not None


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(prepare(text).python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# the whole notebook around a cell, asked about by each of its cells (project files are
# parsed once each and not kept)
parsed_document = lru_cache(maxsize=16)(_parse)


def _file_uses_cuda_only_library(text: str) -> bool:
    if not _LIBRARY_MENTIONS.search(text):
        return False
    tree = _parse(text)
    return tree is not None and declares_cuda_only(tree, library_only=True)


def _is_test_file(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def project_root(path: str) -> Path | None:
    """The nearest folder above a checked file that marks a project (a git checkout, a
    `pyproject.toml`, `setup.py`, `setup.cfg` or `requirements.txt`); None for a loose file."""
    return _root_above(Path(os.path.abspath(path)).parent)


@lru_cache(maxsize=1024)
def _root_above(here: Path) -> Path | None:
    if any((here / marker).exists() for marker in _ROOT_MARKERS):
        return here
    return None if here.parent == here else _root_above(here.parent)


@lru_cache(maxsize=64)
def project_cuda_only(root: Path) -> str | None:
    """The project file (relative path) that builds the project on a CUDA-only library or
    extension, or None. Reads at most `MAX_PROJECT_FILES` Python files, skipping hidden,
    vendored, build and test folders."""
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))  # a virtualenv
        )
        for name in sorted(files):
            if not name.endswith(".py") or _is_test_file(name):
                continue
            seen += 1
            if seen > MAX_PROJECT_FILES:
                return None
            file = Path(folder) / name
            try:
                if file.stat().st_size > MAX_FILE_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if not any(token in data for token in _LIBRARY_TOKENS):
                continue  # the usual case, found at memory speed
            if _file_uses_cuda_only_library(data.decode("utf-8", errors="replace")):
                return str(file.relative_to(root))
    return None
