"""What the dynamic loader needs from one shared object: its loader's view.

Only what ``ld.so`` itself reads is read: the ELF header, the program headers, the
dynamic segment and the tables it points to (``.dynstr``, ``.dynsym`` and the hash
table that counts the symbols), each in one read, in file order. Section headers are
ignored, as ``ld.so`` ignores them; they sit at the very end of the file, so not
reading them is what lets a caller stop inflating a wheel member at the dynamic
segment (for NVIDIA's libraries that is 2 % of the way into libcufft, 7 % into
libcudnn_heuristic).

The records are decoded with :mod:`struct` in bulk. pyelftools, used before, reads
each dynamic tag and table entry through its own stream parser, which cost ~5 ms of
CPU per object (8 s for 1,605 real extension modules and libraries against ~1 s
this way, measured when this reader replaced it): the one job here is a fixed walk
over four record layouts, which the ELF specification (gABI) defines and
``readelf -d --dyn-syms`` checks in the tests.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DT_GNU_HASH", "DT_HASH", "DT_NEEDED", "DT_PLTGOT", "DT_RPATH", "DT_RUNPATH",
           "DT_SONAME", "DT_STRSZ", "DT_STRTAB", "DT_SYMTAB", "ET_DYN",
           "SHARED_OBJECT_MARK", "Headers", "Section", "Segments", "SharedObject",
           "is_shared_object_name", "parse_dynamic", "parse_headers", "parse_sections",
           "parse_segments", "parse_shared_object"]

_SONAME_LIKE = re.compile(r"[^/]+\.so(\.[0-9][0-9A-Za-z.]*)?")
# in the bytes of every name is_shared_object_name takes (ASCII in the zip's
# cp437 and UTF-8 alike): a zip directory's parser skips the rest unmade
SHARED_OBJECT_MARK = b".so"


@dataclass(frozen=True, kw_only=True)
class SharedObject:
    """The dynamic-linking facts of one shared object in a wheel.

    ``undefined`` holds the strong (non-weak) undefined dynamic symbols, the ones
    whose absence fails ``dlopen`` with "undefined symbol" (with ``RTLD_NOW``, as
    Python loads extensions, or at first call); ``exported`` the defined global
    symbols other objects can bind to.
    """

    path: str
    soname: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    undefined: tuple[str, ...]
    exported: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "soname": self.soname,
            "needed": list(self.needed),
            "runpath": list(self.runpath),
            "undefined": list(self.undefined),
            "exported": list(self.exported),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SharedObject:
        return cls(
            path=str(data["path"]),
            soname=data["soname"],
            needed=tuple(data["needed"]),
            runpath=tuple(data["runpath"]),
            undefined=tuple(data["undefined"]),
            exported=tuple(data["exported"]),
        )


def is_shared_object_name(path: str) -> bool:
    """``libfoo.so``, ``libfoo.so.12``, ``_C.cpython-312-x86_64-linux-gnu.so``."""
    return _SONAME_LIKE.fullmatch(path.rsplit("/", 1)[-1]) is not None


@dataclass(frozen=True)
class _Layout:
    """The record formats of one ELF class and byte order."""

    header: struct.Struct  # the ELF header from e_type (at 16) to e_phnum
    program: struct.Struct  # one program header
    dynamic: struct.Struct  # d_tag, d_val
    symbol: struct.Struct  # one Elf_Sym
    word: int  # bytes of an address (the GNU hash bloom filter's words)
    wide: bool


def _layout(ident: bytes) -> _Layout | None:
    if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) \
            or ident[5] not in (1, 2):
        return None
    order = "<" if ident[5] == 1 else ">"
    if ident[4] == 2:  # ELFCLASS64
        return _Layout(
            header=struct.Struct(order + "HHIQQQIHHH"),
            program=struct.Struct(order + "IIQQQQQQ"),
            dynamic=struct.Struct(order + "qQ"),
            symbol=struct.Struct(order + "IBBHQQ"),
            word=8, wide=True)
    return _Layout(
        header=struct.Struct(order + "HHIIIIIHHH"),
        program=struct.Struct(order + "IIIIIIII"),
        dynamic=struct.Struct(order + "iI"),
        symbol=struct.Struct(order + "IIIBBH"),
        word=4, wide=False)


ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC = 1, 2
DT_NEEDED, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 1, 3, 4, 5, 6, 10
DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29
DT_GNU_HASH = 0x6FFFFEF5
_CHAIN_BLOCK = 4096  # GNU hash chain words read at a time


class _Image:
    """Reads of ``stream`` (``size`` bytes) by file offset or by address."""

    def __init__(self, stream: IO[bytes] | io.RawIOBase, size: int,
                 loads: list[tuple[int, int, int]]) -> None:
        self._stream = stream
        self._loads = loads  # (p_vaddr, p_offset, p_filesz) of each PT_LOAD
        self.size = size

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ValueError(f"{what} lies outside the file")
        self._stream.seek(offset)
        data = self._stream.read(length) or b""
        if len(data) != length:
            raise ValueError(f"{what} is cut short")
        return bytes(data)

    def offset(self, address: int, what: str) -> int:
        """The file offset of ``address``, through the segment that maps it."""
        for vaddr, offset, filesz in self._loads:
            if vaddr <= address < vaddr + filesz:
                return offset + address - vaddr
        raise ValueError(f"{what} (address {address:#x}) is in no loaded segment")


@dataclass(frozen=True, kw_only=True)
class Headers:
    """What an ELF shared object's first bytes say of its layout: where its
    program headers and section headers lie (offsets and sizes in bytes)."""

    layout: _Layout
    e_type: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def sections_end(self) -> int:
        return self.shoff + self.shentsize * self.shnum

    @property
    def address(self) -> struct.Struct:
        """An address (a GOT entry, ``d_val``) in this file's class and order."""
        return struct.Struct(self.layout.dynamic.format[0] +
                             ("Q" if self.layout.wide else "I"))

    @property
    def symbol_size(self) -> int:
        return self.layout.symbol.size


@dataclass(frozen=True, kw_only=True)
class Segments:
    """The program headers the loader uses: each ``PT_LOAD`` as (p_vaddr,
    p_offset, p_filesz), and ``PT_DYNAMIC`` as (p_offset, p_filesz, p_vaddr)."""

    loads: tuple[tuple[int, int, int], ...]
    dynamic: tuple[int, int, int] | None


@dataclass(frozen=True, kw_only=True)
class Section:
    """One section header (the loader ignores them; a partial read checks what
    it read against them: :mod:`stacklock.native.partial`)."""

    name: int  # where in the section name table
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


def parse_headers(head: bytes) -> Headers | None:
    """The ELF header at the start of ``head``; None when it is not one."""
    layout = _layout(head)
    if layout is None or len(head) < 16 + layout.header.size:
        return None
    fields = layout.header.unpack_from(head, 16)
    e_type, phoff, shoff, phentsize, phnum = (fields[0], fields[4], fields[5],
                                              fields[8], fields[9])
    # e_shentsize, e_shnum, e_shstrndx follow e_phnum
    at = 16 + layout.header.size
    tail = struct.unpack_from(layout.dynamic.format[0] + "HHH",
                              head + bytes(6), at)
    return Headers(layout=layout, e_type=e_type, phoff=phoff, phentsize=phentsize,
                   phnum=phnum, shoff=shoff, shentsize=tail[0], shnum=tail[1],
                   shstrndx=tail[2])


def parse_segments(raw: bytes, headers: Headers) -> Segments:
    """The program headers ``raw`` (``phentsize * phnum`` bytes at ``phoff``)."""
    layout = headers.layout
    if headers.phentsize < layout.program.size:
        raise ValueError(f"program headers of {headers.phentsize} bytes")
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int, int] | None = None
    for at in range(0, len(raw), headers.phentsize):
        fields = layout.program.unpack_from(raw, at)
        if layout.wide:
            kind, _flags, offset, vaddr, _paddr, filesz = fields[:6]
        else:
            kind, offset, vaddr, _paddr, filesz = fields[:5]
        if kind == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == _PT_DYNAMIC and dynamic is None:
            dynamic = (offset, filesz, vaddr)
    return Segments(loads=tuple(loads), dynamic=dynamic)


def parse_sections(raw: bytes, headers: Headers) -> list[Section]:
    """The section headers ``raw`` (``shentsize * shnum`` bytes at ``shoff``)."""
    order = headers.layout.dynamic.format[0]
    if headers.layout.wide:
        record = struct.Struct(order + "IIQQQQIIQQ")
    else:
        record = struct.Struct(order + "IIIIIIIIII")
    if headers.shentsize < record.size:
        raise ValueError(f"section headers of {headers.shentsize} bytes")
    out = []
    for at in range(0, len(raw) - record.size + 1, headers.shentsize):
        (name, kind, flags, addr, offset, size, link, _info, _align,
         entsize) = record.unpack_from(raw, at)
        out.append(Section(name=name, type=kind, flags=flags, addr=addr,
                           offset=offset, size=size, link=link, entsize=entsize))
    return out


def parse_shared_object(
    stream: IO[bytes] | io.RawIOBase, *, path: str,
    tables_before: Callable[[int], None] | None = None,
    tables_at: Callable[[list[int]], None] | None = None,
    seen: Callable[[list[tuple[int, int]], int | None], None] | None = None,
) -> SharedObject | None:
    """The loader's view of the shared object in ``stream``; None when it is not
    one (not ELF, not ``ET_DYN``, no dynamic segment). Raises ``ValueError`` on a
    broken one (a table outside the file or outside every loaded segment).

    ``tables_before`` is told, before the read jumps to the dynamic segment
    (past the code, in most libraries), where the first loaded segment ends:
    the symbol and string tables usually lie before it, or past the dynamic
    segment (moved there by patchelf), and a streamed reader need not keep
    what lies between. ``tables_at`` is told, once the dynamic segment is read,
    where each table the rest of the read begins at (libtorch_cpu's lie 92 MB
    past its dynamic segment). ``seen`` is told the dynamic tags and how many
    symbols the hash table counts (None without one), before the symbols are
    made: a partial read checks them against the section headers."""
    size = stream.seek(0, io.SEEK_END)
    stream.seek(0)
    headers = parse_headers(stream.read(64) or b"")
    if headers is None or headers.e_type != ET_DYN:
        return None
    if headers.phentsize < headers.layout.program.size:
        raise ValueError(f"program headers of {headers.phentsize} bytes")
    raw = _Image(stream, size, []).read(headers.phoff,
                                        headers.phentsize * headers.phnum,
                                        "program headers")
    segments = parse_segments(raw, headers)
    if segments.dynamic is None:
        return None
    loads = list(segments.loads)
    if tables_before is not None and loads:
        first = min(loads, key=lambda load: load[1])
        tables_before(first[1] + first[2])
    image = _Image(stream, size, loads)
    tags = parse_dynamic(image.read(*segments.dynamic[:2], "the dynamic segment"),
                         headers)
    return _read_tables(image, headers.layout, tags, path, tables_at, seen)


def parse_dynamic(data: bytes, headers: Headers) -> list[tuple[int, int]]:
    """The dynamic segment's (d_tag, d_val) pairs up to DT_NULL."""
    layout = headers.layout
    tags = []
    whole = len(data) - len(data) % layout.dynamic.size
    for tag, value in layout.dynamic.iter_unpack(data[:whole]):
        if tag == 0:  # DT_NULL
            break
        tags.append((tag, value))
    return tags


def _read_tables(image: _Image, layout: _Layout, tags: list[tuple[int, int]],
                 path: str, tables_at: Callable[[list[int]], None] | None,
                 seen: Callable[[list[tuple[int, int]], int | None], None] | None,
                 ) -> SharedObject:
    first: dict[int, int] = {}
    for tag, value in tags:
        first.setdefault(tag, value)
    strings = b""
    count: int | None = None
    # the string and hash tables in file order (a streamed member is read
    # forwards), then the symbol table, whose length the hash table gives
    reads = []
    if DT_STRTAB in first:
        reads.append((image.offset(first[DT_STRTAB], "DT_STRTAB"), DT_STRTAB))
    hashed = next((t for t in (DT_GNU_HASH, DT_HASH) if t in first), None)
    if hashed is not None and DT_SYMTAB in first:
        reads.append((image.offset(first[hashed], "the symbol hash table"), hashed))
    if tables_at is not None and reads:
        symbols = [image.offset(first[DT_SYMTAB], "DT_SYMTAB")] if \
            hashed is not None and DT_SYMTAB in first else []
        tables_at([at for at, _tag in reads] + symbols)
    for at, tag in sorted(reads):
        if tag == DT_STRTAB:
            strings = image.read(at, first.get(DT_STRSZ, 0), "the string table")
        else:
            count = _symbol_count(image, layout, tag, at)
    if seen is not None:
        seen(tags, count)
    undefined: tuple[str, ...] = ()
    exported: tuple[str, ...] = ()
    if count is not None:
        at = image.offset(first[DT_SYMTAB], "DT_SYMTAB")
        table = image.read(at, count * layout.symbol.size, "the symbol table")
        undefined, exported = _symbols(table, layout, strings)
    return SharedObject(
        path=path,
        soname=_name(strings, first[DT_SONAME]) if DT_SONAME in first else None,
        needed=tuple(_name(strings, v) for t, v in tags if t == DT_NEEDED),
        runpath=tuple(p for t, v in tags if t in (DT_RUNPATH, DT_RPATH)
                      for p in _name(strings, v).split(":") if p),
        undefined=undefined,
        exported=exported,
    )


def _symbol_count(image: _Image, layout: _Layout, tag: int, at: int) -> int:
    """How many entries ``.dynsym`` has, from its hash table (the dynamic segment
    does not say): DT_HASH's nchain, or one past the last symbol that DT_GNU_HASH
    chains (the chain's last word has its low bit set)."""
    order = layout.dynamic.format[0]
    if tag == DT_HASH:
        return int(struct.unpack(order + "II", image.read(at, 8, "DT_HASH"))[1])
    nbuckets, symoffset, bloom_size, _shift = struct.unpack(
        order + "IIII", image.read(at, 16, "DT_GNU_HASH"))
    buckets_at = at + 16 + bloom_size * layout.word
    buckets = struct.unpack(f"{order}{nbuckets}I",
                            image.read(buckets_at, 4 * nbuckets, "DT_GNU_HASH"))
    index = max(buckets, default=0)
    if index < symoffset:
        return int(symoffset)  # no hashed symbol
    where = buckets_at + 4 * nbuckets + 4 * (index - symoffset)
    while True:
        length = min(4 * _CHAIN_BLOCK, (image.size - where) // 4 * 4)
        block = image.read(where, length or 4, "the DT_GNU_HASH chain")
        for value in struct.unpack(f"{order}{length // 4}I", block):
            if value & 1:
                return int(index + 1)
            index += 1
        where += length


def _name(strings: bytes, offset: int) -> str:
    """The name at ``offset`` in a string table."""
    if offset >= len(strings):
        raise ValueError(f"a name at {offset}, outside the string table")
    end = strings.find(b"\0", offset)
    return strings[offset:end if end >= 0 else None].decode("utf-8", "replace")


_STT_EXPORTED = frozenset((0, 1, 6, 10, 5))  # NOTYPE OBJECT TLS GNU_IFUNC COMMON
_STT_FUNC = 2
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10


def _symbols(table: bytes, layout: _Layout,
             strings: bytes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(strong undefined, exported) symbol names of the dynamic symbol table."""
    undefined: set[str] = set()
    exported: set[str] = set()
    wide = layout.wide
    for fields in layout.symbol.iter_unpack(table):
        if wide:
            name_at, info, other, shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            name_at, info, other, shndx = fields[0], fields[3], fields[4], fields[5]
        kind, bind = info & 0xF, info >> 4
        if not name_at or (kind != _STT_FUNC and kind not in _STT_EXPORTED):
            continue
        if shndx == 0:  # SHN_UNDEF
            if bind != _STB_GLOBAL:
                continue
            into = undefined
        elif bind in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE) and other & 3 in (0, 3):
            into = exported  # visibility default or protected
        else:
            continue
        end = strings.find(b"\0", name_at)
        into.add(strings[name_at:end if end >= 0 else None].decode("utf-8", "replace"))
    return tuple(sorted(undefined)), tuple(sorted(exported))
