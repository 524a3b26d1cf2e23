package dev.decodiff.llamacpp.ffi;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Reads the head of a GGUF file (magic, version, every metadata entry, the architecture) to refuse, with our
 * own message, what llama.cpp could only reject by logging or, for a damaged file, by crashing the process.
 */
public final class GgufPreflight {
    private static final int MAGIC = 0x46554747; // "GGUF" read little-endian
    private static final long MAX_STRING = 1 << 20;

    private GgufPreflight() {}

    /**
     * What the header says: the architecture, and the metadata values small enough to keep (integers, bools,
     * strings, and arrays of up to 4096 integers or bools, as Long/Boolean/String/List).
     */
    public record Header(int version, long tensorCount, long kvCount, String architecture, java.util.Map<String, Object> values) {
        /** An integer value ({@code key} without the "arch." prefix is tried with it), or the fallback. */
        public long integer(String key, long fallback) {
            return values.get(architecture + "." + key) instanceof Long l ? l : fallback;
        }

        /** A bool array value (e.g. attention.sliding_window_pattern), or null. */
        public boolean[] bools(String key) {
            if (!(values.get(architecture + "." + key) instanceof java.util.List<?> list)) return null;
            boolean[] b = new boolean[list.size()];
            for (int i = 0; i < b.length; i++) {
                if (!(list.get(i) instanceof Boolean v)) return null;
                b[i] = v;
            }
            return b;
        }
    }

    /** Checks the file is a readable GGUF v2/v3 and returns its header; throws naming the file and the fix. */
    public static Header check(Path file) {
        if (!Files.isRegularFile(file)) throw refuse(file, "does not exist or is not a file");
        if (!Files.isReadable(file)) throw refuse(file, "is not readable (check its permissions)");
        try (var in = new LittleEndian(new BufferedInputStream(Files.newInputStream(file), 1 << 16))) {
            int magic = in.i32();
            if (magic != MAGIC) throw refuse(file, "is not a GGUF file (it does not start with 'GGUF')");
            int version = in.i32();
            if (version != 2 && version != 3) throw refuse(file, "is GGUF version " + version + "; llama.cpp " + LlamaCppHome.RELEASE + " reads versions 2 and 3");
            long tensors = in.i64(), kvs = in.i64();
            if (tensors < 0 || kvs < 0 || kvs > 1_000_000) throw refuse(file, "has a damaged header (" + tensors + " tensors, " + kvs + " metadata entries)");
            var values = new java.util.LinkedHashMap<String, Object>();
            // every entry is read: a file cut inside its metadata is refused here, with a plain reason
            for (long i = 0; i < kvs; i++) {
                String key = in.string();
                Object v = in.value(in.i32());
                if (v != null) values.putIfAbsent(key, v);
            }
            if (!(values.get("general.architecture") instanceof String arch))
                throw refuse(file, "has no general.architecture string; it was not written by a GGUF converter");
            return new Header(version, tensors, kvs, arch, values);
        } catch (EOFException e) {
            throw refuse(file, "is truncated (it ends inside its metadata)");
        } catch (IOException e) {
            throw refuse(file, "has damaged metadata (" + e.getMessage() + ")");
        }
    }

    private static LlamaCppException refuse(Path file, String what) {
        return new LlamaCppException(file + " " + what + "; pass a GGUF of this checkpoint (decodiff gguf --model DIR --out FILE writes one)");
    }

    private static final class LittleEndian extends DataInputStream {
        LittleEndian(InputStream in) { super(in); }

        int i32() throws IOException { return Integer.reverseBytes(readInt()); }

        long i64() throws IOException { return Long.reverseBytes(readLong()); }

        String string() throws IOException {
            long n = i64();
            if (n < 0 || n > MAX_STRING) throw new IOException("a metadata string of " + n + " bytes");
            return new String(readNBytes((int) n), StandardCharsets.UTF_8);
        }

        /** Reads a value of {@code type}: kept (Long, Boolean, String, or a short List of those) or skipped (null). */
        Object value(int type) throws IOException {
            return switch (type) {
                case 0 -> (long) (readByte() & 0xff);
                case 1 -> (long) readByte();
                case 2 -> (long) (Short.reverseBytes(readShort()) & 0xffff);
                case 3 -> (long) Short.reverseBytes(readShort());
                case 4 -> i32() & 0xffffffffL;
                case 5 -> (long) i32();
                case 7 -> readByte() != 0;
                case 8 -> string();
                case 10, 11 -> i64();
                case 9 -> {
                    int elem = i32();
                    long n = i64();
                    if (n < 0) throw new IOException("an array of " + n + " elements");
                    if (n > 4096 || elem == 8 || elem == 9 || elem == 6 || elem == 12) {
                        skipArray(elem, n);
                        yield null;
                    }
                    var list = new java.util.ArrayList<Object>((int) n);
                    for (long j = 0; j < n; j++) list.add(value(elem));
                    yield list;
                }
                default -> {
                    skipValue(type);
                    yield null;
                }
            };
        }

        void skipValue(int type) throws IOException {
            switch (type) {
                case 0, 1, 7 -> skipExactly(1);
                case 2, 3 -> skipExactly(2);
                case 4, 5, 6 -> skipExactly(4);
                case 10, 11, 12 -> skipExactly(8);
                case 8 -> string();
                case 9 -> {
                    int elem = i32();
                    long n = i64();
                    if (n < 0) throw new IOException("an array of " + n + " elements");
                    skipArray(elem, n);
                }
                default -> throw new IOException("an unknown metadata type " + type);
            }
        }

        private void skipArray(int elem, long n) throws IOException {
            int size = switch (elem) { case 0, 1, 7 -> 1; case 2, 3 -> 2; case 4, 5, 6 -> 4; case 10, 11, 12 -> 8; default -> 0; };
            if (size > 0) skipExactly(n * size);
            else for (long j = 0; j < n; j++) skipValue(elem);
        }

        private void skipExactly(long n) throws IOException { skipNBytes(n); }
    }
}
