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

/** Writes float32 tensors as one safetensors file, atomically (temp file, then rename). */
public final class SafetensorsWriter {
    private record Entry(String name, long[] shape, float[] data) {}

    private final List<Entry> entries = new ArrayList<>();

    public SafetensorsWriter add(String name, long[] shape, float[] data) {
        long n = 1;
        for (long d : shape) n *= d;
        if (n != data.length)
            throw new IllegalArgumentException("tensor '" + name + "': shape " + java.util.Arrays.toString(shape) + " needs " + n + " values, got " + data.length);
        entries.add(new Entry(name, shape.clone(), data));
        return this;
    }

    public boolean isEmpty() { return entries.isEmpty(); }

    private static final int WRITE_CHUNK = 4 << 20;

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
            offset += 4L * e.data().length;
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
            for (var e : entries) {
                float[] d = e.data();
                for (int i = 0; i < d.length; ) {
                    if (buf.remaining() < 4) drain(buf, ch);
                    int n = Math.min(buf.remaining() / 4, d.length - i);
                    buf.asFloatBuffer().put(d, i, n);
                    buf.position(buf.position() + 4 * n);
                    i += n;
                }
            }
            drain(buf, ch);
        }
    }
}
