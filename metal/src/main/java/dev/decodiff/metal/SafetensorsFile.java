package dev.decodiff.metal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * A safetensors file memory-mapped through FFM: tensors are views into the mapping (no copies, no 2 GB limit).
 * The header is validated in full on open, so a truncated or corrupted file fails here with its name, not later.
 */
public final class SafetensorsFile implements AutoCloseable {
    // A header followed by junk ("{}garbage") is a corrupted file, not a valid one with an empty header; a tensor
    // named twice is ambiguous (which one is the data?), not "the last one wins".
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
    private static final long MAX_HEADER = 100L * 1024 * 1024;

    private final Path path;
    private final Arena arena;
    private final Map<String, TensorView> tensors;
    private final Map<String, String> metadata;

    private SafetensorsFile(Path path, Arena arena, Map<String, TensorView> tensors, Map<String, String> metadata) {
        this.path = path;
        this.arena = arena;
        this.tensors = tensors;
        this.metadata = metadata;
    }

    public static SafetensorsFile open(Path path) {
        if (!Files.isRegularFile(path)) throw new SafetensorsException(path, "no such file");
        var arena = Arena.ofShared();
        try (var ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < 8) throw new SafetensorsException(path, "file is " + size + " bytes, too short for a safetensors header (truncated?)");
            MemorySegment all = ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            long headerLen = all.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
            if (headerLen <= 0 || headerLen > MAX_HEADER || headerLen > size - 8)
                throw new SafetensorsException(path, "header length " + headerLen + " does not fit a file of " + size
                        + " bytes (truncated or not a safetensors file)");
            var headerBytes = all.asSlice(8, headerLen).toArray(ValueLayout.JAVA_BYTE);
            JsonNode header;
            try {
                header = JSON.readTree(utf8(path, headerBytes));
            } catch (IOException e) {
                throw new SafetensorsException(path, "header is not valid JSON (corrupted file?): " + JsonErrors.plain(e));
            }
            if (header == null || !header.isObject()) throw new SafetensorsException(path, "header is not a JSON object");
            long dataStart = 8 + headerLen;
            long dataLen = size - dataStart;
            MemorySegment data = all.asSlice(dataStart, dataLen);
            var result = parseHeader(path, header, data, dataLen);
            return new SafetensorsFile(path, arena, result.tensors, result.metadata);
        } catch (IOException e) {
            arena.close();
            throw new SafetensorsException(path, "cannot read: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * The header bytes as text, refusing bytes that are not UTF-8: a lenient decode would turn a damaged tensor name
     * into a different, valid-looking one ("final_norm" silently not compared).
     */
    public static String utf8(Path path, byte[] bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                    .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
                    .decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new SafetensorsException(path, "header is not valid UTF-8 (corrupted file?)");
        }
    }

    private record Parsed(Map<String, TensorView> tensors, Map<String, String> metadata) {}

    private record Span(String name, long begin, long end) {}

    private static Parsed parseHeader(Path path, JsonNode header, MemorySegment data, long dataLen) {
        var tensors = new LinkedHashMap<String, TensorView>();
        var metadata = new LinkedHashMap<String, String>();
        var spans = new ArrayList<Span>();
        for (var it = header.fields(); it.hasNext(); ) {
            var e = it.next();
            String name = e.getKey();
            JsonNode t = e.getValue();
            if (name.equals("__metadata__")) {
                if (t.isObject()) t.fields().forEachRemaining(m -> metadata.put(m.getKey(), m.getValue().asText()));
                continue;
            }
            if (!t.isObject() || !t.has("dtype") || !t.has("shape") || !t.has("data_offsets"))
                throw new SafetensorsException(path, "tensor '" + name + "': header entry needs dtype, shape and data_offsets");
            DType dtype;
            try {
                dtype = DType.fromSafetensors(t.get("dtype").asText());
            } catch (IllegalArgumentException ex) {
                throw new SafetensorsException(path, "tensor '" + name + "': " + ex.getMessage());
            }
            JsonNode shapeNode = t.get("shape");
            JsonNode offs = t.get("data_offsets");
            if (!shapeNode.isArray() || !offs.isArray() || offs.size() != 2)
                throw new SafetensorsException(path, "tensor '" + name + "': malformed shape or data_offsets");
            long[] shape = new long[shapeNode.size()];
            long count = 1;
            for (int i = 0; i < shape.length; i++) {
                if (!shapeNode.get(i).isIntegralNumber() || !shapeNode.get(i).canConvertToLong() || shapeNode.get(i).asLong() < 0)
                    throw new SafetensorsException(path, "tensor '" + name + "': bad dimension " + shapeNode.get(i));
                shape[i] = shapeNode.get(i).asLong();
                count = multiply(path, name, count, shape[i], shape);
            }
            for (var o : offs)
                if (!o.isIntegralNumber() || !o.canConvertToLong())
                    throw new SafetensorsException(path, "tensor '" + name + "': data_offsets " + offs + " are not two byte offsets");
            long begin = offs.get(0).asLong(), end = offs.get(1).asLong();
            if (begin < 0 || end < begin || end > dataLen)
                throw new SafetensorsException(path, "tensor '" + name + "': data_offsets [" + begin + ", " + end
                        + "] lie outside the " + dataLen + " data bytes (file truncated?)");
            long expected = multiply(path, name, count, dtype.bytes(), shape);
            if (end - begin != expected)
                throw new SafetensorsException(path, "tensor '" + name + "': shape " + java.util.Arrays.toString(shape) + " × "
                        + dtype + " needs " + expected + " bytes but data_offsets span " + (end - begin));
            spans.add(new Span(name, begin, end));
            tensors.put(name, new TensorView(name, dtype, shape, data.asSlice(begin, end - begin)));
        }
        spans.sort(Comparator.comparingLong(Span::begin));
        for (int i = 1; i < spans.size(); i++) {
            var a = spans.get(i - 1);
            var b = spans.get(i);
            if (b.begin() < a.end())
                throw new SafetensorsException(path, "tensors '" + a.name() + "' and '" + b.name() + "' overlap (corrupted header)");
        }
        return new Parsed(Collections.unmodifiableMap(tensors), Collections.unmodifiableMap(metadata));
    }

    /** Shape arithmetic that cannot overflow: a header claiming [2^32, 2^32, 16] is damaged, not an internal error. */
    private static long multiply(Path path, String name, long a, long b, long[] shape) {
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            throw new SafetensorsException(path, "tensor '" + name + "': shape " + java.util.Arrays.toString(shape)
                    + " is too large for any file (its size overflows 64 bits; corrupted header?)");
        }
    }

    public Path path() { return path; }

    public Set<String> names() { return tensors.keySet(); }

    public Map<String, TensorView> tensors() { return tensors; }

    public Map<String, String> metadata() { return metadata; }

    public boolean has(String name) { return tensors.containsKey(name); }

    public TensorView get(String name) {
        var t = tensors.get(name);
        if (t == null) throw new SafetensorsException(path, "no tensor named '" + name + "'");
        return t;
    }

    @Override
    public void close() { arena.close(); }
}
