"""The size limits of the file format: one definition for the side that writes and the side
that reads.

The rule they serve: whatever a writer of this version accepts, every reader of the same
version reads back. A limit stated twice -- once where a value is accepted, once where it
is read -- drifts: ``chunk_size`` up to 256 MiB was accepted while the decoder refused any
record over 64 MiB, so an entry could be acknowledged and then never read again. Every
module that accepts, produces or reads back one of these values imports it from here.

A leaf module (it imports nothing of ckptdb) so that the codec, the chunkers, the blob
store, the settings reader, caller validation and the import checks can all depend on it
without a cycle between them.
"""

from __future__ import annotations

#: ``chunk_size`` accepted when a file is created (``ckptdb.open(chunk_size=...)``) and
#: read back from its ``chunk_size`` and fixed ``chunking`` settings.
MIN_CHUNK_BYTES = 64 * 1024
MAX_CHUNK_BYTES = 256 * 1024 * 1024
#: ``chunk_size`` of a file created without one.
DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024

#: The largest raw record -- a chunk, or a blob stored whole in its row -- that any chunker
#: may produce, the codec encodes and every reader decodes. It is the largest chunk size
#: because a fixed-size chunker stores a blob of up to ``chunk_size`` bytes whole and cuts
#: larger ones into ``chunk_size`` pieces; content-defined chunks are smaller (checked when
#: a chunker is built). Files written with any accepted ``chunk_size`` stay readable.
MAX_RECORD_BYTES = MAX_CHUNK_BYTES

#: The largest zstd window the decoder allows. A frame's content size is checked against
#: the record's raw size first, and one-shot decoding writes straight into the output
#: buffer, so this costs no memory beyond the record itself; it only has to admit every
#: frame the encoder makes for a record of up to :data:`MAX_RECORD_BYTES` (at level 22
#: zstd's window is 128 MiB, otherwise at most the content size).
MAX_ZSTD_WINDOW_BYTES = MAX_RECORD_BYTES

#: The largest ``max_metadata_bytes`` a handle may be opened with, and so the largest
#: canonical metadata a checkpoint can hold: importing an export checks its metadata
#: against this same bound.
MAX_METADATA_BYTES = 64 * 1024 * 1024
#: The smallest: ``{}`` (no metadata) is two bytes.
MIN_METADATA_BYTES = 2

#: ``page_size`` accepted when a file is created.
MIN_PAGE_SIZE = 4096
MAX_PAGE_SIZE = 65536
