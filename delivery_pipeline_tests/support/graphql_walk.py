"""Everything a GraphQL API will say about an object: queries built from its schema.

``Walker(schema)`` reads the server's own introspection and, for a root field,
selects every field that needs no argument, descending into objects, unions
and interfaces down to a depth. A test that asks this of Dagster's webserver
reads what the UI can read, not a list of fields someone thought of.

Each (type, depth) is one named fragment, so a query stays the size of the
schema rather than of every path through it. Union and interface branches
alias their fields by type, so two branches with a field of the same name
and different types never conflict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

INTROSPECTION = """
fragment Ref on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
}
query {
  __schema {
    queryType { name }
    types {
      kind name
      fields { name args { name defaultValue type { ...Ref } } type { ...Ref } }
      possibleTypes { name }
    }
  }
}
"""

_LEAVES = ("SCALAR", "ENUM")


def _named(ref: dict[str, Any]) -> dict[str, Any]:
    while ref.get("ofType"):
        ref = ref["ofType"]
    return ref


def _required(arg: dict[str, Any]) -> bool:
    return arg["type"]["kind"] == "NON_NULL" and arg["defaultValue"] is None


@dataclass
class Walker:
    schema: dict[str, Any]
    # fields never selected, as ``Type.field`` patterns (``AssetNode.*ByPartition``):
    # the same nodes again, or fields that fail for every object of a kind
    skip: tuple[str, ...] = ()
    _types: dict[str, dict[str, Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._types = {t["name"]: t for t in self.schema["__schema"]["types"]}
        self._root = self.schema["__schema"]["queryType"]["name"]

    def query(self, root: str, args: str = "", depth: int = 3) -> str:
        """``query { root(args) { … } }`` with every field ``depth`` levels deep."""
        fragments: dict[str, str] = {}
        field_type = next(f for f in self._types[self._root]["fields"] if f["name"] == root)
        selection = self._spread(_named(field_type["type"])["name"], depth, fragments)
        return f"query {{ {root}{args} {{ {selection} }} }} " + " ".join(fragments.values())

    def _spread(self, type_name: str, depth: int, fragments: dict[str, str]) -> str:
        """``...T_depth`` for ``type_name``, defining the fragment once; "" if it is empty."""
        name = f"{type_name}_{depth}"
        if name not in fragments:  # (depth falls at every level: never re-entered)
            body = self._body(type_name, depth, fragments)
            if not body:
                return ""
            fragments[name] = f"fragment {name} on {type_name} {{ {body} }}"
        return f"...{name}"

    def _body(self, type_name: str, depth: int, fragments: dict[str, str]) -> str:
        kind = self._types[type_name]["kind"]
        if kind in ("UNION", "INTERFACE"):
            branches = []
            for possible in self._types[type_name]["possibleTypes"] or []:
                inner = self._fields(possible["name"], depth, fragments, alias=possible["name"])
                if inner:
                    branches.append(f"... on {possible['name']} {{ {inner} }}")
            return " ".join(["__typename", *branches])
        return self._fields(type_name, depth, fragments)

    def _skipped(self, type_name: str, name: str) -> bool:
        return any(fnmatchcase(f"{type_name}.{name}", pattern) for pattern in self.skip)

    def _fields(
        self, type_name: str, depth: int, fragments: dict[str, str], alias: str | None = None
    ) -> str:
        parts = []
        for f in self._types[type_name]["fields"] or []:
            if any(_required(a) for a in f["args"]) or self._skipped(type_name, f["name"]):
                continue
            named = _named(f["type"])
            key = f"{alias}__{f['name']}: {f['name']}" if alias else f["name"]
            if named["kind"] in _LEAVES:
                parts.append(key)
            elif depth > 0:
                inner = self._spread(named["name"], depth - 1, fragments)
                if inner:
                    parts.append(f"{key} {{ {inner} }}")
        return " ".join(parts)
