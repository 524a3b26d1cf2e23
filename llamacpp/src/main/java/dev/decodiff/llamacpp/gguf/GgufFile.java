package dev.decodiff.llamacpp.gguf;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The header of a GGUF file (version 2 or 3): its metadata, in file order, and its tensor infos. Reading is
 * strict: every count, length and offset is checked against the bytes that are really there before it is used,
 * so a truncated or corrupted file fails here with its name and what is wrong, never with an overflow or an
 * allocation of what a bad count claims.
 */
public final class GgufFile {
    public static final int MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
    public static final int DEFAULT_ALIGNMENT = 32;
    /** ggml's GGML_MAX_NAME is 64 bytes including the terminating NUL. */
    public static final int MAX_TENSOR_NAME = 63;
    public static final int MAX_DIMS = 4;

    private final Path path;
    private final int version;
    private final Map<String, GgufValue> metadata;
    private final List<GgufTensorInfo> tensors;
    private final Map<String, GgufTensorInfo> byName;
    private final int alignment;
    private final long dataOffset;

    private GgufFile(Path path, int version, Map<String, GgufValue> metadata, List<GgufTensorInfo> tensors, int alignment, long dataOffset) {
        this.path = path;
        this.version = version;
        this.metadata = Collections.unmodifiableMap(metadata);
        this.tensors = List.copyOf(tensors);
        var m = new LinkedHashMap<String, GgufTensorInfo>();
        tensors.forEach(t -> m.put(t.name(), t));
        this.byName = Collections.unmodifiableMap(m);
        this.alignment = alignment;
        this.dataOffset = dataOffset;
    }

    public static GgufFile read(Path path) {
        if (!Files.isRegularFile(path)) throw new GgufException(path, "no such file");
        try (var arena = Arena.ofConfined(); var ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < 24) throw new GgufException(path, "file is " + size + " bytes, too short for a GGUF header (truncated?)");
            return parse(path, ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena));
        } catch (IOException e) {
            throw new GgufException(path, "cannot read: " + e.getMessage(), e);
        }
    }

    /** Parses a whole GGUF image held in memory (the fuzz tests feed damaged images through here). */
    public static GgufFile parse(Path path, MemorySegment all) {
        if (all.byteSize() < 24) throw new GgufException(path, "file is " + all.byteSize() + " bytes, too short for a GGUF header (truncated?)");
        var c = new Cursor(path, all);
        int magic = (int) c.u32("magic");
        if (magic != MAGIC) throw new GgufException(path, "not a GGUF file (magic bytes " + hex(magic) + ", expected \"GGUF\")");
        long version = c.u32("version");
        if (version != 2 && version != 3)
            throw new GgufException(path, "GGUF version " + version + " is not supported (2 and 3 are); re-convert the model with a current converter");
        long nTensors = c.u64("tensor count");
        long nKv = c.u64("metadata count");
        // A key-value pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8.
        c.requireCount(nKv, 14, "metadata entries");
        c.requireCount(nTensors, 33, "tensor infos");

        var metadata = new LinkedHashMap<String, GgufValue>();
        for (long i = 0; i < nKv; i++) {
            long at = c.pos;
            String key = c.string("metadata key " + i);
            if (key.isEmpty()) throw new GgufException(path, "metadata entry " + i + " at byte " + at + " has an empty key (corrupted file?)");
            var type = c.valueType("type of '" + key + "'");
            var value = c.value(type, key);
            if (metadata.putIfAbsent(key, value) != null)
                throw new GgufException(path, "metadata key '" + key + "' appears twice (corrupted file?)");
        }
        int alignment = DEFAULT_ALIGNMENT;
        var al = metadata.get("general.alignment");
        if (al != null) {
            if (al.type() != GgufValueType.UINT32)
                throw new GgufException(path, "general.alignment is a " + al.type() + ", the format requires a UINT32");
            long a = al.asLong();
            if (a == 0 || Long.bitCount(a) != 1 || a > (1 << 30))
                throw new GgufException(path, "general.alignment " + a + " is not a power of two");
            alignment = (int) a;
        }

        var tensors = new ArrayList<GgufTensorInfo>();
        var names = new java.util.HashSet<String>();
        for (long i = 0; i < nTensors; i++) {
            String name = c.string("name of tensor " + i);
            if (name.getBytes(StandardCharsets.UTF_8).length > MAX_TENSOR_NAME)
                throw new GgufException(path, "tensor name '" + name + "' is longer than ggml's " + MAX_TENSOR_NAME + " bytes");
            if (!names.add(name)) throw new GgufException(path, "tensor '" + name + "' appears twice (corrupted file?)");
            long nDims = c.u32("dimension count of '" + name + "'");
            if (nDims < 1 || nDims > MAX_DIMS)
                throw new GgufException(path, "tensor '" + name + "' has " + nDims + " dimensions (ggml allows 1 to " + MAX_DIMS + ")");
            long[] ne = new long[(int) nDims];
            for (int d = 0; d < nDims; d++) {
                ne[d] = c.u64("dimension " + d + " of '" + name + "'");
                if (ne[d] < 0) throw new GgufException(path, "tensor '" + name + "' has dimension " + Long.toUnsignedString(ne[d]) + ", beyond int64");
            }
            long typeId = c.u32("type of '" + name + "'");
            var type = GgmlType.ofId(typeId);
            if (type == null) throw new GgufException(path, "tensor '" + name + "' has ggml type id " + typeId + ", which this reader does not know");
            long offset = c.u64("offset of '" + name + "'");
            var info = new GgufTensorInfo(name, ne, type, offset);
            try {
                info.elementCount();
                info.byteSize();
            } catch (ArithmeticException e) {
                throw new GgufException(path, "tensor '" + name + "' of shape " + info.shapeString() + " has more elements than int64 holds");
            } catch (IllegalArgumentException e) {
                throw new GgufException(path, "tensor '" + name + "': " + e.getMessage()
                        + "; ggml never writes such a tensor, so the file is damaged or not a GGUF of ggml's layout — convert or quantize it again");
            }
            if (offset < 0 || offset % alignment != 0)
                throw new GgufException(path, "tensor '" + name + "' starts at data offset " + Long.toUnsignedString(offset) + ", not a multiple of the alignment " + alignment);
            tensors.add(info);
        }
        long dataOffset = align(c.pos, alignment);
        long size = all.byteSize();
        if (nTensors > 0 && dataOffset > size)
            throw new GgufException(path, "the tensor data would start at byte " + dataOffset + " but the file has " + size + " bytes (truncated?)");
        long dataBytes = size - dataOffset;
        var sorted = new ArrayList<>(tensors);
        sorted.sort(Comparator.comparingLong(GgufTensorInfo::offset));
        GgufTensorInfo prev = null;
        for (var t : sorted) {
            if (t.offset() > dataBytes || t.byteSize() > dataBytes - t.offset())
                throw new GgufException(path, "tensor '" + t.name() + "' (" + t.byteSize() + " bytes at data offset " + t.offset()
                        + ") runs past the end of the file, whose data section has " + dataBytes + " bytes (truncated?)");
            if (prev != null && t.offset() < prev.offset() + prev.byteSize())
                throw new GgufException(path, "tensors '" + prev.name() + "' and '" + t.name() + "' overlap (corrupted file?)");
            prev = t;
        }
        return new GgufFile(path, (int) version, metadata, tensors, alignment, dataOffset);
    }

    public Path path() { return path; }

    public int version() { return version; }

    public Map<String, GgufValue> metadata() { return metadata; }

    public List<GgufTensorInfo> tensors() { return tensors; }

    public int alignment() { return alignment; }

    /** Byte offset in the file where the data section (and tensor offset 0) begins. */
    public long dataOffset() { return dataOffset; }

    public GgufValue get(String key) {
        var v = metadata.get(key);
        if (v == null) throw new GgufException(path, "has no metadata key '" + key + "'");
        return v;
    }

    public GgufTensorInfo tensor(String name) {
        var t = byName.get(name);
        if (t == null) throw new GgufException(path, "has no tensor '" + name + "'");
        return t;
    }

    public boolean hasTensor(String name) { return byName.containsKey(name); }

    /** A tensor's data as floats (F32 as is, F16 and BF16 widened exactly, ggml's block types dequantized as ggml does). */
    public float[] floats(String name) {
        var t = tensor(name);
        long n = t.elementCount();
        if (n > Integer.MAX_VALUE - 16) throw new GgufException(path, "tensor '" + name + "' is too large for a float[]");
        var buf = ByteBuffer.allocate(Math.toIntExact(t.byteSize())).order(ByteOrder.LITTLE_ENDIAN);
        try (var ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long at = dataOffset + t.offset();
            while (buf.hasRemaining()) {
                int r = ch.read(buf, at + buf.position());
                if (r < 0) throw new GgufException(path, "ends inside tensor '" + name + "' (truncated?)");
            }
        } catch (IOException e) {
            throw new GgufException(path, "cannot read tensor '" + name + "': " + e.getMessage(), e);
        }
        buf.flip();
        var out = new float[(int) n];
        switch (t.type()) {
            case F32 -> buf.asFloatBuffer().get(out);
            case F16 -> { for (int i = 0; i < n; i++) out[i] = Float.float16ToFloat(buf.getShort(2 * i)); }
            case BF16 -> { for (int i = 0; i < n; i++) out[i] = dev.decodiff.metal.BFloat16.widen(buf.getShort(2 * i)); }
            default -> {
                if (!GgmlQuants.dequantizes(t.type()))
                    throw new GgufException(path, "tensor '" + name + "' is " + t.type() + "; only " + GgmlQuants.SUPPORTED + " can be read as floats");
                GgmlQuants.dequantize(t.type(), MemorySegment.ofBuffer(buf), 0, n, out, 0);
            }
        }
        return out;
    }

    static long align(long x, int alignment) { return (x + alignment - 1) / alignment * alignment; }

    private static String hex(int v) {
        var b = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array();
        return String.format(java.util.Locale.ROOT, "%02x %02x %02x %02x", b[0], b[1], b[2], b[3]);
    }

    /** A bounds-checked little-endian reader over the mapped file. */
    private static final class Cursor {
        private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

        final Path path;
        final MemorySegment seg;
        long pos;

        Cursor(Path path, MemorySegment seg) {
            this.path = path;
            this.seg = seg;
        }

        long remaining() { return seg.byteSize() - pos; }

        void need(long n, String what) {
            if (n < 0 || n > remaining())
                throw new GgufException(path, "ends at byte " + seg.byteSize() + " while reading " + what + " at byte " + pos
                        + " (needs " + Long.toUnsignedString(n) + " more bytes; truncated or corrupted file)");
        }

        void requireCount(long n, long minBytesEach, String what) {
            if (n < 0 || n > remaining() / minBytesEach)
                throw new GgufException(path, "claims " + Long.toUnsignedString(n) + " " + what + ", more than its "
                        + seg.byteSize() + " bytes can hold (truncated or corrupted file?)");
        }

        long u32(String what) { need(4, what); long v = Integer.toUnsignedLong(seg.get(I32, pos)); pos += 4; return v; }

        long u64(String what) { need(8, what); long v = seg.get(I64, pos); pos += 8; return v; }

        String string(String what) {
            long len = u64("length of " + what);
            need(len, what + " (" + Long.toUnsignedString(len) + " bytes)");
            if (len > Integer.MAX_VALUE - 16) throw new GgufException(path, what + " claims " + len + " bytes");
            byte[] b = seg.asSlice(pos, len).toArray(ValueLayout.JAVA_BYTE);
            pos += len;
            try {
                return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b)).toString();
            } catch (CharacterCodingException e) {
                throw new GgufException(path, what + " at byte " + (pos - len) + " is not valid UTF-8 (corrupted file?)");
            }
        }

        GgufValueType valueType(String what) {
            long id = u32(what);
            var t = GgufValueType.ofId(id);
            if (t == null) throw new GgufException(path, what + " is type id " + id + ", which GGUF does not define (corrupted file?)");
            return t;
        }

        GgufValue value(GgufValueType type, String key) {
            if (type != GgufValueType.ARRAY) return new GgufValue(type, null, scalar(type, key));
            var item = valueType("item type of '" + key + "'");
            if (item == GgufValueType.ARRAY) throw new GgufException(path, "'" + key + "' is an array of arrays, which ggml does not read");
            long n = u64("length of '" + key + "'");
            requireCount(n, item == GgufValueType.STRING ? 8 : item.bytes(), "items in '" + key + "'");
            var items = new ArrayList<>((int) Math.min(n, 1 << 20));
            for (long i = 0; i < n; i++) items.add(scalar(item, key));
            return new GgufValue(type, item, items);
        }

        Object scalar(GgufValueType t, String key) {
            String what = "value of '" + key + "'";
            if (t == GgufValueType.STRING) return string(what);
            need(t.bytes(), what);
            Object v = switch (t) {
                case UINT8 -> (long) (seg.get(ValueLayout.JAVA_BYTE, pos) & 0xff);
                case INT8 -> (long) seg.get(ValueLayout.JAVA_BYTE, pos);
                case UINT16 -> (long) (seg.get(I16, pos) & 0xffff);
                case INT16 -> (long) seg.get(I16, pos);
                case UINT32 -> Integer.toUnsignedLong(seg.get(I32, pos));
                case INT32 -> (long) seg.get(I32, pos);
                case UINT64, INT64 -> seg.get(I64, pos);
                case FLOAT32 -> seg.get(F32, pos);
                case FLOAT64 -> seg.get(F64, pos);
                case BOOL -> {
                    byte b = seg.get(ValueLayout.JAVA_BYTE, pos);
                    if (b != 0 && b != 1) throw new GgufException(path, what + " is a bool of byte value " + b + " (corrupted file?)");
                    yield b == 1;
                }
                default -> throw new IllegalStateException(t.toString());
            };
            pos += t.bytes();
            return v;
        }
    }
}
