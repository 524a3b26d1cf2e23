package dev.decodiff.metal;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
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
        try (OutputStream out = new java.io.BufferedOutputStream(Files.newOutputStream(tmp), 1 << 20)) {
            var len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(hp.length);
            out.write(len.array());
            out.write(hp);
            var buf = ByteBuffer.allocate(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
            for (var e : entries) {
                for (float v : e.data()) {
                    if (buf.remaining() < 4) { out.write(buf.array(), 0, buf.position()); buf.clear(); }
                    buf.putFloat(v);
                }
            }
            out.write(buf.array(), 0, buf.position());
        }
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
