package dev.decodiff.metal;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes float32 tensors as one safetensors file, atomically (temp file, then rename). By default the tensors stay on
 * the heap until {@link #write}; a writer made with {@link #spillingTo} puts each tensor's bytes in a spill file as it
 * is added, so writing a step of any size holds at most one tensor (a 4,096-token prefill of a 35-layer model
 * captures gigabytes), and copies the spill file behind the header at the end.
 */
public final class SafetensorsWriter implements AutoCloseable {
    /** {@code data} is null for a spilled tensor. */
    private record Entry(String name, long[] shape, float[] data, long count) {}

    private final List<Entry> entries = new ArrayList<>();
    private final Path spillPath;
    private FileChannel spill;
    private ByteBuffer spillBuffer;

    public SafetensorsWriter() { this.spillPath = null; }

    private SafetensorsWriter(Path spillPath) throws IOException {
        this.spillPath = spillPath;
        this.spill = FileChannel.open(spillPath, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.READ, StandardOpenOption.WRITE);
    }

    /** A writer that puts each added tensor's bytes in {@code spillFile} at once; {@link #close} removes that file. */
    public static SafetensorsWriter spillingTo(Path spillFile) throws IOException { return new SafetensorsWriter(spillFile); }

    public SafetensorsWriter add(String name, long[] shape, float[] data) {
        long n = 1;
        for (long d : shape) n *= d;
        if (n != data.length)
            throw new IllegalArgumentException("tensor '" + name + "': shape " + java.util.Arrays.toString(shape) + " needs " + n + " values, got " + data.length);
        if (spill == null && spillPath != null) throw new IllegalStateException("this writer is closed");
        if (spill != null) {
            try {
                if (spillBuffer == null) spillBuffer = ByteBuffer.allocateDirect(WRITE_CHUNK).order(ByteOrder.LITTLE_ENDIAN);
                putFloats(data, spillBuffer, spill);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(spillPath + ": cannot write: " + e.getMessage(), e);
            }
            entries.add(new Entry(name, shape.clone(), null, n));
        } else {
            entries.add(new Entry(name, shape.clone(), data, n));
        }
        return this;
    }

    public boolean isEmpty() { return entries.isEmpty(); }

    /** Removes the spill file, if any (a step abandoned half-way leaves nothing behind). */
    @Override
    public void close() throws IOException {
        if (spill == null) return;
        spill.close();
        spill = null;
        Files.deleteIfExists(spillPath);
    }

    private static final int WRITE_CHUNK = 4 << 20;

    /** Appends the floats little-endian through buf, draining it into ch whenever it fills. */
    private static void putFloats(float[] d, ByteBuffer buf, FileChannel ch) throws IOException {
        for (int i = 0; i < d.length; ) {
            if (buf.remaining() < 4) drain(buf, ch);
            int n = Math.min(buf.remaining() / 4, d.length - i);
            buf.asFloatBuffer().put(d, i, n);
            buf.position(buf.position() + 4 * n);
            i += n;
        }
    }

    private static void drain(ByteBuffer buf, FileChannel ch) throws IOException {
        buf.flip();
        while (buf.hasRemaining()) ch.write(buf);
        buf.clear();
    }

    public void write(Path file, Map<String, String> metadata) throws IOException {
        var json = new ObjectMapper();
        ObjectNode header = json.createObjectNode();
        if (metadata != null && !metadata.isEmpty()) {
            var m = header.putObject("__metadata__");
            metadata.forEach(m::put);
        }
        long offset = 0;
        for (var e : entries) {
            var t = header.putObject(e.name());
            t.put("dtype", "F32");
            var s = t.putArray("shape");
            for (long d : e.shape()) s.add(d);
            var o = t.putArray("data_offsets");
            o.add(offset);
            offset += 4L * e.count();
            o.add(offset);
        }
        byte[] h = json.writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
        int pad = (8 - (h.length % 8)) % 8;
        byte[] hp = new byte[h.length + pad];
        System.arraycopy(h, 0, hp, 0, h.length);
        for (int i = h.length; i < hp.length; i++) hp[i] = ' ';
        Path tmp = file.resolveSibling(file.getFileName() + ".partial");
        // Whole 4 MiB writes at 4 MiB-aligned file offsets: the page cache then holds the file in large folios, which
        // a reader maps with 2 MB pages (a compare over many steps pays a fault per 4 KB page otherwise).
        var buf = ByteBuffer.allocateDirect(WRITE_CHUNK).order(ByteOrder.LITTLE_ENDIAN);
        // A failed write (full disk, a folder in the way) leaves neither a .partial nor a half file behind.
        try {
            writeTo(tmp, hp, buf);
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    private void writeTo(Path tmp, byte[] hp, ByteBuffer buf) throws IOException {
        try (var ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            buf.putLong(hp.length);
            for (int i = 0; i < hp.length; ) {
                if (!buf.hasRemaining()) drain(buf, ch);
                int n = Math.min(buf.remaining(), hp.length - i);
                buf.put(hp, i, n);
                i += n;
            }
            if (spill != null) {
                drain(buf, ch);
                if (spillBuffer != null) drain(spillBuffer, spill);
                long size = spill.size();
                for (long at = 0; at < size; ) at += spill.transferTo(at, size - at, ch);
            } else {
                for (var e : entries) putFloats(e.data(), buf, ch);
            }
            drain(buf, ch);
        }
    }
}
