"""Record classes: dataclasses whose methods are not compiled at import.

``@dataclass`` writes each generated method (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, and a frozen class's ``__setattr__`` and
``__delattr__``) as source text and compiles it with ``exec`` when the class
is created: about 4M instructions, 0.4 ms, for a class of six fields on
CPython 3.11, paid by every process that imports the module, whether or not
it makes one instance.  A read command imports ten to twenty such classes,
which was a tenth of its start-up (docs/PERFORMANCE.md).

:func:`record` makes the same class from the same body without compiling
anything: the methods are closures over the field names, and what only
introspection asks for -- ``__dataclass_fields__``, ``__dataclass_params__``,
the class's ``__signature__`` and, when the class has no docstring, its
``__doc__`` -- comes from a real dataclass of the same body (the *twin*),
made the first time something asks.  So ``dataclasses.is_dataclass``,
``fields``, ``asdict``, ``replace``, ``inspect.signature``, ``repr``, ``==``,
``hash``, pattern matching, pickling and the frozen errors behave as with
``@dataclass`` (``tests/test_record.py`` compares every record class of the
core with its twin), and a call that ``__init__`` cannot bind goes to the
twin's ``__init__``, so its TypeError is the one ``@dataclass`` would raise.

Only what the core's records use is supported: ``frozen`` (``eq`` is always
on), fields with a default or a ``field(default=, default_factory=, repr=,
compare=, hash=, metadata=)``, ``__post_init__``, and methods of the body's
own (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``), which are kept as
``@dataclass`` keeps them.  Anything else (``ClassVar``, ``InitVar`` or
``KW_ONLY`` fields, ``init=False`` or keyword-only fields, a base class,
``__slots__``, a ``__setattr__`` of the body's own) is a TypeError when the
class is made: use ``@dataclass`` for it.  A subclass of a record class is
seen as a subclass of a dataclass is.  One difference remains, in what only
introspection of the methods themselves sees: ``Cls.__init__`` is the
shared ``(self, /, *args, **kwargs)``, its signature not the fields' (that
of ``Cls`` is).
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")
_MISSING = dataclasses.MISSING
_LAZY = ("__dataclass_fields__", "__dataclass_params__", "__signature__")


@dataclass_transform(eq_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[_T] | None = None, /, *, frozen: bool = False) -> Any:
    """``@dataclass`` or ``@dataclass(frozen=True)``, made without ``exec``
    (see the module's docstring)."""
    def wrap(c: type[_T]) -> type[_T]:
        _make(c, frozen)
        return c

    return wrap if cls is None else wrap(cls)


class _Twin:
    """A class attribute that only introspection reads, taken from the
    twin of the record class that defines it the first time it is read.
    ``__dataclass_fields__`` and ``__dataclass_params__`` are then stored in
    its place (a subclass inherits them, as it would a dataclass's);
    ``__signature__`` stays this descriptor and is the record class's own
    only: a subclass, or an instance, has none (``inspect.signature`` then
    looks at their ``__init__`` or ``__call__``, as for a dataclass)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.signature: Any = None

    def __get__(self, obj: object, owner: type) -> Any:
        record_class = _record_class_of(owner)
        if self.name == "__signature__":
            if obj is not None or owner is not record_class:
                raise AttributeError("__signature__")
            if self.signature is None:
                import inspect

                self.signature = inspect.signature(_twin_of(record_class))
            return self.signature
        value = getattr(_twin_of(record_class), self.name)
        type.__setattr__(record_class, self.name, value)
        return value


class _Doc:
    """The ``__doc__`` of a class without a docstring: the twin's (what
    ``@dataclass`` writes there, its signature), made when first read.
    (A class's ``__doc__`` is its own: a subclass never reads this one.)"""

    def __get__(self, obj: object, owner: type) -> Any:
        doc = _twin_of(_record_class_of(owner)).__doc__
        owner.__doc__ = doc
        return doc


def _record_class_of(cls: type) -> type:
    """The class made by ``@record`` that ``cls`` is or derives from."""
    for c in cls.__mro__:
        if "__record_spec__" in c.__dict__:
            return c
    raise TypeError(f"{cls.__qualname__} is not a record class")  # pragma: no cover


def _twin_of(cls: type) -> type:
    """The real dataclass of ``cls``'s body (made once, kept on ``cls``)."""
    twin = cls.__dict__.get("__record_twin__")
    if twin is None:
        spec = cls.__dict__["__record_spec__"]
        ns: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                              "__annotations__": dict(spec["annotations"])}
        doc = cls.__dict__.get("__doc__")
        if isinstance(doc, str):
            ns["__doc__"] = doc
        for name, value in spec["defaults"].items():
            ns[name] = value.field() if isinstance(value, _FieldSpec) else value
        for name in ("__post_init__", *spec["explicit"]):   # the body's own methods
            if name in cls.__dict__:
                ns[name] = cls.__dict__[name]
        twin = dataclasses.dataclass(frozen=spec["frozen"])(type(cls.__name__, (), ns))
        type.__setattr__(cls, "__record_twin__", twin)
    return twin


class _FieldSpec:
    """A ``field(...)`` of the class body, remade as a fresh Field for each
    twin (a Field belongs to the one dataclass that processed it)."""

    def __init__(self, f: dataclasses.Field[Any]) -> None:
        self.f = f

    def field(self) -> dataclasses.Field[Any]:
        f = self.f
        kw: dict[str, Any] = {"repr": f.repr, "hash": f.hash, "compare": f.compare,
                              "metadata": f.metadata}
        if f.default is not _MISSING:
            kw["default"] = f.default
        if f.default_factory is not _MISSING:
            kw["default_factory"] = f.default_factory
        made: dataclasses.Field[Any] = dataclasses.field(**kw)
        return made


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function of an instance: the tuple of those attributes."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if len(names) == 1:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _make(cls: type, frozen: bool) -> None:
    if cls.__bases__ != (object,) or "__slots__" in cls.__dict__:
        raise TypeError(f"@record {cls.__qualname__}: no base class and no __slots__ (use @dataclass)")
    if frozen and ("__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__):
        raise TypeError(f"Cannot overwrite attribute __setattr__ or __delattr__ in class "
                        f"{cls.__name__}")
    if "__setattr__" in cls.__dict__:
        # (the fields are set in the instance's __dict__, not through it)
        raise TypeError(f"@record {cls.__qualname__}: a class with its own __setattr__ is not "
                        "supported (use @dataclass)")
    annotations = dict(getattr(cls, "__annotations__", {}))
    names: list[str] = []
    defaults: dict[str, Any] = {}        # name -> default value
    factories: dict[str, Callable[[], Any]] = {}
    twin_defaults: dict[str, Any] = {}   # what the twin's body holds
    repr_names: list[str] = []
    eq_names: list[str] = []
    hash_names: list[str] = []
    for name, tp in annotations.items():
        text = tp if isinstance(tp, str) else repr(tp)
        if "ClassVar" in text or "InitVar" in text or "KW_ONLY" in text \
                or tp is dataclasses.KW_ONLY:
            raise TypeError(f"@record {cls.__qualname__}.{name}: ClassVar, InitVar and KW_ONLY "
                            "fields are not supported (use @dataclass)")
        value = cls.__dict__.get(name, _MISSING)
        show = compare = True
        hashed: bool | None = None
        if isinstance(value, dataclasses.Field):
            if not value.init or value.kw_only is True:
                raise TypeError(f"@record {cls.__qualname__}.{name}: init=False and kw_only "
                                "fields are not supported (use @dataclass)")
            show, compare, hashed = value.repr, value.compare, value.hash
            twin_defaults[name] = _FieldSpec(value)
            if value.default_factory is not _MISSING:
                factories[name] = value.default_factory
                delattr(cls, name)
            elif value.default is not _MISSING:
                defaults[name] = value.default
                setattr(cls, name, value.default)
            else:
                delattr(cls, name)
        elif value is not _MISSING:
            defaults[name] = twin_defaults[name] = value
        if name in defaults and defaults[name].__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(defaults[name])} for field {name} is not "
                             "allowed: use default_factory")
        if name not in defaults and name not in factories and (defaults or factories):
            raise TypeError(f"non-default argument {name!r} follows default argument")
        names.append(name)
        if show:
            repr_names.append(name)
        if compare:
            eq_names.append(name)
        if hashed or (hashed is None and compare):
            hash_names.append(name)
    n = len(names)
    # the defaults of the fields from position k on, for a call with k
    # positional arguments and no keywords (None: some of them has none, or
    # a factory, so such a call takes the general way)
    tails: list[dict[str, Any] | None] = []
    for k in range(n + 1):
        rest = names[k:]
        ok = all(r in defaults for r in rest)
        tails.append({r: defaults[r] for r in rest} if ok else None)
    post_init = hasattr(cls, "__post_init__")
    explicit = {m for m in ("__init__", "__repr__", "__eq__", "__hash__") if m in cls.__dict__}
    if cls.__dict__.get("__hash__", _MISSING) is None and "__eq__" in cls.__dict__:
        explicit.discard("__hash__")
    type.__setattr__(cls, "__record_spec__", {"annotations": annotations, "defaults": twin_defaults,
                                              "frozen": frozen, "explicit": explicit})

    def twin_init(self: Any, /, *args: Any, **kwargs: Any) -> None:
        # a call the fast ways do not bind: the dataclass's own __init__ binds
        # it, or raises the TypeError @dataclass would
        _twin_of(cls).__init__(self, *args, **kwargs)  # type: ignore[misc]

    def __init__(self: Any, /, *args: Any, **kwargs: Any) -> None:
        k = len(args)
        rest = tails[k] if not kwargs and k <= n else None
        if rest is not None:        # positional, the rest plain defaults
            self.__dict__.update(zip(names, args, strict=False))
            if rest:
                self.__dict__.update(rest)
        else:
            if k > n:
                return twin_init(self, *args, **kwargs)
            values = dict(zip(names, args, strict=False))
            used = 0
            for name in names[k:]:
                if name in kwargs:
                    values[name] = kwargs[name]
                    used += 1
                elif name in defaults:
                    values[name] = defaults[name]
                elif name in factories:
                    values[name] = factories[name]()
                else:
                    return twin_init(self, *args, **kwargs)
            if used != len(kwargs):
                return twin_init(self, *args, **kwargs)
            self.__dict__.update(values)
        if post_init:
            self.__post_init__()
        return None

    methods: dict[str, Any] = {"__init__": __init__}

    shown = [(name, name + "=") for name in repr_names]

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        text: str = self.__class__.__qualname__
        return text + "(" + ", ".join([label + repr(getattr(self, name))
                                       for name, label in shown]) + ")"

    methods["__repr__"] = __repr__
    eq_key = _key(eq_names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return eq_key(self) == eq_key(other)
        return NotImplemented

    methods["__eq__"] = __eq__
    if "__hash__" not in explicit:
        if frozen:
            hash_key = _key(hash_names)

            def __hash__(self: Any) -> int:
                return hash(hash_key(self))

            methods["__hash__"] = __hash__
        else:
            type.__setattr__(cls, "__hash__", None)
    if frozen:
        fieldset = frozenset(names)
        error = dataclasses.FrozenInstanceError

        def __setattr__(self: Any, name: str, value: Any) -> None:
            if type(self) is cls or name in fieldset:
                raise error(f"cannot assign to field {name!r}")
            super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

        def __delattr__(self: Any, name: str) -> None:
            if type(self) is cls or name in fieldset:
                raise error(f"cannot delete field {name!r}")
            super(cls, self).__delattr__(name)  # type: ignore[arg-type]

        methods["__setattr__"] = __setattr__
        methods["__delattr__"] = __delattr__
    for name, fn in methods.items():
        if name in explicit:
            continue
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__module__ = cls.__module__
        type.__setattr__(cls, name, fn)
    if "__match_args__" not in cls.__dict__:
        type.__setattr__(cls, "__match_args__", tuple(names))
    for name in _LAZY:
        type.__setattr__(cls, name, _Twin(name))
    if not cls.__dict__.get("__doc__"):   # (an empty one too, as @dataclass does)
        type.__setattr__(cls, "__doc__", _Doc())
    if sys.version_info >= (3, 13):
        def __replace__(self: Any, /, **changes: Any) -> Any:
            return dataclasses.replace(self, **changes)

        __replace__.__qualname__ = f"{cls.__qualname__}.__replace__"
        __replace__.__module__ = cls.__module__
        type.__setattr__(cls, "__replace__", __replace__)
