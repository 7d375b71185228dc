"""core._record: record classes behave as the dataclasses of the same body.

Every class of the core made with ``@record`` is compared with a reference:
its own source, run again with ``@dataclasses.dataclass`` in its place (not
the twin ``_record`` makes, so that the comparison does not lean on the code
under test).  And the point of it all: importing the command modules makes
no dataclass.
"""

# ruff: noqa: B023 -- every lambda here is called at once, in its own iteration
from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
import textwrap
from typing import Any, ClassVar

import pytest

import lecode_memctl.core as core_pkg
from lecode_memctl.core._lazy import lazy_compile
from lecode_memctl.core._record import record


def _record_classes() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(core_pkg.__path__, core_pkg.__name__ + "."):
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if isinstance(obj, type) and "__record_spec__" in obj.__dict__ \
                    and obj.__module__ == mod.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


RECORDS = _record_classes()


def _reference(cls: type) -> type:
    """The class made again from its own source with @dataclass."""
    src = textwrap.dedent(inspect.getsource(cls))
    assert src.startswith(("@record", "@_record")), src[:40]
    head, _, rest = src.partition("\n")
    frozen = "frozen=True" in head
    ns = dict(vars(sys.modules[cls.__module__]))
    ns["__dataclass_under_test__"] = dataclasses.dataclass(frozen=frozen)
    exec(compile("@__dataclass_under_test__\n" + rest, inspect.getsourcefile(cls) or "?", "exec"),
         ns)
    ref: type = ns[cls.__name__]
    assert dataclasses.is_dataclass(ref) and ref is not cls
    return ref


def _outcome(fn: Any) -> Any:
    try:
        return ("value", fn())
    except Exception as exc:   # the same exception, same message, from both
        return ("raised", type(exc).__name__, str(exc))


def _samples(ref: type) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Calls to make instances with: every field positional, required ones
    as keywords, and a few that bind wrongly."""
    fields = dataclasses.fields(ref)
    values = [f"v{i}" if i % 2 else i for i in range(len(fields))]
    required = [f for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (tuple(values), {}),
        (tuple(values[:len(required)]), {}),
        ((), {f.name: v for f, v in zip(required, values, strict=False)}),
        (tuple(values[:1]), {f.name: v for f, v in zip(required[1:], values[1:], strict=False)}),
        (tuple(values) + (1,), {}),                         # one too many
        (tuple(values[:len(required)]), {"no_such_field": 1}),
    ]
    if required:
        calls.append((tuple(values[:len(required) - 1]), {}))        # one missing
        calls.append((tuple(values[:len(required)]), {required[0].name: 1}))   # twice
    return calls


def _frozen_errors(obj: Any) -> list[Any]:
    name = dataclasses.fields(obj)[0].name if dataclasses.fields(obj) else "x"
    return [_outcome(lambda: setattr(obj, name, 1)), _outcome(lambda: setattr(obj, "other", 1)),
            _outcome(lambda: delattr(obj, name))]


@pytest.mark.heavy
@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_a_record_class_behaves_as_the_dataclass_of_its_body(cls: type) -> None:
    ref = _reference(cls)
    assert dataclasses.is_dataclass(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(ref))
    assert cls.__doc__ == ref.__doc__
    assert cls.__match_args__ == ref.__match_args__  # type: ignore[attr-defined]
    assert cls.__dataclass_params__.frozen == ref.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare)
            for f in dataclasses.fields(cls)] == \
        [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare)
         for f in dataclasses.fields(ref)]
    assert (cls.__hash__ is None) == (ref.__hash__ is None)
    made = 0
    for args, kwargs in _samples(ref):
        got = _outcome(lambda: cls(*args, **kwargs))
        want = _outcome(lambda: ref(*args, **kwargs))
        assert got[0] == want[0], (args, kwargs, got, want)
        if got[0] == "raised":
            assert got[1:] == want[1:], (args, kwargs)
            continue
        made += 1
        a, b = got[1], want[1]
        for f in dataclasses.fields(ref):   # a factory's value (time.time) made once
            if f.default_factory is not dataclasses.MISSING:
                object.__setattr__(b, f.name, getattr(a, f.name))
        assert repr(a).replace(cls.__qualname__, "C", 1) == repr(b).replace(ref.__qualname__, "C", 1)
        assert vars(a) == vars(b) and list(vars(a)) == list(vars(b))
        again = cls(**{f.name: getattr(a, f.name) for f in dataclasses.fields(ref)})
        assert a == again and (a != again) is False and a != b and (a == 1) is False
        if cls.__hash__ is not None:   # (a frozen record of lists: unhashable in both)
            assert _outcome(lambda: hash(a)) == _outcome(lambda: hash(again)) \
                == _outcome(lambda: hash(b))
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        for f in dataclasses.fields(ref):   # == and hash look at the compared fields only
            mine = {**vars(a), f.name: "other"}
            theirs = {**vars(b), f.name: "other"}
            assert _outcome(lambda: cls(**mine) == a) == _outcome(lambda: ref(**theirs) == b)
            if cls.__hash__ is not None:
                assert _outcome(lambda: hash(cls(**mine)) == hash(a)) == \
                    _outcome(lambda: hash(ref(**theirs)) == hash(b))
        first = dataclasses.fields(ref)[0].name
        assert _outcome(lambda: vars(dataclasses.replace(a, **{first: "w"}))) == \
            _outcome(lambda: vars(dataclasses.replace(b, **{first: "w"})))
        if ref.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            assert _frozen_errors(a) == _frozen_errors(b)
        if cls.__module__ and "<locals>" not in cls.__qualname__:
            assert pickle.loads(pickle.dumps(a)) == a
        assert copy.deepcopy(a) == a
    assert made >= 1 or cls.__name__ == "SourceRef"   # SourceRef's checks refuse the samples


@record(frozen=True)
class _Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)
    seen: list[int] = dataclasses.field(default_factory=list, compare=False)


def test_calls_that_bind_wrongly_raise_the_dataclass_error() -> None:
    @dataclasses.dataclass(frozen=True)
    class _Point:   # noqa: F811 -- the reference, same name for the messages
        x: int
        y: int = 0
        tags: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)
        seen: list[int] = dataclasses.field(default_factory=list, compare=False)

    mine: Any = globals()["_Point"]
    reference: Any = _Point
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}), ((1, 2, 3, [], 5), {}), ((1,), {"x": 2}), ((1,), {"z": 2}), ((), {"y": 1}),
        ((1, 2, 3, 4), {"y": 1})]
    for args, kwargs in calls:
        got = _outcome(lambda: mine(*args, **kwargs))
        want = _outcome(lambda: reference(*args, **kwargs))
        local = "test_calls_that_bind_wrongly_raise_the_dataclass_error.<locals>."
        assert got == tuple(w.replace(local, "") if isinstance(w, str) else w for w in want)
    p = mine(1, tags=("a",))
    assert repr(p) == "_Point(x=1, y=0, seen=[])" and p == mine(1, 0, ("b",), [9])
    assert p.seen == [] and p.seen is not mine(1).seen     # a fresh list each time
    assert hash(p) == hash(mine(1, tags=("z",)))
    match p:
        case mine(x, y):
            assert (x, y) == (1, 0)


def test_what_record_does_not_support_is_an_error_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class A:
            a: int = 0
            b: int   # type: ignore[misc]
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class B:
            a: list[int] = []   # noqa: RUF012
    with pytest.raises(TypeError, match="ClassVar, InitVar and KW_ONLY"):
        @record
        class C:
            a: ClassVar[int] = 0
    with pytest.raises(TypeError, match="init=False and kw_only"):
        @record
        class D:
            a: int = dataclasses.field(default=0, init=False)
    with pytest.raises(TypeError, match="no base class"):
        @record
        class E(_Point):   # type: ignore[misc]
            z: int = 0


def test_a_mutable_record_is_unhashable_and_takes_assignments() -> None:
    @record
    class M:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)

    m = M(1)
    m.a = 2
    assert m == M(2) and M.__hash__ is None and not dataclasses.fields(M)[0].default_factory \
        is not dataclasses.MISSING


def test_importing_the_commands_makes_no_dataclass() -> None:
    """What the records are for: a command that imports the core's modules
    compiles no dataclass method.  (A twin is made only when something
    introspects a record or binds an unusual call.)"""
    code = textwrap.dedent("""
        import dataclasses, importlib, pkgutil, sys
        made = []
        real = dataclasses._process_class
        def spy(cls, *a):
            if cls.__module__.rsplit(".", 1)[-1] not in ("secrets", "usage"):  # @dataclass there
                made.append(cls.__qualname__)
            return real(cls, *a)
        dataclasses._process_class = spy
        import lecode_memctl.cli.main
        from lecode_memctl.cli.registry import COMMANDS
        import lecode_memctl.core as core
        for info in pkgutil.walk_packages(core.__path__, core.__name__ + "."):
            importlib.import_module(info.name)
        from lecode_memctl.core.facts import Fact, Revision
        from lecode_memctl.core.sourceref import SourceRef
        Revision("0" * 16, 1, "t", "2026-01-01", SourceRef("s", (1,), "0" * 64))
        print(made)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_lazy_pattern_compiles_on_first_use_and_then_is_the_pattern() -> None:
    import re

    before = len(re._cache)  # type: ignore[attr-defined]
    pat = lazy_compile(rf"^(a+)(b)?\Z-unique-{id(object())}")
    assert "_done" not in vars(pat) and len(re._cache) == before  # type: ignore[attr-defined]
    plain = re.compile(pat.pattern)
    for text in ["aab-x", "", "a" * 3]:
        assert pat.match(text) == plain.match(text)
        assert pat.search(text) == plain.search(text)
        assert pat.sub("x", text) == plain.sub("x", text)
        assert pat.findall(text) == plain.findall(text)
    assert pat.groups == 2 and pat.pattern == plain.pattern
    method: Any = pat.match
    assert method.__self__ is vars(pat)["_done"]        # the compiled pattern's own method
    # and found without a class __getattr__, which would slow every lookup
    assert "__getattr__" not in vars(type(pat))
    raw = lazy_compile(rb"x(y)", re.IGNORECASE)
    found = raw.search(b"aXY")
    assert found is not None and found.group(1) == b"Y" and raw.flags & re.IGNORECASE


def test_the_read_commands_make_no_twin_on_the_demo_store(tmp_path: Any) -> None:
    """The commands bind their records' calls themselves: no twin (a
    dataclass compiled at run time) is made by the read commands on the demo
    store, damage and all.  A call the fast ways missed would make one."""
    from lecode_memctl.core.demo import build_demo

    store = build_demo(tmp_path / "demo").store.path
    code = textwrap.dedent("""
        import contextlib, io, sys
        from lecode_memctl.cli.main import main
        for argv in sys.argv[2:]:
            sys.argv = ["memctl", "--store", sys.argv[1], *argv.split()]
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main()
        twins = sorted({o.__qualname__ for m in list(sys.modules.values())
                        if m and m.__name__.startswith("lecode_memctl.core")
                        for o in list(vars(m).values())
                        if isinstance(o, type) and "__record_twin__" in o.__dict__})
        print(twins)
    """)
    commands = ["validate -q", "validate -q --deep", "validate --json", "facts --all --json",
                "context", "sessions --json", "notes", "where --json", "show", "history --help"]
    out = subprocess.run([sys.executable, "-c", code, str(store), *commands],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:] + out.stderr[-2000:]


def test_a_subclass_of_a_record_is_seen_as_a_dataclass_subclass_is() -> None:
    """A plain subclass inherits the fields and none of the class's
    signature; a dataclass made on top of a record takes its fields (both
    as with a dataclass for the base; the review of this module found both
    broken)."""
    def bodies(deco: Any) -> tuple[type, type, type]:
        @deco
        class P:
            x: int
            y: int = 0

        class Sub(P):   # type: ignore[valid-type, misc]
            def __init__(self, z: str) -> None:
                super().__init__(len(z), 1)   # type: ignore[call-arg]

        @dataclasses.dataclass(frozen=True)
        class D(P):    # type: ignore[valid-type, misc]
            z: int = 5

        return P, Sub, D

    mine = bodies(record(frozen=True))
    ref = bodies(dataclasses.dataclass(frozen=True))
    for a, b in zip(mine, ref, strict=True):
        assert dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b)
        assert str(inspect.signature(a)) == str(inspect.signature(b)), a
        assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
        assert (a.__doc__ or "").replace("mine", "") == (b.__doc__ or "").replace("ref", "")
    assert dataclasses.asdict(mine[1]("abc")) == {"x": 3, "y": 1}
    assert dataclasses.asdict(mine[2](1, 2)) == {"x": 1, "y": 2, "z": 5}
    assert not hasattr(mine[0](1), "__signature__")


def test_what_the_body_writes_itself_is_what_introspection_sees() -> None:
    """An explicit ``__init__`` gives the class's signature and doc, as with
    @dataclass; an empty docstring is replaced as @dataclass replaces it; a
    field named ``self`` can be passed by keyword; the methods belong to the
    class's module."""
    def bodies(deco: Any) -> tuple[type, type, type]:
        @deco
        class Own:
            a: int

            def __init__(self, q: str) -> None:
                object.__setattr__(self, "a", len(q))

        @deco
        class E:
            ""
            a: int

        @deco
        class S:
            self: int
            other: int = 0

        return Own, E, S

    mine, ref = bodies(record(frozen=True)), bodies(dataclasses.dataclass(frozen=True))
    for a, b in zip(mine, ref, strict=True):
        assert str(inspect.signature(a)) == str(inspect.signature(b)), a
        assert a.__doc__ == b.__doc__, a
    assert vars(mine[0]("abc")) == vars(ref[0]("abc")) == {"a": 3}
    assert vars(mine[2](self=1)) == vars(ref[2](self=1)) == {"self": 1, "other": 0}
    assert vars(mine[2])["__init__"].__module__ == __name__ == vars(mine[2])["__eq__"].__module__


def test_record_refuses_keyword_only_fields_and_its_own_setattr() -> None:
    with pytest.raises(TypeError, match="KW_ONLY"):
        @record
        class K:
            a: int
            _: dataclasses.KW_ONLY
            b: int = 0
    with pytest.raises(TypeError, match="its own __setattr__"):
        @record
        class T:
            a: int

            def __setattr__(self, name: str, value: Any) -> None:
                object.__setattr__(self, name, value)
