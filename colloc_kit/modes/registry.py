"""Every sharing mode by name: the built-in ones (each module of `colloc_kit.modes`) and plug-ins.

A mode registers itself by subclassing `SharingMode` with its own `name`; nothing lists modes by hand. The
registry is filled on first use by importing every module of `colloc_kit.modes`, then every entry point of the group
`colloc_kit.modes` of the installed packages (a package declares `[project.entry-points."colloc_kit.modes"]
capped = "mylab.capped"`: the module, or the class, its modes are in), then each entry of the environment variable
COLLOC_KIT_MODES (comma-separated): a module name importable from `sys.path` (`mylab.modes`, a package's modules
included), or the path of a `.py` file or of a folder of them. Executors plug in the same way
(`colloc_kit.executors`, `pipeline.executors`).

    >>> sorted(registered())[:4]
    ['exclusive', 'mig', 'mps', 'naive']
    >>> mode_class("naive").summary()
    'All jobs at once on one GPU; the driver time-slices between their contexts.'
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import re
import sys
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from colloc_kit.errors import BadInput, BrokenPlugin

if TYPE_CHECKING:
    from colloc_kit.modes.base import SharingMode

__all__ = ["ENTRY_POINTS", "MODE_NAME", "OPTION_NAME", "PLUGIN_VARIABLE", "availability", "guarded", "load",
           "make_mode", "mode_class", "register", "registered", "usable", "validate_mode_spec"]

PLUGIN_VARIABLE = "COLLOC_KIT_MODES"
ENTRY_POINTS = "colloc_kit.modes"  # the entry-point group of installed packages' modes
_INTERNAL = {"base", "registry"}  # modules of the package that hold no mode
_modes: dict[str, type[SharingMode]] = {}
_loaded: set[str] = set()  # "built-in", and each plug-in entry already imported
_lock = threading.RLock()
MODE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")  # what --mode, a YAML key and a folder name all take
OPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # what a --flag and a YAML key take


def register(cls: type[SharingMode]) -> None:
    """Record a mode class under its name (called by `SharingMode.__init_subclass__`); a second class with the name
    of another is refused (the same class imported again replaces itself)."""
    _check_names(cls)
    with _lock:
        old = _modes.get(cls.name)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise BadInput(f"two sharing modes are named {cls.name!r}: {_where(old)} and {_where(cls)}; rename one")
        _modes[cls.name] = cls


def registered() -> dict[str, type[SharingMode]]:
    """Every mode this process knows, by name, in alphabetical order (built-ins and COLLOC_KIT_MODES plug-ins)."""
    load()
    with _lock:
        return dict(sorted(_modes.items()))


def usable() -> tuple[dict[str, type[SharingMode]], BrokenPlugin | None]:
    """The modes that load, in alphabetical order, and the plug-in that does not (None where all do): for what needs
    no mode of that plug-in (`colloc-kit show` builds its parser, `run` refuses).

    >>> usable()[1] is None
    True
    """
    try:
        return registered(), None
    except BrokenPlugin as exc:
        with _lock:
            return dict(sorted(_modes.items())), exc


def mode_class(name: str) -> type[SharingMode]:
    """The class of mode `name`, or BadInput naming the modes there are."""
    modes = registered()
    try:
        return modes[name]
    except KeyError:
        raise BadInput(f"unknown sharing mode {name!r}; choose one of {', '.join(modes)} (a mode of your own: "
                       f"name its module or file in {PLUGIN_VARIABLE})") from None


def validate_mode_spec(spec: Any, device: str) -> None:
    """Refuse an unknown mode or bad options (`spec`: a ModeSpec, with .name and .options) before anything is built."""
    mode_class(spec.name).validate_options(dict(spec.options), device)


def make_mode(spec: Any, workdir: Path, gpu: int, device: str) -> SharingMode:
    """The mode a ModeSpec names, validated and constructed (nothing on the GPU changes until `with mode:`).

    >>> mode = make_mode(ModeSpec("naive"), workdir="runs/x", gpu=0, device="cuda")   # doctest: +SKIP
    """
    cls = mode_class(spec.name)
    cls.validate_options(dict(spec.options), device)
    return cls(workdir=Path(workdir), gpu=gpu, device=device, **spec.options)


def availability(device: str = "cuda", gpu: int = 0) -> list[dict]:
    """One record per mode: whether it runs jobs on `device` (GPU `gpu`) of this machine and why not, what it does,
    its options. What `colloc-kit info` and the notebooks show.

    >>> [row["mode"] for row in availability(device="cpu") if row["runs_here"]][:2]
    ['exclusive', 'naive']
    """
    return [{"mode": name, "runs_here": why is None, "why_not": why, "summary": cls.summary(),
             "options": [option.name for option in cls.takes]}
            for name, cls in registered().items() for why in [cls.unavailable_here(device=device, gpu=gpu)]]


def load() -> None:
    """Import the built-in mode modules and the installed packages' `colloc_kit.modes` entry points once, and each
    COLLOC_KIT_MODES entry not imported yet."""
    with _lock:
        if "built-in" not in _loaded:
            package = importlib.import_module(__package__)
            for module in pkgutil.iter_modules(package.__path__):
                if module.name not in _INTERNAL:
                    importlib.import_module(f"{__package__}.{module.name}")
            for point in importlib.metadata.entry_points(group=ENTRY_POINTS):
                guarded(f"the entry point {point.name} = {point.value} ({ENTRY_POINTS})", point.load,
                        "fix its package, or uninstall it")
            _loaded.add("built-in")
        for entry in filter(None, (e.strip() for e in re.split(r"[,%s]" % os.pathsep,
                                                                os.environ.get(PLUGIN_VARIABLE, "")))):
            if entry not in _loaded:
                guarded(f"{PLUGIN_VARIABLE} names {entry!r}", partial(_load_plugin, entry),
                        f"fix it, or remove it from {PLUGIN_VARIABLE}")
                _loaded.add(entry)


def guarded(source: str, load_it: Callable[[], Any], fix: str) -> Any:
    """`load_it()`, a plug-in's import (`source` says where it was named), its failure a BrokenPlugin saying
    `source`, what went wrong and `fix`; Ctrl-C while it loads stays the user's."""
    try:
        return load_it()
    except KeyboardInterrupt:
        raise  # Ctrl-C while a plug-in loads is the user's: the command ends as interrupted
    except (BadInput, BrokenPlugin) as exc:  # e.g. two modes of one name, a mode named 5
        raise BrokenPlugin(f"{source}: {exc}") from None
    except BaseException as exc:  # its own error (missing, a syntax error), or sys.exit() or a BaseException at import
        what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
        raise BrokenPlugin(f"{source}, which did not load ({what}); {fix}") from None


def _load_plugin(entry: str) -> None:
    """Import one COLLOC_KIT_MODES entry: a .py file, a folder of them, or a module (a package with its modules)."""
    path = Path(entry).expanduser()
    if entry.endswith(".py") or os.sep in entry:
        files = sorted(path.glob("[!_]*.py")) if path.is_dir() else [path]
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        for file in files:
            name = f"colloc_kit_mode_plugin_{file.stem}"
            spec = importlib.util.spec_from_file_location(name, file)
            assert spec is not None and spec.loader is not None  # a .py path always has a spec with a loader
            sys.modules[name] = module = importlib.util.module_from_spec(spec)  # as an import would, for pickle
            spec.loader.exec_module(module)
        return
    module = importlib.import_module(entry)
    for sub in pkgutil.iter_modules(getattr(module, "__path__", [])):
        importlib.import_module(f"{entry}.{sub.name}")


def _check_names(cls: type[SharingMode]) -> None:
    """A mode's name and its options' names are what flags and YAML keys are made of: BrokenPlugin otherwise."""
    if not (isinstance(cls.name, str) and MODE_NAME.fullmatch(cls.name)):
        raise BrokenPlugin(f"the sharing mode {_where(cls)} is named {cls.name!r:.60}; a mode's name is a word of "
                           "letters, digits, '-' and '_' starting with a letter (e.g. 'capped'): rename it")
    for option in cls.takes:
        name = getattr(option, "name", option)
        if not (isinstance(name, str) and OPTION_NAME.fullmatch(name)):
            raise BrokenPlugin(f"the sharing mode {cls.name} takes an option named {name!r:.60}; an option's name is "
                               "a word of lowercase letters, digits and '_' (e.g. 'max_connections'): rename it")


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
