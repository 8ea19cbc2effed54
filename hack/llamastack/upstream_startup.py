#!/usr/bin/env python3
"""Run upstream Llama Stack's own start-up path over run configs.

A maintainer's check, never run by CI (CI has no upstream checkout): point it at
an upstream llamastack/llama-stack checkout at a pinned tag and give it run
configs; it prints one JSON verdict per file, {"file", "ok", "error"}, and
for an accepted file "dropped": the keys with a value that upstream's models
at the tag do not have and silently drop (pydantic's extra="ignore").

    python3 hack/llamastack/upstream_startup.py --upstream /tmp/ls/v0.3.0 \
        [--env NAME=VALUE ...] [--home DIR] FILE...

A FILE.env beside a FILE (a YAML mapping of variables) adds to the
environment of that file's check (the container's environment of a generated
config). Use it through upstream-startup.sh, which shapes the sandbox.

What runs is upstream's code at the tag: the server's config loading
(replace_env_vars, cast_image_name_to_string, StackRunConfig), `llama stack
run`'s external_providers_dir creation, and Stack.initialize(): storage
registration, the distribution registry, upstream's provider registry and
resolver (validate_and_prepare_providers, the dependency sort and
instantiate_providers' dependency check), the internal implementations
(prompts, conversations), register_resources through upstream's routing
tables, refresh and the vector-store checks.

What cannot run here is replaced, and only that:
  * third-party modules that are not installed (fastapi, httpx, torch, ...)
    are empty stand-in modules, so upstream's modules import;
  * a provider's implementation (get_provider_impl / get_adapter_impl) is a
    stand-in object, after upstream's config class of the provider has
    validated the provider's config (config_class(**config));
  * kv and sql stores are in memory (sqlite/postgres drivers are not
    installed); every sqlite db_path a store opens is recorded as a write.
Paths the server writes are reported in "writes" so the caller can check them
against the pod's writable volumes.
"""

import argparse
import asyncio
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import sys
import tempfile
import traceback
import types


# ------------------------------------------------------------ the package
# Upstream's package: llama_stack (0.2 to 0.7), ogx from 0.8.0 (the project
# was renamed OGX; src/ogx, src/ogx_api). Module names and paths below are
# written for llama_stack and mapped to the package at the tag by up().
PACKAGES = ("llama_stack", "ogx")
PKG = "llama_stack"


def package_of(root):
    """The upstream package under root (the folder holding it): the one with
    core/stack.py; None when there is none."""
    found = [p for p in PACKAGES if os.path.isfile(os.path.join(root, p, "core", "stack.py"))]
    return found[0] if len(found) == 1 else None


def use_package(root):
    """Sets PKG from the package under root; returns it."""
    global PKG
    p = package_of(root)
    if p is None:
        sys.exit("no single upstream package (%s) with core/stack.py under %s" % (", ".join(PACKAGES), root))
    PKG = p
    return p


def up(name):
    """A module name or path written for llama_stack, in the package at the
    tag: llama_stack.core.stack -> ogx.core.stack, llama_stack/core/x.py ->
    ogx/core/x.py (llama_stack_api -> ogx_api)."""
    for sep in (".", "/", "_api"):
        if name == "llama_stack" or name.startswith("llama_stack" + sep):
            return PKG + name[len("llama_stack"):]
    return name


# ---------------------------------------------------------------- stand-ins
class _AnyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        sub = _AnyMeta(name, (cls,), {})
        setattr(cls, name, sub)
        return sub


class _Anything(metaclass=_AnyMeta):
    """A stand-in for anything a missing third-party module exports."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]  # used as a decorator
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __class_getitem__(cls, item):
        return cls

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __getitem__(self, item):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        # a fresh class per name, so it can be subclassed and used in annotations
        cls = type(name, (_Anything,), {"__module__": self.__name__})
        setattr(self, name, cls)
        return cls


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: whatever nothing else can import becomes a stub."""

    def __init__(self, root):
        self.root = root
        self.stubbed = set()

    def find_spec(self, fullname, path, target=None):
        top = fullname.split(".")[0]
        # upstream's own packages (llama_stack; llama_stack_api from 0.4 on)
        if top in PACKAGES or os.path.isdir(os.path.join(self.root, top)) or not self._from_upstream():
            return None
        self.stubbed.add(fullname.split(".")[0])
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _from_upstream(self):
        """Whether the import statement being run is upstream's own: only
        upstream's imports are stubbed, never the standard library's optional
        ones or pydantic's."""
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename.startswith("<frozen"):
            f = f.f_back
        return f is not None and f.f_code.co_filename.startswith(self.root)

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


class _Listing(list):
    """An empty listing, whether read as a list or as a response with .data."""

    data = ()
    has_more = False


class _Impl:
    """A provider implementation stand-in: every method is an async no-op
    that returns what a registry expects back (the object registered, or an
    empty listing)."""

    def __init__(self, api):
        self.api = api

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        async def method(*a, **k):
            if name.startswith("list_"):
                return _Listing()
            if name.startswith("register_") and a:
                return a[0]
            return None

        return method


class _MemKV:
    def __init__(self, config=None):
        self.config = config
        _record_store(config)
        self.d = {}

    async def set(self, key, value, expiration=None):
        self.d[key] = value

    async def get(self, key):
        return self.d.get(key)

    async def delete(self, key):
        self.d.pop(key, None)

    async def values_in_range(self, start_key, end_key):
        return [v for k, v in sorted(self.d.items()) if start_key <= k <= end_key]

    async def keys_in_range(self, start_key, end_key):
        return [k for k in sorted(self.d) if start_key <= k <= end_key]

    async def initialize(self):
        pass

    async def shutdown(self):
        pass


class _MemSQL:
    def __init__(self, config=None):
        self.config = config
        _record_store(config)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        async def method(*a, **k):
            if name.startswith("fetch_all"):
                return types.SimpleNamespace(data=[], has_more=False)
            return None

        return method


WRITES = set()
# Keys of the config the models at the tag do not have and (extra is not
# "allow") drop without a word: what the user wrote that has no effect.
DROPPED = []


def _models_in(ann):
    """The pydantic models an annotation holds, with how values reach them
    ("" the value itself, "list" its items, "dict" its values)."""
    import typing

    out = []
    origin = typing.get_origin(ann)
    if isinstance(ann, type) and hasattr(ann, "model_fields"):
        out.append(("", ann))
    elif origin in (list, tuple, set) or origin is getattr(typing, "List", None):
        for a in typing.get_args(ann)[:1]:
            out += [("list", m) for how, m in _models_in(a) if how == ""]
    elif origin is dict:
        args = typing.get_args(ann)
        if len(args) == 2:
            out += [("dict", m) for how, m in _models_in(args[1]) if how == ""]
    else:
        for a in typing.get_args(ann):
            out += _models_in(a)
    return out


def _empty(v):
    return v is None or v == [] or v == {}


def dropped_keys(cls, data, at):
    """Records in DROPPED each key of data (a mapping validated by cls) and
    of the mappings its fields' models validate that the model lacks."""
    if not isinstance(data, dict) or not hasattr(cls, "model_fields"):
        return
    names = {}
    for name, f in cls.model_fields.items():
        names[name] = f
        for alias in (f.alias, f.validation_alias if isinstance(f.validation_alias, str) else None):
            if alias:
                names[alias] = f
    allow = (getattr(cls, "model_config", {}) or {}).get("extra") == "allow"
    for k, v in data.items():
        f = names.get(k)
        if f is None:
            if not allow and not _empty(v):
                DROPPED.append(at + str(k))
            continue
        models = _models_in(f.annotation)
        if len(models) != 1:
            continue
        how, m = models[0]
        if how == "" and isinstance(v, dict):
            dropped_keys(m, v, at + str(k) + ".")
        elif how == "list" and isinstance(v, list):
            for i, e in enumerate(v):
                dropped_keys(m, e, "%s%s[%d]." % (at, k, i))
        elif how == "dict" and isinstance(v, dict):
            for kk, e in v.items():
                dropped_keys(m, e, "%s%s.%s." % (at, k, kk))

# Providers whose own implementation runs (they need nothing that is missing
# here, and the server's start-up reads what they list: the default embedding
# model of vector_stores is the one inline::sentence-transformers lists).
REAL_PROVIDERS = {"inference": ("inline::sentence-transformers", "inline::transformers")}


def _record_store(cfg):
    """A sqlite store's driver makes its folder and file (kvstore/sqlite,
    sqlstore/sqlalchemy_sqlstore): so does its stand-in, for real, so that a
    path on a read-only filesystem fails as it would in the pod."""
    db_path = getattr(cfg, "db_path", None)
    if db_path and db_path != ":memory:":
        db_path = str(db_path)
        WRITES.add(os.path.dirname(db_path))
        os.makedirs(os.path.dirname(db_path), exist_ok=True)
        open(db_path, "a").close()


def _patch_upstream():
    """Replace what needs drivers that are not installed (see the module doc)."""
    resolver = importlib.import_module(up("llama_stack.core.resolver"))

    real_instantiate = resolver.instantiate_provider

    async def instantiate_provider(provider, deps, inner_impls, dist_registry, run_config, policy):
        spec = provider.spec
        if isinstance(spec, (resolver.AutoRoutedProviderSpec, resolver.RoutingTableProviderSpec)) or \
                spec.provider_type in REAL_PROVIDERS.get(spec.api.value, ()):
            return await real_instantiate(provider, deps, inner_impls, dist_registry, run_config, policy)
        if getattr(spec, "config_class", None):
            try:
                cls = resolver.instantiate_class_type(spec.config_class)
            except Exception:
                cls = None  # the config module needs what is not installed
            if cls is not None and hasattr(cls, "model_validate"):
                cfg = cls(**provider.config)
                dropped_keys(cls, provider.config, "providers.%s[%s].config." % (spec.api.value, provider.provider_id))
                for v in vars(cfg).values() if hasattr(cfg, "__dict__") else []:
                    _record_store(v)
                if getattr(cfg, "storage_dir", None):  # inline::localfs files
                    WRITES.add(str(cfg.storage_dir))
                    os.makedirs(str(cfg.storage_dir), exist_ok=True)
        impl = _Impl(spec.api)
        impl.__provider_id__ = provider.provider_id
        impl.__provider_spec__ = spec
        impl.__provider_config__ = provider.config
        return impl

    resolver.instantiate_provider = instantiate_provider

    # the store drivers: upstream resolves references and dispatches on the
    # backend type itself; only the driver class is in memory
    # (providers/utils/{kvstore,sqlstore} up to 0.3, core/storage/ from 0.4)
    drivers = {
        "kvstore.sqlite": "SqliteKVStoreImpl",
        "kvstore.redis": "RedisKVStoreImpl",
        "kvstore.postgres": "PostgresKVStoreImpl",
        "kvstore.mongodb": "MongoDBKVStoreImpl",
        "sqlstore.sqlalchemy_sqlstore": "SqlAlchemySqlStoreImpl",
    }
    for modname, cls in drivers.items():
        patched = 0
        for where in ("llama_stack.providers.utils.", "llama_stack.core.storage."):
            try:
                mod = importlib.import_module(up(where + modname))
            except ModuleNotFoundError as e:
                if e.name and e.name.startswith(up(where.rstrip("."))):
                    continue  # not at this tag
                raise
            base = _MemSQL if "sqlstore" in modname else _MemKV
            setattr(mod, cls, type(cls, (base,), {}))
            patched += 1
        if not patched:
            raise SystemExit("no store driver module %s at this tag: review upstream_startup.py" % modname)
    return


_PEP695_DEF = re.compile(r"^(\s*(?:async\s+)?def\s+\w+)\[([^\]]+)\]\(", re.M)
_PEP695_CLASS = re.compile(r"^(\s*class\s+\w+)\[([^\]]+)\]:", re.M)
_PEP695_TYPE = re.compile(r"^(\s*)type\s+(\w+)\s*=", re.M)


def _py311(source):
    """Upstream targets Python 3.12; only python3.11 has pydantic here. Rewrite
    the few PEP 695 forms (generic def/class, type aliases) into their 3.11
    equivalents, changing nothing else."""
    names = set()

    def params(text):
        for p in text.split(","):
            names.add(p.split(":")[0].strip())

    def d(m):
        params(m.group(2))
        return m.group(1) + "("

    def c(m):
        params(m.group(2))
        return "%s(__import__('typing').Generic[%s]):" % (m.group(1), m.group(2).split(":")[0])

    source = _PEP695_DEF.sub(d, source)
    source = _PEP695_CLASS.sub(c, source)
    source = _PEP695_TYPE.sub(lambda m: "%s%s =" % (m.group(1), m.group(2)), source)
    if names:
        decl = "".join("%s = __import__('typing').TypeVar(%r)\n" % (n, n) for n in sorted(names))
        # after `from __future__` imports, which must come first
        lines = source.split("\n")
        at = max([i + 1 for i, l in enumerate(lines) if l.startswith("from __future__")] or [0])
        lines.insert(at, decl)
        source = "\n".join(lines)
    return source


class _Loader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):
        return compile(_py311(data.decode("utf-8")), path, "exec", dont_inherit=True, optimize=_optimize)


class _UpstreamFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: upstream's modules (every package of the
    checkout's root: llama_stack, and llama_stack_api from 0.4 on) load
    through _Loader."""

    def __init__(self, root=None):
        self.root = root

    def find_spec(self, fullname, path, target=None):
        top = fullname.split(".")[0]
        if top not in PACKAGES and not (self.root and os.path.isdir(os.path.join(self.root, top))):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            spec.loader = _Loader(fullname, spec.origin)
        return spec


# ---------------------------------------------------------------- the check
def run_py_path(stackmod):
    """cli/stack/run.py of the package at the tag (`llama stack run`)."""
    return os.path.join(os.path.dirname(stackmod.__file__), "..", "cli", "stack", "run.py")


def check(path):
    import yaml

    stackmod = importlib.import_module(up("llama_stack.core.stack"))
    datatypes = importlib.import_module(up("llama_stack.core.datatypes"))
    # StackRunConfig read from run.yaml up to 0.3; StackConfig (config.yaml,
    # distro_name with image_name a deprecated alias) from 0.4
    config_cls = getattr(datatypes, "StackConfig", None) or datatypes.StackRunConfig
    cast = getattr(stackmod, "cast_distro_name_to_string", None) or stackmod.cast_image_name_to_string
    run_py = open(run_py_path(stackmod)).read()

    WRITES.clear()
    del DROPPED[:]
    with open(path) as f:
        contents = yaml.safe_load(f)
    config = stackmod.replace_env_vars(contents)
    config = cast(config)
    dropped_keys(config_cls, config, "")
    config = config_cls(**config)
    # the command that runs uvicorn (cli/stack/run.py; core/server/server.py
    # main at 0.2) hands it the TLS files only as a pair: one alone is
    # silently without effect (plain HTTP), as a dropped key is
    server_py = os.path.join(os.path.dirname(stackmod.__file__), "server", "server.py")
    if any("if keyfile and certfile:" in open(f).read() for f in (run_py_path(stackmod), server_py)):
        s = config.server
        if bool(getattr(s, "tls_keyfile", None)) != bool(getattr(s, "tls_certfile", None)):
            DROPPED.append("server.tls_keyfile" if getattr(s, "tls_keyfile", None) else "server.tls_certfile")
    # `llama stack run` (cli/stack/run.py) makes external_providers_dir at
    # start: always up to 0.3 (a folder "None" when unset), only when set from 0.4
    if "if config.external_providers_dir and not os.path.exists" not in run_py or config.external_providers_dir:
        WRITES.add(str(config.external_providers_dir))
        if not os.path.exists(str(config.external_providers_dir)):
            os.makedirs(str(config.external_providers_dir), exist_ok=True)
    s = stackmod.Stack(config)
    asyncio.run(s.initialize())
    return sorted(WRITES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True, help="an upstream checkout at a tag")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE in the server's environment")
    ap.add_argument("--home", default="/tmp", help="$HOME of the server")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    os.environ["HOME"] = args.home
    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    use_package(os.path.abspath(args.upstream))
    sys.path.insert(0, os.path.abspath(args.upstream))
    finder = _StubFinder(os.path.abspath(args.upstream) + os.sep)
    sys.meta_path.append(finder)
    sys.meta_path.insert(0, _UpstreamFinder(os.path.abspath(args.upstream)))
    sys.dont_write_bytecode = True
    import logging

    logging.disable(logging.CRITICAL)

    # the API package (<pkg>_api from 0.4 on) reads no environment: imported
    # once here, before the processes fork, it is not imported again for
    # every file (most of the import time)
    if os.path.isdir(os.path.join(os.path.abspath(args.upstream), PKG + "_api")):
        importlib.import_module(PKG + "_api")

    for f in args.files:
        # one process per file, as one server per pod: upstream keeps state
        # in module globals (backends, registries) that must not carry over
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            out = {"file": f}
            # FILE.env beside FILE (a YAML mapping): that server's environment
            env_file = os.path.splitext(f)[0] + ".env"
            if os.path.exists(env_file):
                import yaml

                with open(env_file) as ef:
                    for k, v in (yaml.safe_load(ef) or {}).items():
                        os.environ[k] = str(v)
            try:
                # imported here, after the environment is set: upstream reads
                # some of it at import (core/utils/config_dirs.py reads
                # LLAMA_STACK_CONFIG_DIR), as the server does at its start
                importlib.import_module(up("llama_stack.core.stack"))
                _patch_upstream()
                out["writes"] = check(f)
                out["ok"] = True
                out["dropped"] = sorted(DROPPED)
            except BaseException as e:  # upstream raises many kinds
                out["ok"] = False
                out["error"] = "%s: %s" % (type(e).__name__, e)
                if os.environ.get("UPSTREAM_TRACE"):
                    out["trace"] = traceback.format_exc()
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        print(data.decode() or json.dumps({"file": f, "ok": False, "error": "the check died"}), flush=True)

if __name__ == "__main__":
    main()
