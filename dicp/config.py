"""dicp's knobs: one typed, validated config object, `dicp.config`.

Reading a knob:  `from dicp import config; config.strict`. Its value comes from, strongest first:
a `config.patch(...)` block, the environment (`DICP_STRICT=1`, read at every access, so
`monkeypatch.setenv` works), code (`config.strict = True`), the declared default.
`config.source("strict")` says which; `python -m dicp.config` prints them all.

Declaring a knob (dicp's own below; a vendor backend, in-tree or in its own pip package, calls
`declare` in the module that reads the knob, before the first read):

    from dicp import config
    config.declare("chip_variant", config.Text(), "native",
                   "-march value; part of the cache key", owner="new_backendgraph")

The name is the attribute; the environment variable is `DICP_` + the name in capitals. Kinds:
Flag (1/true/yes/on, 0/false/no/off, else an error), Choice, Integer, Text, Patterns
(comma-separated), Location (a path) and FaultSpec. A default may be a function (computed at
read time) with `default_doc` saying what it computes. The knob table in docs/knobs.md is generated
from these declarations (`python -m dicp.config --markdown`); test/unit/test_config.py fails when
the two differ.

This module imports no torch: reading a knob is cheap.
"""

import contextlib
import difflib
import os
import sys
import types
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

PREFIX = "DICP_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A knob got a value it cannot take; the message names the knob and what it accepts."""


# ---- kinds: each turns environment text or a code value into a checked value ----


class Flag:
    accepts = "1/true/yes/on or 0/false/no/off"

    def parse(self, text):
        value = text.strip().lower()
        if value in _TRUE or value in _FALSE:
            return value in _TRUE
        raise ValueError(f"expected one of {self.accepts}")

    def coerce(self, value):
        if isinstance(value, str):
            return self.parse(value)
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected a bool or one of {self.accepts}")


class Choice:
    """One of `values`; `aliases` map other spellings (e.g. 1 -> log) onto them."""

    def __init__(self, *values, aliases=None):
        self.values, self.aliases = values, dict(aliases or {})
        self.accepts = " | ".join(values)

    def parse(self, text):
        value = text.strip().lower()
        value = self.aliases.get(value, value)
        if value not in self.values:
            spellings = ", ".join([*self.values, *self.aliases])
            raise ValueError(f"expected one of {spellings}")
        return value

    def coerce(self, value):
        return self.parse(str(value) if not isinstance(value, bool) else str(int(value)))


class Integer:
    def __init__(self, low=None, high=None):
        self.low, self.high = low, high
        bounds = [f">= {low}" if low is not None else "", f"<= {high}" if high is not None else ""]
        self.accepts = "an integer " + " and ".join(b for b in bounds if b)

    def parse(self, text):
        try:
            return self.coerce(int(text.strip()))
        except (TypeError, ValueError):
            raise ValueError(f"expected {self.accepts}") from None

    def coerce(self, value):
        if isinstance(value, str):
            return self.parse(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected {self.accepts}")
        if (self.low is not None and value < self.low) or (
            self.high is not None and value > self.high
        ):
            raise ValueError(f"expected {self.accepts}")
        return value


class Text:
    accepts = "text"

    def parse(self, text):
        return text.strip()

    def coerce(self, value):
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return value


class Location:
    accepts = "a path"

    def parse(self, text):
        return Path(text.strip()).expanduser()

    def coerce(self, value):
        if value is None:
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError("expected a path")
        return Path(value).expanduser()


class Patterns:
    """Comma-separated fnmatch patterns, e.g. `aten.mm.*,aten.gelu.default`."""

    accepts = "comma-separated patterns"

    def parse(self, text):
        return tuple(item.strip() for item in text.split(",") if item.strip())

    def coerce(self, value):
        if isinstance(value, str):
            return self.parse(value)
        if not all(isinstance(item, str) for item in value):
            raise ValueError("expected strings")
        return tuple(value)


class FaultSpec:
    """`<op pattern>:<kind>` -> (pattern, kind); empty -> None."""

    def __init__(self, *kinds):
        self.kinds = kinds
        self.accepts = f"<op pattern>:<{'|'.join(kinds)}>"

    def parse(self, text):
        pattern, _, kind = text.strip().rpartition(":")
        if not pattern or kind not in self.kinds:
            raise ValueError(f"expected {self.accepts}, e.g. aten.relu.default:accuracy")
        return pattern, kind

    def coerce(self, value):
        if value is None or isinstance(value, str):
            return self.parse(value) if value else None
        pattern, kind = value
        return self.parse(f"{pattern}:{kind}")


# ---- declarations ----


class Knob:
    """A declared knob. `default` is a value or a function computing it when read;
    `default_doc` is how the knob table (docs/knobs.md) shows the default (required for
    computed ones)."""

    __slots__ = ("name", "kind", "default", "doc", "owner", "default_doc")

    def __init__(self, name, kind, default, doc, owner="dicp", default_doc=""):
        self.name, self.kind, self.default = name, kind, default
        self.doc, self.owner, self.default_doc = doc, owner, default_doc

    def __repr__(self):
        return f"Knob({self.env}, owner={self.owner})"

    @property
    def env(self) -> str:
        return PREFIX + self.name.upper()

    def default_value(self):
        return self.default() if callable(self.default) else self.default

    def shown_default(self) -> str:
        if self.default_doc:
            return self.default_doc
        return _show(self.kind, self.default)


_KNOBS: dict = {}
_CODE: dict = {}  # values set from code
_PATCHES: list[dict] = []  # active patch blocks, innermost last
_WARNED: set = set()  # unknown variables already warned about


def declare(name: str, kind, default, doc: str, owner: str = "dicp", default_doc: str = ""):
    """Declare knob `name` (environment variable DICP_<NAME>); returns the Knob.

    Re-declaring the same knob identically is allowed (a module imported twice); declaring a
    different knob under a taken name is an error."""
    knob = Knob(name, kind, default, doc, owner, default_doc)
    if not name.isidentifier() or name.startswith("_") or name in _module_names():
        raise ConfigError(
            f"cannot declare knob {name!r}: not an identifier, or it names "
            f"something dicp.config already has"
        )
    existing = _KNOBS.get(name)
    if existing is not None and (existing.owner, existing.doc) != (owner, doc):
        raise ConfigError(f"knob {name!r} ({knob.env}) is already declared by {existing.owner}")
    if callable(default) and not default_doc:
        raise ConfigError(f"knob {name!r}: a computed default needs default_doc for the knob table")
    if not callable(default) and default is not None:
        kind.coerce(default)  # a default the kind rejects is a bug in the declaration
    _KNOBS[name] = knob
    return knob


def knobs(owner: str | None = None) -> list[Knob]:
    """Declared knobs (of one owner if given), in declaration order."""
    return [k for k in _KNOBS.values() if owner is None or k.owner == owner]


def knob(name: str) -> Knob:
    try:
        return _KNOBS[name]
    except KeyError:
        raise AttributeError(f"dicp.config has no knob {name!r}{_nearest(name, _KNOBS)}") from None


def get(name: str):
    """The effective value of knob `name` (patch, then environment, then code, then default)."""
    return _resolve(knob(name))[0]


def source(name: str) -> str:
    """Where the value of knob `name` comes from: patch, environment, code or default."""
    return _resolve(knob(name))[1]


def set_value(name: str, value) -> None:
    """What `config.<name> = value` does: a code value (the environment still overrides it)."""
    _CODE[name] = _checked(knob(name), value, "code")


def unset(name: str) -> None:
    """Forget a code value of knob `name`."""
    knob(name)
    _CODE.pop(name, None)


@contextlib.contextmanager
def patch(changes: dict | None = None, **kwargs):
    """`with config.patch(strict=True):` — wins over environment and code inside the block.
    Also usable as a decorator."""
    values = {**(changes or {}), **kwargs}
    checked = {name: _checked(knob(name), value, "patch") for name, value in values.items()}
    _PATCHES.append(checked)
    try:
        yield
    finally:
        _PATCHES.remove(checked)


def _resolve(knob: Knob):
    for layer in reversed(_PATCHES):
        if knob.name in layer:
            return layer[knob.name], "patch"
    raw = os.environ.get(knob.env)
    if raw is not None and raw.strip():
        try:
            return knob.kind.parse(raw), "environment"
        except ValueError as error:
            raise ConfigError(f"{knob.env}={raw!r}: {error}") from None
    if knob.name in _CODE:
        return _CODE[knob.name], "code"
    return knob.default_value(), "default"


def _checked(knob: Knob, value, where: str):
    try:
        return knob.kind.coerce(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"dicp.config.{knob.name} = {value!r} ({where}): {error}") from None


# ---- the environment check, the table, the command line ----


def check_environment(environ=None) -> list[str]:
    """Warn once about each DICP_* variable that names no declared knob; returns the
    messages issued now. A backend's knobs are known once the backend is loaded."""
    environ = os.environ if environ is None else environ
    known = {k.env for k in _KNOBS.values()}
    messages = []
    for var in sorted(environ):
        if var.startswith(PREFIX) and var not in known and var not in _WARNED:
            _WARNED.add(var)
            messages.append(
                f"{var} is not a dicp knob{_nearest(var, known)}; "
                f"`python -m dicp.config` lists the knobs"
            )
            warnings.warn(messages[-1], UserWarning, stacklevel=2)
    return messages


def _nearest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def as_env_text(name: str, value) -> str:
    """`value` of knob `name` spelled as its environment variable would be ("" for none)."""
    return _env_text(knob(name).kind, value)


def _env_text(kind, value) -> str:
    if value is None:
        return ""
    if isinstance(kind, FaultSpec):
        return f"{value[0]}:{value[1]}"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _show(kind, value) -> str:
    return _env_text(kind, value) or "empty"


def effective() -> list[tuple]:
    """(knob, value or error text, source) for every declared knob."""
    rows = []
    for k in knobs():
        try:
            value, where = _resolve(k)
            rows.append((k, _show(k.kind, value), where))
        except ConfigError as error:
            rows.append((k, f"ERROR: {error}", "environment"))
    return rows


def format_effective() -> str:
    """The effective config as an aligned table (what `python -m dicp.config` prints)."""
    lines = [("knob", "value", "source", "owner")]
    lines += [(k.env, value, where, k.owner) for k, value, where in effective()]
    widths = [max(len(row[i]) for row in lines) for i in range(3)]
    return "\n".join(
        f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
        for a, b, c, d in lines
    )


def markdown_table() -> str:
    """The knob table of docs/knobs.md, generated from the declarations: dicp's own knobs first,
    then each other owner's by name, each in declaration order (never the order a process
    happened to import the backends in)."""
    rows = ["| knob | default | owner | meaning |", "| --- | --- | --- | --- |"]
    for k in sorted(knobs(), key=lambda k: (k.owner != "dicp", k.owner)):
        default = _show_default(k)
        doc = k.doc.replace("|", "\\|")  # a bare | would split the table cell
        rows.append(f"| `{k.env}` | {default} | {k.owner} | {doc} |")
    return "\n".join(rows)


def _show_default(k: Knob) -> str:
    shown = k.shown_default()
    return shown if shown == "empty" or k.default_doc else f"`{shown}`"


def _module_names():
    return set(globals())


def load_backend_knobs() -> list[str]:
    """Import the dicp backends installed as `torch_dynamo_backends` entry points, so their
    knobs are declared; returns error messages for those that failed to import."""
    from importlib import metadata

    errors = []
    for entry in metadata.entry_points(group="torch_dynamo_backends"):
        if not _is_dicp_backend(entry):
            continue
        try:
            entry.load()
        except Exception as error:  # a broken backend must not hide the others' knobs
            errors.append(f"{entry.name}: {type(error).__name__}: {error}")
    return errors


def _is_dicp_backend(entry) -> bool:
    if entry.value.startswith("dicp."):
        return True
    requires = (entry.dist.requires or []) if entry.dist else []
    return any(r.split(";")[0].strip().lower().startswith("dicp") for r in requires)


def main(argv=None) -> int:
    """`python -m dicp.config [--markdown]`."""
    argv = sys.argv[1:] if argv is None else argv
    for error in load_backend_knobs():
        print(f"warning: backend failed to load: {error}", file=sys.stderr)
    if "--markdown" in argv:
        print(markdown_table())
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unknown = check_environment()
    print(format_effective())
    for message in unknown:
        print(f"warning: {message}", file=sys.stderr)
    return 0


class _ConfigModule(types.ModuleType):
    """`config.strict` reads a knob, `config.strict = True` sets it from code."""

    def __getattr__(self, name):
        if name in _KNOBS:
            return get(name)
        raise AttributeError(f"dicp.config has no knob {name!r}{_nearest(name, _KNOBS)}")

    def __setattr__(self, name, value):
        if name in _KNOBS:
            set_value(name, value)
        elif name.startswith("__") or name in self.__dict__:
            super().__setattr__(name, value)
        else:
            raise AttributeError(
                f"dicp.config has no knob {name!r}{_nearest(name, _KNOBS)}; "
                f"declare it with dicp.config.declare"
            )

    def __delattr__(self, name):
        if name in _KNOBS:
            unset(name)
        else:
            super().__delattr__(name)


if TYPE_CHECKING:
    # For type checkers: a knob is an attribute of the module (`_ConfigModule`), by name.
    def __getattr__(name: str) -> Any: ...


# ---- dicp's own knobs ----


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dicp"


FAULT_KINDS = ("accuracy", "compile_error", "runtime_error")

declare(
    "strict",
    Flag(),
    False,
    "an op without a converter raises an error naming the op, "
    "backend and conversion table instead of running as eager fallback; the fallbacks the "
    "backend declares (`Backend.expected_fallbacks`) and those forced by `DICP_FALLBACK_OPS` "
    "still run",
)
declare(
    "debug",
    Flag(),
    False,
    "dump each graph's ATen graph, vendor graph, wrapper, C++ and "
    "effective config under `<cache>/debug/<graph>/` and log the path",
)
declare(
    "cache_dir",
    Location(),
    _default_cache_dir,
    "the compile cache (kernels under `kernels/`)",
    default_doc="`$XDG_CACHE_HOME/dicp` or `~/.cache/dicp`",
)
declare(
    "graph_cache",
    Flag(),
    True,
    "reuse the conversion and codegen of an identical ATen "
    "graph (same code, input layouts, knobs but the reporting ones, tables, the backend's "
    "process state such as the thread count, dicp and torch versions) from "
    "`graphs/` in the cache; off under `DICP_DEBUG` and `DICP_RECORD_OPS`",
)
declare(
    "aot_cache",
    Flag(),
    True,
    "reuse AOTAutograd's whole result (forward, backward, "
    "runtime wrappers) for an identical dynamo graph (static or dynamic shapes) from `aot/` "
    "in the cache, so a warm start skips AOTAutograd's trace; a training graph then "
    "compiles its backward with its forward. Off with the graph cache",
)
declare(
    "fallback_ops",
    Patterns(),
    (),
    "comma-separated patterns (`aten.mm.*,aten.gelu.default`)"
    " of ATen ops forced to run as eager fallback",
)
declare(
    "keep_torch_default",
    Patterns(),
    (),
    "comma-separated patterns of ops removed from the "
    "backend's decomposition table, so torch's default implementation is kept",
)
declare(
    "fallback_random",
    Flag(),
    False,
    "random ops (dropout, rand, bernoulli, ...: every op "
    "torch tags `nondeterministic_seeded`) are neither decomposed nor converted but run as "
    "eager ATen, so they draw exactly the numbers eager draws (Inductor's `fallback_random`);"
    " allowed under `DICP_STRICT=1`",
)
declare(
    "autocompare",
    Choice(
        "off",
        "log",
        "raise",
        aliases={
            "0": "off",
            "false": "off",
            "no": "off",
            "1": "log",
            "true": "log",
            "yes": "log",
            "on": "log",
        },
    ),
    "off",
    "`1`: run every compiled graph's ATen graph eagerly too, "
    "compare the outputs and log the first diverging op with its source line; `raise`: "
    "raise `AutocompareError` instead",
)
declare(
    "repro_dir",
    Location(),
    None,
    "when autocompare finds a mismatch, write a standalone "
    "repro of the graph (`python <dir>/<graph>/run.py`) here",
)
declare(
    "inject_bug_testing_only",
    FaultSpec(*FAULT_KINDS),
    None,
    "tests of the debugging "
    "tools only: `<op pattern>:<accuracy|compile_error|runtime_error>` makes the generated "
    "code of matching ATen ops wrong in that way",
)
declare(
    "dump_op_args",
    Integer(0, 3),
    0,
    "as each compiled graph runs, dump its ops: `1` names,"
    " `2` also shapes, dtypes and strides, `3` also value summaries (min, max, mean, NaN and "
    "Inf counts)",
)
declare(
    "dump_op_args_file",
    Location(),
    None,
    "append the op-argument dumps to this file instead of the log",
)
declare(
    "profile",
    Flag(),
    False,
    "print the compile profile (stage times, graphs, kernels, "
    "cache, fallbacks, compiles per function) as a table at exit",
)
declare(
    "profile_kernels",
    Flag(),
    False,
    "name each kernel, library call (a matrix product, a "
    "convolution), eager fallback and copy of a compiled graph in `torch.profiler` "
    "(`record_function`, e.g. `new_backendgraph_backward_1/kernel_2 aten.mul.Tensor`, the "
    "ATen op whose lowering built the kernel), so a profile shows where a step's time goes; "
    "kernels then run one call each from Python (no native entries)",
)
declare(
    "recompile_warn_limit",
    Integer(0),
    4,
    "warn once when one function has been "
    "recompiled more than this many times because input shapes changed (`0`: never)",
)
declare(
    "record_ops",
    Location(),
    None,
    "append the ATen ops each graph runs natively to this "
    "file, one per line (used by `python -m dicp.tools.bisect`)",
)
declare(
    "record_results",
    Location(),
    None,
    "at exit, write a digest of every compiled graph "
    "call's outputs and updated inputs (bytes, dtype, shape, strides) to this file, one line"
    " per call: two runs recording equal files computed bit-for-bit equal results (the "
    "cold-against-warm test mode, `pytest --cold-warm`)",
)
declare(
    "emu_isolation",
    Flag(),
    True,
    "`import dicp.emu`: keep the emulated device's memory "
    "unreadable from the host (`PROT_NONE`) except while device work on it runs, so host "
    "code that reads device memory without a copy crashes; `0` maps it readable (faster, "
    "no check). Read once, at the import",
    owner="emu",
)
# Read by the test harness (test/common/utils.py); its plugin (test/common/harness.py) sets them
# for xdist workers.
declare(
    "test_backend",
    Text(),
    "new_backendgraph",
    "tests: the backend under test (pytest `--backend`)",
    owner="tests",
)
declare(
    "test_dynamic",
    Text(),
    "all",
    "tests: `false` (static shapes), `true` (dynamic) or `all` (both; pytest `--dynamic`)",
    owner="tests",
)
declare(
    "test_emu_opinfo",
    Choice("subset", "all"),
    "subset",
    "tests: the OpInfos "
    "`test/emu/test_opinfo.py` runs on the emulated device: `subset` (a representative few, "
    "in the default suite) or `all` (every OpInfo of torch's op_db)",
    owner="tests",
)

if __name__ == "__main__":
    import dicp.config  # the real module (this file runs as __main__ under -m)

    sys.exit(dicp.config.main())

sys.modules[__name__].__class__ = _ConfigModule
