"""Where each block of a raw deflate stream starts, by zlib's own inflate.

An oracle independent of :mod:`stacklock.native.deflate`: the libz every CPython
links, called through ctypes with ``Z_BLOCK`` (inflate stops after each block, as
zlib's ``examples/zran.c`` does to build its index), reports the bit position of
every block boundary and the inflated offset it falls at.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

_Z_BLOCK = 5


class _Stream(ctypes.Structure):
    _fields_ = [
        ("next_in", ctypes.c_void_p), ("avail_in", ctypes.c_uint),
        ("total_in", ctypes.c_ulong), ("next_out", ctypes.c_void_p),
        ("avail_out", ctypes.c_uint), ("total_out", ctypes.c_ulong),
        ("msg", ctypes.c_char_p), ("state", ctypes.c_void_p),
        ("zalloc", ctypes.c_void_p), ("zfree", ctypes.c_void_p),
        ("opaque", ctypes.c_void_p), ("data_type", ctypes.c_int),
        ("adler", ctypes.c_ulong), ("reserved", ctypes.c_ulong),
    ]


@dataclass(frozen=True)
class Block:
    bit: int  # where its header starts
    out: int  # inflated bytes before it
    kind: int  # BTYPE: 0 stored, 1 fixed, 2 dynamic


def blocks(data: bytes) -> list[Block]:
    """Every block of the raw deflate stream ``data``, in order."""
    libz = ctypes.CDLL(ctypes.util.find_library("z"))
    libz.zlibVersion.restype = ctypes.c_char_p
    stream = _Stream()
    assert libz.inflateInit2_(ctypes.byref(stream), -15, libz.zlibVersion(),
                              ctypes.sizeof(_Stream)) == 0
    source = ctypes.create_string_buffer(data, len(data))
    sink = ctypes.create_string_buffer(1 << 20)
    stream.next_in = ctypes.addressof(source)
    stream.avail_in = len(data)
    starts = [0]  # the first block starts the stream
    outs = [0]
    try:
        while True:
            stream.next_out = ctypes.addressof(sink)
            stream.avail_out = len(sink)
            status = libz.inflate(ctypes.byref(stream), _Z_BLOCK)
            if status == 1:  # Z_STREAM_END
                break
            assert status == 0, stream.msg
            # 128: just past a block's end (or the stream's header); 64: in the last
            if stream.data_type & 128 and not stream.data_type & 64:
                bit = stream.total_in * 8 - (stream.data_type & 7)
                if bit > starts[-1] and bit < len(data) * 8:
                    starts.append(bit)
                    outs.append(stream.total_out)
    finally:
        libz.inflateEnd(ctypes.byref(stream))
    out = []
    for bit, at in zip(starts, outs, strict=True):
        value = int.from_bytes(data[bit // 8:bit // 8 + 2], "little") >> (bit % 8)
        out.append(Block(bit=bit, out=at, kind=(value >> 1) & 3))
    return out
