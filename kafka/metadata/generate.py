#!/usr/bin/env python3
"""Generates corum-kafka's Rust types for Kafka's KRaft metadata records from Kafka's own specs.

Usage (Python 3.11, standard library only; rustfmt from the PATH, or $RUSTFMT):

    compat/install.sh                                  # once: Kafka's jars into compat/jars
    python3 kafka/metadata/generate.py                 # rewrites the checked-in files
    python3 kafka/metadata/generate.py --out DIR       # writes them under DIR instead
    python3 kafka/metadata/generate.py --jars DIR      # takes the jars from DIR

Where the specs come from: Kafka's jars carry the JSON message specs its own code generator
reads. The metadata records are every `common/metadata/*.json` in
`kafka-metadata-<version>.jar`; KRaftVersionRecord, the one Raft control record the
`kafka-protocol` crate lacks, is `common/message/KRaftVersionRecord.json` in
`kafka-clients-<version>.jar`. This script opens the jars (zip files) and reads the specs
straight from them, so the generated code is exactly as new as the jars `compat/install.sh`
pins (compat/pom.xml). The spec files are JSON with `//` comments.

What it writes (relative to the repository root, or to --out):

    kafka/src/metadata/generated.rs            one struct per record (and per struct-typed
                                               array), its Default (Kafka's field defaults),
                                               validate/size/write/read per Kafka's rules, and
                                               the AnyMetadataRecord enum over all records
    kafka/tests/metadata_support/arbitrary.rs  proptest strategies: any value of a record
                                               that is valid at a given version
    kafka/tests/metadata_support/json.rs       a record as the JSON Kafka's generated
                                               *JsonConverter classes write, to compare the
                                               values Kafka decoded with corum's

Both go through rustfmt, so `cargo fmt` leaves them as they are. The test
`kafka/tests/metadata_generated.rs` runs this script into a temporary directory and fails
when the output differs from the checked-in files; after a Kafka upgrade (new jars), rerun
the script and review the diff.

The script refuses anything in a spec it does not know how to express (an unknown key, a
struct-typed field that is not an array, common structs, field-level flexible versions, ...)
rather than guess.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from dataclasses import dataclass, field as dc_field
from pathlib import Path

KAFKA_VERSION = "4.1.2"

# (jar, directory inside it, the files to take: None for every .json file there)
SOURCES = [
    (f"kafka-metadata-{KAFKA_VERSION}.jar", "common/metadata/", None),
    (f"kafka-clients-{KAFKA_VERSION}.jar", "common/message/", ["KRaftVersionRecord.json"]),
]

GENERATED_RS = "kafka/src/metadata/generated.rs"
ARBITRARY_RS = "kafka/tests/metadata_support/arbitrary.rs"
JSON_RS = "kafka/tests/metadata_support/json.rs"

REPO = Path(__file__).resolve().parents[2]

# The highest version a spec may name ("N+" means up to here).
VERSION_MAX = 0x7FFF


class SpecError(Exception):
    """A spec this generator cannot express, or a broken spec."""


# --- reading the specs ------------------------------------------------------------------------


def strip_comments(text: str) -> str:
    """JSON text without `//` and `/* */` comments (outside strings), as Kafka's parser allows."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise SpecError("unterminated /* comment")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_specs(jars: Path) -> list[tuple[str, str, dict]]:
    """[(jar name, path in the jar, parsed spec)], in a stable order."""
    specs = []
    for jar_name, directory, names in SOURCES:
        jar = jars / jar_name
        if not jar.is_file():
            raise SpecError(
                f"{jar} is missing: run compat/install.sh (it copies Kafka {KAFKA_VERSION}'s jars "
                "into compat/jars), or pass --jars"
            )
        with zipfile.ZipFile(jar) as z:
            members = sorted(
                m
                for m in z.namelist()
                if m.startswith(directory)
                and m.endswith(".json")
                and "/" not in m[len(directory) :]
                and (names is None or m[len(directory) :] in names)
            )
            if names is not None and len(members) != len(names):
                raise SpecError(f"{jar_name}: expected {names} under {directory}, found {members}")
            if not members:
                raise SpecError(f"{jar_name}: no specs under {directory}")
            for m in members:
                text = z.read(m).decode("utf-8")
                try:
                    spec = json.loads(strip_comments(text))
                except json.JSONDecodeError as e:
                    raise SpecError(f"{jar_name}!{m}: {e}") from e
                specs.append((jar_name, m, spec))
    return specs


# --- versions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; lo > hi is empty."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: str, what: str) -> "Versions":
        text = text.strip()
        if text in ("", "none"):
            return NONE
        m = re.fullmatch(r"(\d+)\+", text)
        if m:
            return Versions(int(m.group(1)), VERSION_MAX)
        m = re.fullmatch(r"(\d+)-(\d+)", text)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise SpecError(f"{what}: empty version range {text!r}")
            return Versions(lo, hi)
        m = re.fullmatch(r"\d+", text)
        if m:
            return Versions(int(text), int(text))
        raise SpecError(f"{what}: cannot read versions {text!r}")

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: "Versions") -> "Versions":
        v = Versions(max(self.lo, other.lo), min(self.hi, other.hi))
        return NONE if v.empty else v

    def contains(self, other: "Versions") -> bool:
        return other.empty or (self.lo <= other.lo and other.hi <= self.hi)

    def subtract(self, other: "Versions", what: str) -> "Versions":
        """self minus other, which must leave one range."""
        cut = self.intersect(other)
        if cut.empty:
            return self
        if cut == self:
            return NONE
        if cut.lo == self.lo:
            return Versions(cut.hi + 1, self.hi)
        if cut.hi == self.hi:
            return Versions(self.lo, cut.lo - 1)
        raise SpecError(f"{what}: {self} minus {other} is not one range")

    def __iter__(self):
        return iter(range(self.lo, self.hi + 1) if not self.empty else ())

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == VERSION_MAX:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


@dataclass(frozen=True)
class Cond:
    """Whether `version` (known to lie in some range) is in a subrange: a Rust expression."""

    kind: str  # always | never | ge | le | range
    lo: int = 0
    hi: int = 0

    @staticmethod
    def of(sub: Versions, within: Versions) -> "Cond":
        s = sub.intersect(within)
        if s.empty:
            return Cond("never")
        if s == within:
            return Cond("always")
        if s.lo > within.lo and s.hi < within.hi:
            return Cond("range", s.lo, s.hi)
        if s.lo > within.lo:
            return Cond("ge", s.lo)
        return Cond("le", 0, s.hi)

    @property
    def always(self) -> bool:
        return self.kind == "always"

    @property
    def never(self) -> bool:
        return self.kind == "never"

    def rust(self) -> str:
        return {
            "always": "true",
            "never": "false",
            "ge": f"version >= {self.lo}",
            "le": f"version <= {self.hi}",
            "range": f"({self.lo}..={self.hi}).contains(&version)",
        }[self.kind]

    def rust_not(self) -> str:
        return {
            "always": "false",
            "never": "true",
            "ge": f"version < {self.lo}",
            "le": f"version > {self.hi}",
            "range": f"!({self.lo}..={self.hi}).contains(&version)",
        }[self.kind]


# --- the model --------------------------------------------------------------------------------

# Kafka type -> (Rust type, fixed wire size, wire getter, BufMut putter or None for wire::put_*)
PRIMITIVES = {
    "int8": ("i8", 1, "get_i8", "put_i8"),
    "int16": ("i16", 2, "get_i16", "put_i16"),
    "uint16": ("u16", 2, "get_u16", "put_u16"),
    "int32": ("i32", 4, "get_i32", "put_i32"),
    "uint32": ("u32", 4, "get_u32", "put_u32"),
    "int64": ("i64", 8, "get_i64", "put_i64"),
    "float64": ("f64", 8, "get_f64", "put_f64"),
    "bool": ("bool", 1, "get_bool", None),
    "uuid": ("Uuid", 16, "get_uuid", None),
}
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

FIELD_KEYS = {
    "name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
    "about", "entityType", "mapKey", "ignorable", "fields", "zeroCopy",
}  # fmt: skip
MESSAGE_KEYS = {"apiKey", "type", "name", "validVersions", "flexibleVersions", "fields"}

RUST_KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
    "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
}  # fmt: skip

# Words Kafka capitalises unusually, spelled the way a snake_case name reads best.
SNAKE_WORDS = {"KRaft": "Kraft"}


def snake_case(name: str) -> str:
    for word, plain in SNAKE_WORDS.items():
        name = name.replace(word, plain)
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0:
            prev, nxt = name[i - 1], name[i + 1] if i + 1 < len(name) else ""
            if prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(c.lower())
    s = "".join(out)
    return f"r#{s}" if s in RUST_KEYWORDS else s


def bare(ident: str) -> str:
    return ident.removeprefix("r#")


@dataclass
class Type:
    kind: str  # prim | string | bytes | array | struct
    prim: str = ""  # Kafka primitive name
    elem: "Type | None" = None
    struct: "Struct | None" = None

    def rust(self) -> str:
        if self.kind == "prim":
            return PRIMITIVES[self.prim][0]
        if self.kind == "string":
            return "String"
        if self.kind == "bytes":
            return "Bytes"
        if self.kind == "array":
            return f"Vec<{self.elem.rust()}>"
        return self.struct.rust

    def has_float(self) -> bool:
        if self.kind == "prim":
            return self.prim == "float64"
        if self.kind == "array":
            return self.elem.has_float()
        if self.kind == "struct":
            return self.struct.has_float()
        return False


@dataclass
class Field:
    name: str
    ident: str
    type: Type
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: str
    about: str
    ignorable: bool

    @property
    def optional(self) -> bool:
        """Whether the Rust type is an Option (the field is nullable in some version)."""
        return not self.nullable.intersect(self.versions).empty

    def rust_type(self) -> str:
        t = self.type.rust()
        return f"Option<{t}>" if self.optional else t


@dataclass
class Struct:
    rust: str  # the Rust type's name
    kafka: str  # the name errors use: the record's, or Record.Field for a nested struct
    versions: Versions  # the versions it appears in
    flexible: Versions  # the flexible ones among them
    fields: list[Field] = dc_field(default_factory=list)
    about: str = ""

    def has_float(self) -> bool:
        return any(f.type.has_float() for f in self.fields)

    def defined_tags(self) -> list[int]:
        return sorted(f.tag for f in self.fields if f.tag is not None)


@dataclass
class Message:
    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    struct: Struct
    source: str  # jar!path
    structs: list[Struct]  # this record's struct and its nested ones, outermost first

    @property
    def api_key_rust(self) -> int:
        # Kafka's generated classes answer -1 for a message without an api key.
        return -1 if self.api_key is None else self.api_key


def parse_type(text: str, f: dict, parent: Struct, what: str, structs: list[Struct], flexible: Versions) -> Type:
    if text.startswith("[]"):
        elem_text = text[2:]
        if elem_text.startswith("[]"):
            raise SpecError(f"{what}: arrays of arrays are not supported")
        if elem_text in PRIMITIVES or elem_text in ("string", "bytes"):
            if "fields" in f:
                raise SpecError(f"{what}: an array of {elem_text} with fields")
            return Type("array", elem=parse_type(elem_text, {}, parent, what, structs, flexible))
        if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", elem_text):
            raise SpecError(f"{what}: unknown type {text!r}")
        if "fields" not in f:
            raise SpecError(f"{what}: struct {elem_text} has no fields (common structs are not supported)")
        versions = Versions.parse(f["versions"], what).intersect(parent.versions)
        nested = Struct(
            rust=parent_prefix(parent) + elem_text,
            kafka=f"{parent.kafka}.{f['name']}",
            versions=versions,
            flexible=flexible.intersect(versions),
            about=f.get("about", ""),
        )
        structs.append(nested)
        parse_fields(nested, f["fields"], structs, flexible)
        return Type("array", elem=Type("struct", struct=nested))
    if text in PRIMITIVES:
        return Type("prim", prim=text)
    if text == "string":
        return Type("string")
    if text == "bytes":
        return Type("bytes")
    if text == "records":
        raise SpecError(f"{what}: the records type is not supported")
    raise SpecError(f"{what}: type {text!r} is not supported (only arrays may hold structs)")


def parent_prefix(parent: Struct) -> str:
    return parent.rust


def parse_fields(struct: Struct, fields: list[dict], structs: list[Struct], flexible: Versions) -> None:
    seen_names, seen_tags = set(), {}
    for f in fields:
        what = f"{struct.kafka}.{f.get('name', '?')}"
        unknown = set(f) - FIELD_KEYS
        if unknown:
            raise SpecError(f"{what}: unsupported keys {sorted(unknown)}")
        for key in ("name", "type", "versions"):
            if key not in f:
                raise SpecError(f"{what}: no {key}")
        name = f["name"]
        if name in seen_names:
            raise SpecError(f"{what}: duplicate field")
        seen_names.add(name)
        versions = Versions.parse(f["versions"], what)
        nullable = Versions.parse(f.get("nullableVersions", ""), what)
        tagged = Versions.parse(f.get("taggedVersions", ""), what)
        tag = f.get("tag")
        if (tag is None) != tagged.empty:
            raise SpecError(f"{what}: a tag needs taggedVersions and the other way round")
        if tag is not None:
            if not isinstance(tag, int) or not 0 <= tag <= 2**31 - 1:
                raise SpecError(f"{what}: tag {tag!r}")
            if tag in seen_tags:
                raise SpecError(f"{what}: tag {tag} also used by {seen_tags[tag]}")
            seen_tags[tag] = name
            if not flexible.contains(tagged.intersect(versions)):
                raise SpecError(f"{what}: tagged in versions that are not flexible")
        typ = parse_type(f["type"], f, struct, what, structs, flexible)
        if not nullable.empty and typ.kind == "prim":
            raise SpecError(f"{what}: a {typ.prim} cannot be nullable")
        field = Field(
            name=name,
            ident=snake_case(name),
            type=typ,
            versions=versions,
            nullable=nullable,
            tagged=tagged,
            tag=tag,
            default=str(f.get("default", "")),
            about=f.get("about", ""),
            ignorable=bool(f.get("ignorable", False)),
        )
        if field.default == "null" and not nullable.contains(versions):
            raise SpecError(f"{what}: null default, but not nullable in every version")
        if field.ident in ("unknown_tagged_fields",):
            raise SpecError(f"{what}: the name clashes with the generated field")
        default_rust(field, what)  # validates the default
        struct.fields.append(field)


def parse_message(jar: str, path: str, spec: dict) -> Message:
    what = f"{jar}!{path}"
    unknown = set(spec) - MESSAGE_KEYS
    if unknown:
        raise SpecError(f"{what}: unsupported keys {sorted(unknown)}")
    if spec.get("type") not in ("metadata", "data"):
        raise SpecError(f"{what}: type {spec.get('type')!r} is not a record")
    name = spec["name"]
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
        raise SpecError(f"{what}: name {name!r}")
    valid = Versions.parse(spec["validVersions"], what)
    if valid.empty or valid.hi == VERSION_MAX:
        raise SpecError(f"{what}: validVersions {spec['validVersions']!r}")
    flexible = Versions.parse(spec.get("flexibleVersions", "none"), what)
    if not flexible.empty and flexible.hi != VERSION_MAX:
        raise SpecError(f"{what}: flexibleVersions must be open-ended")
    api_key = spec.get("apiKey")
    if spec["type"] == "metadata" and not isinstance(api_key, int):
        raise SpecError(f"{what}: a metadata record without an apiKey")
    if api_key is not None and not 0 <= api_key <= 0x7FFF:
        raise SpecError(f"{what}: apiKey {api_key}")
    struct = Struct(rust=name, kafka=name, versions=valid, flexible=flexible.intersect(valid))
    structs = [struct]
    parse_fields(struct, spec["fields"], structs, flexible)
    return Message(name, api_key, valid, flexible, struct, what, structs)


# --- Rust expressions per type ----------------------------------------------------------------


def rust_str(s: str) -> str:
    out = ['"']
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c.isprintable():
            out.append(c)
        else:
            out.append(f"\\u{{{ord(c):x}}}")
    out.append('"')
    return "".join(out)


def default_rust(f: Field, what: str = "") -> str:
    """The Rust expression of a field's default (Kafka's rules for a missing "default")."""
    d, t = f.default, f.type
    if t.kind == "prim" and t.prim in INT_RANGES:
        if d == "":
            return "0"
        try:
            v = int(d[2:], 16) if d.startswith("0x") else int(d, 10)
        except ValueError:
            raise SpecError(f"{what}: default {d!r}") from None
        lo, hi = INT_RANGES[t.prim]
        if not lo <= v <= hi:
            raise SpecError(f"{what}: default {d!r} out of range")
        return str(v)
    if t.kind == "prim" and t.prim == "bool":
        if d.lower() not in ("", "true", "false"):
            raise SpecError(f"{what}: default {d!r}")
        return "true" if d.lower() == "true" else "false"
    if t.kind == "prim" and t.prim == "float64":
        try:
            v = float(d or "0")
        except ValueError:
            raise SpecError(f"{what}: default {d!r}") from None
        if v != v:
            return "f64::NAN"
        if v in (float("inf"), float("-inf")):
            return "f64::INFINITY" if v > 0 else "f64::NEG_INFINITY"
        return repr(v)
    if t.kind == "prim" and t.prim == "uuid":
        if d == "":
            return "Uuid::nil()"
        try:
            raw = base64.urlsafe_b64decode(d + "=" * (-len(d) % 4))
        except ValueError:
            raise SpecError(f"{what}: default {d!r}") from None
        if len(raw) != 16:
            raise SpecError(f"{what}: default {d!r} is not 16 bytes")
        return f"Uuid::from_u128(0x{raw.hex()})"
    if d == "null":
        return "None"
    if t.kind == "string":
        value = "String::new()" if d == "" else f"String::from({rust_str(d)})"
    elif t.kind == "bytes":
        if d != "":
            raise SpecError(f"{what}: a bytes default must be empty or null")
        value = "Bytes::new()"
    elif t.kind == "array":
        if d != "":
            raise SpecError(f"{what}: an array default must be empty or null")
        value = "Vec::new()"
    else:
        raise SpecError(f"{what}: cannot express a default for {t.kind}")
    return f"Some({value})" if f.optional else value


def default_is_type_default(f: Field) -> bool:
    """Whether the field's default is its Rust type's Default (so Default can be derived)."""
    return default_rust(f) in ("0", "false", "0.0", "Uuid::nil()", "None", "String::new()", "Bytes::new()", "Vec::new()")


def nondefault_rust(f: Field, acc: str) -> str:
    """A Rust expression: the field (at `acc`) differs from its default, as Kafka tests it."""
    d, t = default_rust(f), f.type
    if t.kind == "prim":
        if t.prim == "bool":
            return f"!{acc}" if d == "true" else acc
        if t.prim == "uuid":
            return f"!{acc}.is_nil()" if d == "Uuid::nil()" else f"{acc} != {d}"
        return f"{acc} != {d}"
    if d == "None":
        return f"{acc}.is_some()"
    if f.optional:
        if t.kind == "string" and f.default != "":
            return f"{acc}.as_deref() != Some({rust_str(f.default)})"
        return f"{acc}.as_ref().is_none_or(|v| !v.is_empty())"
    if t.kind == "string" and f.default != "":
        return f"{acc} != {rust_str(f.default)}"
    return f"!{acc}.is_empty()"


def len_rust(t: Type, flex: Cond) -> str:
    """The wire::Len of a string, bytes or array, given whether the version is flexible."""
    if flex.always:
        return "Len::Compact"
    if flex.never:
        return "Len::Int16" if t.kind == "string" else "Len::Int32"
    which = "string" if t.kind == "string" else "bytes"
    return f"Len::{which}({flex.rust()})"


def elem_len(t: Type, flex: Cond) -> str:
    """The wire::Len of an array's string or bytes elements (their own, not the array's)."""
    return len_rust(t.elem, flex) if t.elem.kind in ("string", "bytes") else ""


def as_option(f: Field, acc: str) -> str:
    """The field as the Option<&...> the variable-length writers take."""
    if f.optional:
        return f"{acc}.as_deref()"
    if f.type.kind == "string":
        return f"Some({acc}.as_str())"
    if f.type.kind == "bytes":
        return f"Some(&{acc}[..])"
    return f"Some({acc}.as_slice())"


def elem_min_bytes(t: Type, length: str) -> int:
    """The fewest bytes one array element can take (bounds a count before allocating)."""
    if t.kind == "prim":
        return PRIMITIVES[t.prim][1]
    if t.kind == "string":
        return 1 if length == "Len::Compact" else 2
    if t.kind == "bytes":
        return 1 if length == "Len::Compact" else 4
    return 1


def elem_read(t: Type, at: str, length: str) -> str:
    if t.kind == "prim":
        return f"|b| wire::{PRIMITIVES[t.prim][2]}(b, {at})"
    if t.kind == "string":
        return f"|b| wire::get_string(b, {length}, {at})"
    if t.kind == "bytes":
        return f"|b| wire::get_bytes(b, {length}, {at})"
    if t.kind == "struct":
        return f"|b| {t.struct.rust}::read(b, version)"
    raise SpecError("arrays of arrays")


def elem_write(t: Type, length: str) -> str:
    if t.kind == "prim":
        _, _, _, put = PRIMITIVES[t.prim]
        if put:
            return f"|buf, e| buf.{put}(*e)"
        return "|buf, e| wire::put_bool(buf, *e)" if t.prim == "bool" else "wire::put_uuid"
    if t.kind == "string":
        return f"|buf, e| wire::put_string(buf, Some(e.as_str()), {length})"
    if t.kind == "bytes":
        return f"|buf, e| wire::put_bytes(buf, Some(&e[..]), {length})"
    return "|buf, e| e.write(version, buf)"


def elem_size(t: Type, length: str) -> str:
    if t.kind == "prim":
        return f"|_| {PRIMITIVES[t.prim][1]}"
    if t.kind == "string":
        return f"|e| wire::string_size(Some(e.as_str()), {length})"
    if t.kind == "bytes":
        return f"|e| wire::bytes_size(Some(&e[..]), {length})"
    return "|e| e.size(version)"


def read_rust(s: Struct, f: Field, buf: str, flex: Cond, nullable: Cond) -> str:
    """An expression reading the field's value from `buf` (with `?`)."""
    at = f'At(Self::NAME, "{f.name}")'
    t = f.type
    if t.kind == "prim":
        return f"wire::{PRIMITIVES[t.prim][2]}({buf}, {at})?"
    length = len_rust(t, flex)
    prefix = "get_nullable_" if f.optional else "get_"
    if t.kind in ("string", "bytes"):
        expr = f"wire::{prefix}{t.kind}({buf}, {length}, {at})?"
    else:
        expr = (
            f"wire::{prefix}array({buf}, {length}, {elem_min_bytes(t.elem, elem_len(t, flex))}, {at}, "
            f"{elem_read(t.elem, at, elem_len(t, flex))})?"
        )
    if f.optional and not nullable.always:
        expr = f"wire::check_null({expr}, {nullable.rust()}, {at})?"
    return expr


def write_rust(f: Field, acc: str, flex: Cond) -> str:
    """A statement writing the field's value to `buf`."""
    t = f.type
    if t.kind == "prim":
        _, _, _, put = PRIMITIVES[t.prim]
        if put:
            return f"buf.{put}({acc});"
        return f"wire::put_bool(buf, {acc});" if t.prim == "bool" else f"wire::put_uuid(buf, &{acc});"
    length = len_rust(t, flex)
    if t.kind in ("string", "bytes"):
        return f"wire::put_{t.kind}(buf, {as_option(f, acc)}, {length});"
    return f"wire::put_array(buf, {as_option(f, acc)}, {length}, {elem_write(t.elem, elem_len(t, flex))});"


def size_rust(f: Field, acc: str, flex: Cond) -> str:
    """An expression: the bytes the field's value takes."""
    t = f.type
    if t.kind == "prim":
        return str(PRIMITIVES[t.prim][1])
    length = len_rust(t, flex)
    if t.kind in ("string", "bytes"):
        return f"wire::{t.kind}_size({as_option(f, acc)}, {length})"
    return f"wire::array_size({as_option(f, acc)}, {length}, {elem_size(t.elem, elem_len(t, flex))})"


# --- emitting generated.rs --------------------------------------------------------------------


def doc(text: str, indent: str = "") -> list[str]:
    """A doc comment, wrapped to rustfmt's width."""
    text = " ".join(text.split())
    if not text:
        return []
    # Rustdoc would read brackets as links and angle brackets as HTML.
    text = text.replace("[", "\\[").replace("]", "\\]").replace("<", "&lt;").replace(">", "&gt;")
    return [f"{indent}/// {line}" for line in wrap(text, 100 - len(indent) - 4)]


def wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def uses_version(lines: list[str]) -> bool:
    # The parameter, not a field of that name (`self.version`, `version: ...` in a literal).
    code = (re.sub(r'"(?:[^"\\]|\\.)*"', '""', line) for line in lines)
    return any(re.search(r"(?<![.\w])version\b(?!\s*:)", line) for line in code)


def fn_with_version(signature: str, body: list[str]) -> list[str]:
    """A function whose `version` parameter is named `_version` when the body ignores it."""
    if not uses_version(body):
        signature = signature.replace("version: i16", "_version: i16")
    return [signature + " {", *body, "}"]


def field_parts(s: Struct, f: Field):
    present = f.versions.intersect(s.versions)
    tagged = f.tagged.intersect(present)
    untagged = present.subtract(tagged, f"{s.kafka}.{f.name}")
    return present, tagged, untagged


def emit_struct(s: Struct, m: Message) -> list[str]:
    top = s is m.struct
    flexible = Cond.of(s.flexible, s.versions)
    derives = ["Clone", "Debug", "PartialEq"]
    if not s.has_float():
        derives.append("Eq")
    derivable = all(default_is_type_default(f) for f in s.fields)
    if derivable:
        derives.append("Default")
    out: list[str] = []
    if top:
        key = "no api key (Kafka's class answers -1)" if m.api_key is None else f"api key {m.api_key}"
        out += [
            f"/// `{m.name}`: {key}, versions {m.valid}, flexible versions {m.flexible}",
            f"/// (`{m.source}`).",
        ]
    else:
        out += [f"/// An element of `{s.kafka}`."]
    out += [f"#[derive({', '.join(derives)})]", f"pub struct {s.rust} {{"]
    for f in s.fields:
        present, tagged, _ = field_parts(s, f)
        notes = [f"versions {f.versions}"]
        if not f.nullable.empty:
            notes.append(f"nullable {f.nullable}")
        if f.tag is not None:
            notes.append(f"tag {f.tag} in {f.tagged}")
        if f.default:
            notes.append(f"default {f.default}")
        if f.ignorable:
            notes.append("ignorable")
        out += [f"    /// Kafka: `{f.name}`, {', '.join(notes)}."]
        out.append(f"    pub {f.ident}: {f.rust_type()},")
    if not s.flexible.empty:
        out += [
            "    /// Tagged fields this version does not define, in tag order: kept when read, written",
            "    /// back.",
            "    pub unknown_tagged_fields: Vec<RawTaggedField>,",
        ]
    out.append("}")
    out.append("")

    if not derivable:
        out += [f"impl Default for {s.rust} {{", "    fn default() -> Self {", "        Self {"]
        for f in s.fields:
            out.append(f"            {f.ident}: {default_rust(f)},")
        if not s.flexible.empty:
            out.append("            unknown_tagged_fields: Vec::new(),")
        out += ["        }", "    }", "}", ""]

    out.append(f"impl {s.rust} {{")
    if top:
        out += [
            f"    /// The record's api key{' (-1: its spec names none)' if m.api_key is None else ''}.",
            f"    pub const API_KEY: i16 = {m.api_key_rust};",
            "    /// The lowest valid version.",
            f"    pub const LOWEST_VERSION: i16 = {m.valid.lo};",
            "    /// The highest valid version.",
            f"    pub const HIGHEST_VERSION: i16 = {m.valid.hi};",
            "    /// The record's name, as errors give it.",
            f'    pub const NAME: &str = "{s.kafka}";',
            "",
            "    /// Writes the record at `version`, exactly [`Self::encoded_len`] bytes; nothing when it",
            "    /// cannot be written at that version.",
            "    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), EncodeError> {",
            "        wire::check_encode_version(Self::NAME, version, Self::LOWEST_VERSION, Self::HIGHEST_VERSION)?;",
            "        self.validate(version)?;",
            "        let len = self.size(version);",
            "        wire::check_record_len(Self::NAME, len)?;",
            "        buf.reserve(len);",
            "        let start = buf.len();",
            "        self.write(version, buf);",
            '        assert_eq!(buf.len() - start, len, "{}: size and bytes written disagree", Self::NAME);',
            "        Ok(())",
            "    }",
            "",
            "    /// The bytes [`Self::encode`] writes at `version` (meaningful where it succeeds).",
            "    pub fn encoded_len(&self, version: i16) -> usize {",
            "        self.size(version)",
            "    }",
            "",
            "    /// Reads one record of `version` from the front of `buf` (byte fields share its",
            "    /// memory). On error, what is left of `buf` is unspecified.",
            "    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {",
            "        wire::check_decode_version(Self::NAME, version, Self::LOWEST_VERSION, Self::HIGHEST_VERSION)?;",
            "        Self::read(buf, version)",
            "    }",
            "",
        ]
    else:
        out += [f'    const NAME: &str = "{s.kafka}";', ""]

    out += indent(emit_validate(s, flexible), 1) + [""]
    out += indent(emit_size(s, flexible), 1) + [""]
    out += indent(emit_write(s, flexible), 1) + [""]
    out += indent(emit_read(s, flexible), 1)
    out += ["}", ""]
    return out


def indent(lines: list[str], levels: int) -> list[str]:
    pad = "    " * levels
    return [pad + line if line else line for line in lines]


def guarded(c: Cond, body: list[str]) -> list[str]:
    if c.never or not body:
        return []
    if c.always:
        return body
    return [f"if {c.rust()} {{", *indent(body, 1), "}"]


def emit_validate(s: Struct, flexible: Cond) -> list[str]:
    body: list[str] = []
    for f in s.fields:
        present, _, _ = field_parts(s, f)
        c_present = Cond.of(present, s.versions)
        acc = f"self.{f.ident}"
        checks: list[str] = []
        if f.optional:
            c_null = Cond.of(f.nullable, present)
            if not c_null.always:
                checks += [
                    f"if {acc}.is_none() && {c_null.rust_not()} {{",
                    f'    return Err(EncodeError::NullNotAllowed {{ record: Self::NAME, field: "{f.name}", version }});',
                    "}",
                ]
        value_checks: list[str] = []
        t = f.type
        v = "v" if f.optional else f"&{acc}"
        v_len = "v.len()" if f.optional else f"{acc}.len()"
        if t.kind == "string":
            value_checks.append(f'wire::check_string(Self::NAME, "{f.name}", {v})?;')
        elif t.kind == "bytes":
            value_checks.append(f'wire::check_len(Self::NAME, "{f.name}", {v_len})?;')
        elif t.kind == "array":
            value_checks.append(f'wire::check_len(Self::NAME, "{f.name}", {v_len})?;')
            if t.elem.kind == "string":
                value_checks += [f"for e in {v} {{", f'    wire::check_string(Self::NAME, "{f.name}", e)?;', "}"]
            elif t.elem.kind == "bytes":
                value_checks += [f"for e in {v} {{", f'    wire::check_len(Self::NAME, "{f.name}", e.len())?;', "}"]
            elif t.elem.kind == "struct":
                value_checks += [f"for e in {v} {{", "    e.validate(version)?;", "}"]
        if value_checks:
            if f.optional:
                checks += [f"if let Some(v) = &{acc} {{", *indent(value_checks, 1), "}"]
            else:
                checks += value_checks
        body += guarded(c_present, checks)
        if not c_present.always and not f.ignorable:
            absent = c_present.rust_not()
            nondefault = nondefault_rust(f, acc)
            cond = nondefault if c_present.never else f"{absent} && {nondefault}"
            body += [
                f"if {cond} {{",
                f'    return Err(EncodeError::NonDefaultAbsent {{ record: Self::NAME, field: "{f.name}", version }});',
                "}",
            ]
    if not s.flexible.empty:
        tags = ", ".join(str(t) for t in s.defined_tags())
        body += guarded(flexible, [f"wire::check_raw_tags(Self::NAME, &self.unknown_tagged_fields, &[{tags}])?;"])
        if not flexible.always:
            body += [
                f"if {flexible.rust_not()} && !self.unknown_tagged_fields.is_empty() {{",
                "    return Err(EncodeError::TaggedFieldsNotFlexible { record: Self::NAME, version });",
                "}",
            ]
    body.append("Ok(())")
    return fn_with_version("fn validate(&self, version: i16) -> Result<(), EncodeError>", body)


def tagged_fields(s: Struct) -> list[Field]:
    return sorted((f for f in s.fields if f.tag is not None), key=lambda f: f.tag)


def emit_size(s: Struct, flexible: Cond) -> list[str]:
    terms: list[str] = []
    body: list[str] = []
    for f in s.fields:
        _, _, untagged = field_parts(s, f)
        c = Cond.of(untagged, s.versions)
        if c.never:
            continue
        size = size_rust(f, f"self.{f.ident}", Cond.of(s.flexible, untagged))
        if c.always:
            terms.append(size)
        else:
            body += [f"if {c.rust()} {{", f"    n += {size};", "}"]
    section: list[str] = []
    if not s.flexible.empty:
        known = tagged_fields(s)
        if known:
            section += ["let mut known_count = 0;", "let mut known_bytes = 0;"]
            for f in known:
                _, tagged, _ = field_parts(s, f)
                c = Cond.of(tagged, s.versions)
                if c.never:
                    continue
                acc = f"self.{f.ident}"
                cond = nondefault_rust(f, acc) if c.always else f"{c.rust()} && {nondefault_rust(f, acc)}"
                section += [
                    f"if {cond} {{",
                    "    known_count += 1;",
                    f"    known_bytes += wire::tagged_size({f.tag}, {size_rust(f, acc, Cond('always'))});",
                    "}",
                ]
            section.append("n += wire::tagged_section_size(&self.unknown_tagged_fields, known_count, known_bytes);")
        else:
            section.append("n += wire::tagged_section_size(&self.unknown_tagged_fields, 0, 0);")
    body += guarded(flexible, section)
    init = " + ".join(terms) if terms else "0"
    if body:
        lines = [f"let mut n: usize = {init};", *body, "n"]
    else:
        lines = [init]
    return fn_with_version("fn size(&self, version: i16) -> usize", lines)


def emit_write(s: Struct, flexible: Cond) -> list[str]:
    body: list[str] = []
    for f in s.fields:
        _, _, untagged = field_parts(s, f)
        c = Cond.of(untagged, s.versions)
        body += guarded(c, [write_rust(f, f"self.{f.ident}", Cond.of(s.flexible, untagged))])
    if not s.flexible.empty:
        section: list[str] = []
        known = [f for f in tagged_fields(s) if not Cond.of(field_parts(s, f)[1], s.versions).never]
        if known:
            conds = {}
            for f in known:
                _, tagged, _ = field_parts(s, f)
                c = Cond.of(tagged, s.versions)
                acc = f"self.{f.ident}"
                conds[f.ident] = nondefault_rust(f, acc) if c.always else f"{c.rust()} && {nondefault_rust(f, acc)}"
            section.append("let mut known_count = 0;")
            for f in known:
                section += [f"if {conds[f.ident]} {{", "    known_count += 1;", "}"]
            section += [
                "wire::put_tagged_count(buf, &self.unknown_tagged_fields, known_count);",
                "let mut raw = wire::RawTags::new(&self.unknown_tagged_fields);",
            ]
            for f in known:
                acc = f"self.{f.ident}"
                always = Cond("always")
                section += [
                    f"raw.put_below(buf, {f.tag});",
                    f"if {conds[f.ident]} {{",
                    f"    wire::put_tagged(buf, {f.tag}, {size_rust(f, acc, always)}, |buf| {{",
                    f"        {write_rust(f, acc, always)}",
                    "    });",
                    "}",
                ]
            section.append("raw.put_rest(buf);")
        else:
            section += [
                "wire::put_tagged_count(buf, &self.unknown_tagged_fields, 0);",
                "wire::RawTags::new(&self.unknown_tagged_fields).put_rest(buf);",
            ]
        body += guarded(flexible, section)
    return fn_with_version("fn write(&self, version: i16, buf: &mut BytesMut)", body)


# Names read() uses itself: a field's local variable must not take one of them.
READ_NAMES = {"buf", "version", "tag", "value", "b", "unknown_tagged_fields"}


def read_local(f: Field) -> str:
    """The local variable read() keeps a field's value in."""
    return f"field_{bare(f.ident)}" if bare(f.ident) in READ_NAMES else f.ident


def emit_read(s: Struct, flexible: Cond) -> list[str]:
    body: list[str] = []
    known = tagged_fields(s)
    local = {f.ident: read_local(f) for f in s.fields}
    for f in s.fields:
        present, tagged, untagged = field_parts(s, f)
        c = Cond.of(untagged, s.versions)
        mut = "mut " if f.tag is not None and not Cond.of(tagged, s.versions).never else ""
        if c.never:
            body.append(f"let {mut}{local[f.ident]} = {default_rust(f)};")
            continue
        read = read_rust(s, f, "buf", Cond.of(s.flexible, untagged), Cond.of(f.nullable, untagged))
        if c.always:
            body.append(f"let {mut}{local[f.ident]} = {read};")
        else:
            body.append(f"let {mut}{local[f.ident]} = if {c.rust()} {{ {read} }} else {{ {default_rust(f)} }};")
    names = [f.ident if local[f.ident] == f.ident else f"{f.ident}: {local[f.ident]}" for f in s.fields]
    if not s.flexible.empty:
        arms: list[str] = []
        for f in known:
            _, tagged, _ = field_parts(s, f)
            c = Cond.of(tagged, s.flexible)
            if not c.never:
                read = read_rust(s, f, "value", Cond("always"), Cond.of(f.nullable, tagged))
                guard = "" if c.always else f" if {c.rust()}"
                arms += [
                    f"{f.tag}{guard} => {{",
                    f"    {local[f.ident]} = {read};",
                    f'    Ok(Some("{f.name}"))',
                    "},",
                ]
            if not c.always:
                arms.append(
                    f"{f.tag} => Err(DecodeError::TagNotInVersion {{ record: Self::NAME, tag: {f.tag}, version }}),"
                )
        if arms:
            call = [
                "wire::get_tagged_fields(buf, Self::NAME, |tag, value| match tag {",
                *indent(arms, 1),
                "    _ => Ok(None),",
                "})?",
            ]
        else:
            call = ["wire::get_tagged_fields(buf, Self::NAME, |_, _| Ok(None))?"]
        if flexible.always:
            call = ["let unknown_tagged_fields = " + call[0], *call[1:]]
            call[-1] += ";"
            body += call
        else:
            body += [
                f"let unknown_tagged_fields = if {flexible.rust()} {{",
                *indent(call, 1),
                "} else {",
                "    Vec::new()",
                "};",
            ]
        names.append("unknown_tagged_fields")
    body.append(f"Ok(Self {{ {', '.join(names)} }})")
    return fn_with_version("fn read(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError>", body)


def variant(m: Message) -> str:
    return m.name.removesuffix("Record") or m.name


def emit_any(metadata: list[Message]) -> list[str]:
    has_float = any(m.struct.has_float() for m in metadata)
    derives = "Clone, Debug, PartialEq" + ("" if has_float else ", Eq")
    out = [
        "/// Any metadata record (Kafka's `MetadataRecordType`), by api key.",
        f"#[derive({derives})]",
        "pub enum AnyMetadataRecord {",
    ]
    for m in metadata:
        out.append(f"    {variant(m)}({m.name}),")
    out += [
        "}",
        "",
        "/// A metadata record type, as Kafka's `MetadataRecordType` lists it.",
        "#[derive(Clone, Copy, Debug, PartialEq, Eq)]",
        "pub struct MetadataRecordType {",
        "    pub api_key: i16,",
        "    pub name: &'static str,",
        "    pub lowest_version: i16,",
        "    pub highest_version: i16,",
        "}",
        "",
        "impl AnyMetadataRecord {",
        "    /// Every metadata record type, by api key.",
        f"    pub const TYPES: [MetadataRecordType; {len(metadata)}] = [",
    ]
    for m in metadata:
        out += [
            "        MetadataRecordType {",
            f"            api_key: {m.name}::API_KEY,",
            f"            name: {m.name}::NAME,",
            f"            lowest_version: {m.name}::LOWEST_VERSION,",
            f"            highest_version: {m.name}::HIGHEST_VERSION,",
            "        },",
        ]
    out += ["    ];", ""]
    out += [
        "    /// The metadata record type with `api_key`; None for no record.",
        "    pub fn record_type(api_key: i16) -> Option<MetadataRecordType> {",
        "        Self::TYPES.iter().find(|t| t.api_key == api_key).copied()",
        "    }",
        "",
        "    /// The record with `api_key`, every field at its default (Kafka's",
        "    /// `MetadataRecordType.newMetadataRecord()`); None for no record.",
        "    pub fn default_for(api_key: i16) -> Option<Self> {",
        "        match api_key {",
    ]
    for m in metadata:
        out.append(f"            {m.api_key} => Some(Self::{variant(m)}({m.name}::default())),")
    out += [
        "            _ => None,",
        "        }",
        "    }",
        "",
        "    /// The record's api key.",
        "    pub fn api_key(&self) -> i16 {",
        "        match self {",
    ]
    for m in metadata:
        out.append(f"            Self::{variant(m)}(_) => {m.name}::API_KEY,")
    out += ["        }", "    }", "", "    /// The record's name.", "    pub fn name(&self) -> &'static str {", "        match self {"]
    for m in metadata:
        out.append(f"            Self::{variant(m)}(_) => {m.name}::NAME,")
    out += [
        "        }",
        "    }",
        "",
        "    /// Writes the record (without a frame) at `version`; see each record's `encode`.",
        "    pub fn encode(&self, version: i16, buf: &mut BytesMut) -> Result<(), EncodeError> {",
        "        match self {",
    ]
    for m in metadata:
        out.append(f"            Self::{variant(m)}(r) => r.encode(version, buf),")
    out += [
        "        }",
        "    }",
        "",
        "    /// The bytes [`Self::encode`] writes at `version`.",
        "    pub fn encoded_len(&self, version: i16) -> usize {",
        "        match self {",
    ]
    for m in metadata:
        out.append(f"            Self::{variant(m)}(r) => r.encoded_len(version),")
    out += [
        "        }",
        "    }",
        "",
        "    /// Reads the record with `api_key` at `version` (without a frame) from the front of `buf`.",
        "    pub fn decode(api_key: i16, buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {",
        "        match api_key {",
    ]
    for m in metadata:
        out.append(f"            {m.api_key} => {m.name}::decode(buf, version).map(Self::{variant(m)}),")
    out += [
        "            _ => Err(DecodeError::UnknownApiKey { api_key: i64::from(api_key) }),",
        "        }",
        "    }",
        "}",
        "",
    ]
    for m in metadata:
        out += [
            f"impl From<{m.name}> for AnyMetadataRecord {{",
            f"    fn from(record: {m.name}) -> Self {{",
            f"        Self::{variant(m)}(record)",
            "    }",
            "}",
            "",
        ]
    return out


def header(what: str, specs: list[tuple[str, str, dict]]) -> list[str]:
    jars = ", ".join(sorted({jar for jar, _, _ in specs}))
    generated = (
        f"@generated by kafka/metadata/generate.py from the JSON specs in Kafka's jars ({jars}): "
        "do not edit by hand; rerun the script after changing it or the jars."
    )
    return [f"// {line}" for line in wrap(generated, 96)] + [f"//! {line}" for line in wrap(what, 96)]


def emit_generated(messages: list[Message], specs) -> str:
    out = header(
        "Kafka's KRaft metadata records (and KRaftVersionRecord): one struct per record and per "
        "struct-typed array, with Kafka's defaults and serialization rules.",
        specs,
    )
    out += [
        "",
        "use bytes::{BufMut, Bytes, BytesMut};",
        "use uuid::Uuid;",
        "",
        "use super::error::{DecodeError, EncodeError};",
        "use super::wire::{self, At, Len, RawTaggedField};",
        "",
    ]
    for m in messages:
        for s in m.structs:
            out += emit_struct(s, m)
    out += emit_any([m for m in messages if is_metadata(m)])
    text = "\n".join(out) + "\n"
    # Unused imports would fail clippy: drop what this set of specs does not need.
    if not re.search(r"buf\.put_(i8|i16|u16|i32|u32|i64|f64)\(", text):
        text = text.replace("use bytes::{BufMut, Bytes, BytesMut};", "use bytes::{Bytes, BytesMut};")
    if not re.search(r"\bUuid\b", text.split("use uuid::Uuid;", 1)[1]):
        text = text.replace("use uuid::Uuid;\n", "")
    return text


def is_metadata(m: Message) -> bool:
    return m.source.split("!")[0].startswith("kafka-metadata-")


# --- emitting arbitrary.rs --------------------------------------------------------------------


def fn_name(s: Struct) -> str:
    return snake_case(s.rust).removeprefix("r#")


def strategy_value(t: Type) -> str:
    if t.kind == "prim":
        return {
            "float64": "any_f64()",
            "uuid": "any_uuid()",
        }.get(t.prim, f"any::<{PRIMITIVES[t.prim][0]}>()")
    if t.kind == "string":
        return "any_string()"
    if t.kind == "bytes":
        return "any_bytes()"
    if t.kind == "array":
        return f"vec({strategy_value(t.elem)}, 0..4)"
    return f"{fn_name(t.struct)}(version)"


def emit_strategy(s: Struct) -> list[str]:
    out = [
        f"/// Any `{s.kafka}` valid at `version`.",
        f"pub fn {fn_name(s)}(version: i16) -> BoxedStrategy<{s.rust}> {{",
        "    match version {",
    ]
    for v in s.versions:
        at = Versions(v, v)
        parts: list[tuple[str, str]] = []
        for f in s.fields:
            if f.versions.intersect(at).empty:
                continue
            value = strategy_value(f.type)
            if f.optional:
                value = f"option::of({value})" if not f.nullable.intersect(at).empty else f"{value}.prop_map(Some)"
            parts.append((bare(f.ident), value))
        if not s.flexible.intersect(at).empty:
            tags = ", ".join(str(t) for t in s.defined_tags())
            parts.append(("unknown_tagged_fields", f"unknown_tags(&[{tags}])"))
        all_present = len(parts) == len(s.fields) + (0 if s.flexible.empty else 1)
        if not parts:
            out.append(f"        {v} => Just({s.rust}::default()).boxed(),")
            continue
        idents = {bare(f.ident): f.ident for f in s.fields}
        idents["unknown_tagged_fields"] = "unknown_tagged_fields"
        fields = ", ".join(idents[name] for name, _ in parts)
        rest = "" if all_present else f", ..{s.rust}::default()"
        chunks = [parts[i : i + 8] for i in range(0, len(parts), 8)]
        if len(parts) == 1:
            strategy, pattern = parts[0][1], idents[parts[0][0]]
        elif len(chunks) == 1:
            strategy = "(" + ", ".join(p[1] for p in parts) + ")"
            pattern = "(" + ", ".join(idents[p[0]] for p in parts) + ")"
        else:
            # A chunk of one is a 1-tuple, not a parenthesized expression.
            def tup(items: list[str]) -> str:
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

            strategy = tup([tup([p[1] for p in c]) for c in chunks])
            pattern = tup([tup([idents[p[0]] for p in c]) for c in chunks])
        out.append(
            f"        {v} => {strategy}.prop_map(|{pattern}| {s.rust} {{ {fields}{rest} }}).boxed(),"
        )
    out += [f'        _ => panic!("{s.kafka} has no version {{version}}"),', "    }", "}", ""]
    return out


def emit_arbitrary(messages: list[Message], specs) -> str:
    out = header(
        "proptest strategies: any value of each record that is valid at a given version (fields "
        "the version lacks hold their defaults).",
        specs,
    )
    out += [
        "",
        "use corum_kafka::metadata::*;",
        "use proptest::collection::vec;",
        "use proptest::option;",
        "use proptest::prelude::*;",
        "",
        "use super::{any_bytes, any_f64, any_string, any_uuid, unknown_tags};",
        "",
    ]
    for m in messages:
        for s in m.structs:
            out += emit_strategy(s)
    metadata = [m for m in messages if is_metadata(m)]
    out += [
        "/// Any metadata record with `api_key`, valid at `version`.",
        "pub fn metadata_record(api_key: i16, version: i16) -> BoxedStrategy<AnyMetadataRecord> {",
        "    match api_key {",
    ]
    for m in metadata:
        out.append(f"        {m.api_key} => {fn_name(m.struct)}(version).prop_map(AnyMetadataRecord::{variant(m)}).boxed(),")
    out += ['        _ => panic!("no metadata record has api key {api_key}"),', "    }", "}"]
    text = "\n".join(out) + "\n"
    for helper in ("any_bytes", "any_f64", "any_string", "any_uuid"):
        if not re.search(rf"\b{helper}\(\)", text.split("use super::", 1)[1].split("\n", 1)[1]):
            text = text.replace(f"{helper}, ", "").replace(f", {helper}}}", "}")
    if "option::of" not in text:
        text = text.replace("use proptest::option;\n", "")
    return text


# --- emitting json.rs ------------------------------------------------------------------------


def camel_case(name: str) -> str:
    """Kafka's JSON key for a field: its name with the first letter in lower case."""
    return name[:1].lower() + name[1:]


def json_value(t: Type, expr: str, by_ref: bool) -> str:
    """A serde_json::Value of a non-null value; `expr` is the value, or a reference to it."""
    deref = f"*{expr}" if by_ref else expr
    ref = expr if by_ref else f"&{expr}"
    if t.kind == "prim":
        if t.prim == "float64":
            return f"f64_json({deref})"
        if t.prim == "uuid":
            return f"uuid_json({ref})"
        return f"Value::from({deref})"
    if t.kind == "string":
        return f"Value::from({expr}.as_str())"
    if t.kind == "bytes":
        return f"bytes_json({ref})"
    if t.kind == "array":
        return f"Value::Array({expr}.iter().map({json_closure(t.elem, 'e')}).collect())"
    return f"{fn_name(t.struct)}({ref}, version)"


def json_closure(t: Type, name: str) -> str:
    """A closure from a reference to a JSON value (the function itself where it would only call
    one, as clippy prefers)."""
    value = json_value(t, name, True)
    m = re.fullmatch(rf"(\w+)\({name}\)", value)
    return m.group(1) if m else f"|{name}| {value}"


def emit_json_struct(s: Struct) -> list[str]:
    signature = f"pub fn {fn_name(s)}(r: &{s.rust}, version: i16) -> Value"
    if not s.fields:
        signature = signature.replace("(r: ", "(_r: ").replace("version: i16", "_version: i16")
        return [f"/// A `{s.kafka}` as Kafka's JSON converter writes it: no fields.", signature + " {", "Value::Object(Map::new())", "}", ""]
    body = ["let mut o = Map::new();"]
    for f in s.fields:
        present, tagged, untagged = field_parts(s, f)
        acc = f"r.{f.ident}"
        if f.optional:
            value = f"{acc}.as_ref().map_or(Value::Null, {json_closure(f.type, 'v')})"
        else:
            value = json_value(f.type, acc, False)
        insert = f'o.insert("{camel_case(f.name)}".to_owned(), {value});'
        body += guarded(Cond.of(untagged, s.versions), [insert])
        c = Cond.of(tagged, s.versions)
        if not c.never:
            nondefault = nondefault_rust(f, acc)
            cond = nondefault if c.always else f"{c.rust()} && {nondefault}"
            body += [f"if {cond} {{", f"    {insert}", "}"]
    body.append("Value::Object(o)")
    return [f"/// A `{s.kafka}` as Kafka's JSON converter writes it at `version`."] + fn_with_version(signature, body) + [""]


def emit_json(messages: list[Message], specs) -> str:
    out = header(
        "Records as the JSON that Kafka's generated `*JsonConverter` classes write: the fields "
        "of the version, tagged ones only when they differ from their defaults, uuids and bytes "
        "in base64.",
        specs,
    )
    out += [
        "",
        "use corum_kafka::metadata::*;",
        "use serde_json::{Map, Value};",
        "",
        "use super::{bytes_json, f64_json, uuid_json};",
        "",
    ]
    for m in messages:
        for s in m.structs:
            out += emit_json_struct(s)
    out += [
        "/// Any metadata record as Kafka's `MetadataJsonConverters` writes it at `version`.",
        "pub fn metadata_record(r: &AnyMetadataRecord, version: i16) -> Value {",
        "    match r {",
    ]
    for m in messages:
        if is_metadata(m):
            out.append(f"        AnyMetadataRecord::{variant(m)}(r) => {fn_name(m.struct)}(r, version),")
    out += ["    }", "}"]
    text = "\n".join(out) + "\n"
    for helper in ("bytes_json", "f64_json", "uuid_json"):
        if not re.search(rf"\b{helper}\(", text.split("use super::", 1)[1].split("\n", 1)[1]):
            text = text.replace(f"{helper}, ", "").replace(f", {helper}}}", "}")
    return text


# --- main -------------------------------------------------------------------------------------


def rustfmt(text: str, name: str) -> str:
    rustfmt_bin = os.environ.get("RUSTFMT", "rustfmt")
    args = [rustfmt_bin, "--edition", "2021", "--quiet"]
    for config in ("rustfmt.toml", ".rustfmt.toml"):
        if (REPO / config).is_file():
            args += ["--config-path", str(REPO / config)]
            break
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        try:
            done = subprocess.run(args + [str(path)], capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise SpecError(f"{rustfmt_bin} not found: install rustfmt (rustup component add rustfmt) or set RUSTFMT") from None
        if done.returncode != 0:
            raise SpecError(f"rustfmt failed on {name}:\n{done.stderr}")
        return path.read_text()


def generate(jars: Path) -> dict[str, str]:
    specs = load_specs(jars)
    messages = [parse_message(jar, path, spec) for jar, path, spec in specs]
    names = [m.name for m in messages]
    if len(set(names)) != len(names):
        raise SpecError(f"two specs share a name: {names}")
    keys = [m.api_key for m in messages if is_metadata(m)]
    if len(set(keys)) != len(keys):
        raise SpecError(f"two metadata records share an api key: {keys}")
    # Metadata records by api key (as Kafka's MetadataRecordType lists them), then the others.
    messages.sort(key=lambda m: (not is_metadata(m), m.api_key if is_metadata(m) else 0, m.name))
    return {
        GENERATED_RS: rustfmt(emit_generated(messages, specs), "generated.rs"),
        ARBITRARY_RS: rustfmt(emit_arbitrary(messages, specs), "arbitrary.rs"),
        JSON_RS: rustfmt(emit_json(messages, specs), "json.rs"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jars", type=Path, default=REPO / "compat" / "jars", help="Kafka's jars (default: compat/jars)")
    parser.add_argument("--out", type=Path, default=REPO, help="write under this directory (default: the repository)")
    args = parser.parse_args()
    try:
        files = generate(args.jars)
    except SpecError as e:
        print(f"generate.py: {e}", file=sys.stderr)
        return 1
    for rel, text in files.items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"generate.py: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
