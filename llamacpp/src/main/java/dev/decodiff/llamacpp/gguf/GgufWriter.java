package dev.decodiff.llamacpp.gguf;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes a GGUF v3 file: metadata in the given order, tensor infos, then each tensor's data padded to the
 * alignment (32, the format's default, so no general.alignment key is written). The file is written beside the
 * target under a temporary name and moved into place only when complete; an existing target is replaced only
 * when {@code replace} is set.
 */
public final class GgufWriter {
    public static final int ALIGNMENT = GgufFile.DEFAULT_ALIGNMENT;

    /** Produces exactly the bytes of one tensor's data. */
    @FunctionalInterface
    public interface TensorData {
        void writeTo(DataSink sink) throws IOException;
    }

    /** A tensor to write: name, ggml dimensions, type and where its data comes from. */
    public record Tensor(String name, long[] ne, GgmlType type, TensorData data) {
        long byteSize() { return new GgufTensorInfo(name, ne, type, 0).byteSize(); }
    }

    private GgufWriter() {}

    /** The tensor infos (with their offsets) that {@link #write} would give these tensors. */
    public static List<GgufTensorInfo> layout(List<Tensor> tensors) {
        var out = new ArrayList<GgufTensorInfo>();
        long offset = 0;
        for (var t : tensors) {
            out.add(new GgufTensorInfo(t.name(), t.ne(), t.type(), offset));
            offset = Math.addExact(offset, GgufFile.align(t.byteSize(), ALIGNMENT));
        }
        return out;
    }

    public static void write(Path target, Map<String, GgufValue> metadata, List<Tensor> tensors, boolean replace) {
        if (!replace && Files.exists(target)) throw new GgufException(target, "already exists; pass --force to replace it");
        Path dir = target.toAbsolutePath().getParent();
        // Created like any new file (the umask decides its mode, unlike createTempFile's 0600), under a name no one else uses.
        Path tmp = dir.resolve("." + target.getFileName() + "." + java.util.UUID.randomUUID() + ".partial");
        try {
            Files.createDirectories(dir);
            try (var ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                var out = new DataSink(new BufferedOutputStream(Channels.newOutputStream(ch), 1 << 20));
                writeHeader(out, metadata, layout(tensors));
                for (var t : tensors) {
                    long start = out.count();
                    t.data().writeTo(out);
                    long written = out.count() - start;
                    if (written != t.byteSize())
                        throw new IllegalStateException("tensor '" + t.name() + "' wrote " + written + " bytes, its shape needs " + t.byteSize());
                    out.pad(ALIGNMENT);
                }
                out.flush();
                ch.force(true);
            }
            if (replace) Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            else Files.move(tmp, target);
        } catch (FileAlreadyExistsException e) {
            throw new GgufException(target, "appeared while it was being written; pass --force to replace it");
        } catch (IOException e) {
            throw new GgufException(target, "cannot write: " + e.getMessage(), e);
        } finally {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // the temporary file is ours and already moved or unusable; nothing the user had is touched
            }
        }
    }

    private static void writeHeader(DataSink out, Map<String, GgufValue> metadata, List<GgufTensorInfo> infos) throws IOException {
        out.u32(GgufFile.MAGIC);
        out.u32(3);
        out.u64(infos.size());
        out.u64(metadata.size());
        for (var e : metadata.entrySet()) {
            out.string(e.getKey());
            var v = e.getValue();
            out.u32(v.type().id());
            if (v.type() == GgufValueType.ARRAY) {
                out.u32(v.itemType().id());
                out.u64(v.asList().size());
                for (Object item : v.asList()) out.scalar(v.itemType(), item);
            } else {
                out.scalar(v.type(), v.value());
            }
        }
        for (var t : infos) {
            out.string(t.name());
            long[] ne = t.ne();
            out.u32(ne.length);
            for (long d : ne) out.u64(d);
            out.u32(t.type().id());
            out.u64(t.offset());
        }
        out.pad(ALIGNMENT);
    }

    /** Little-endian output that counts its bytes, for headers and tensor data alike. */
    public static final class DataSink implements AutoCloseable {
        private final OutputStream out;
        private final ByteBuffer buf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        private long count;

        DataSink(OutputStream out) { this.out = out; }

        public long count() { return count; }

        private void flushBuf(int n) throws IOException {
            out.write(buf.array(), 0, n);
            count += n;
            buf.clear();
        }

        public void u8(int v) throws IOException { out.write(v); count++; }

        public void u16(int v) throws IOException { buf.putShort((short) v); flushBuf(2); }

        public void u32(long v) throws IOException { buf.putInt((int) v); flushBuf(4); }

        public void u64(long v) throws IOException { buf.putLong(v); flushBuf(8); }

        public void f32(float v) throws IOException { buf.putFloat(v); flushBuf(4); }

        public void f64(double v) throws IOException { buf.putDouble(v); flushBuf(8); }

        public void bytes(byte[] b) throws IOException { out.write(b); count += b.length; }

        void string(String s) throws IOException {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            u64(b.length);
            bytes(b);
        }

        void scalar(GgufValueType t, Object v) throws IOException {
            switch (t) {
                case UINT8, INT8 -> u8((int) (long) (Long) v);
                case UINT16, INT16 -> u16((int) (long) (Long) v);
                case UINT32, INT32 -> u32((Long) v);
                case UINT64, INT64 -> u64((Long) v);
                case FLOAT32 -> f32((Float) v);
                case FLOAT64 -> f64((Double) v);
                case BOOL -> u8((Boolean) v ? 1 : 0);
                case STRING -> string((String) v);
                case ARRAY -> throw new IllegalArgumentException("nested arrays are not written");
            }
        }

        void pad(int alignment) throws IOException {
            long n = GgufFile.align(count, alignment) - count;
            for (long i = 0; i < n; i++) u8(0);
        }

        void flush() throws IOException { out.flush(); }

        @Override
        public void close() throws IOException { out.close(); }
    }
}
