package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;

/**
 * A {@code struct ggml_tensor *} seen in the eval callback: its name, type, shape and strides, and its values copied
 * out through {@code ggml_backend_tensor_get} (strided views included) as fp32.
 */
public final class GgmlTensor {
    /** ggml_type values this reader converts (ggml/include/ggml.h). */
    public static final int F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, BF16 = 30;
    /** Elements per block of q4_0/q8_0, and the bytes of one block (an fp16 scale, then the quants: ggml-common.h). */
    private static final int QK = 32, Q4_0_BYTES = 18, Q8_0_BYTES = 34;
    /** The offsets of the fields read, in the loaded build's {@code struct ggml_tensor}. */
    record Fields(long size, long name, long ne, long nb, long type, long op, long buffer, long src) {
        static Fields of(java.lang.foreign.StructLayout t) {
            return new Fields(t.byteSize(), offset(t, "name"), offset(t, "ne"), offset(t, "nb"), offset(t, "type"), offset(t, "op"),
                    offset(t, "buffer"), offset(t, "src"));
        }
    }

    private final LlamaLibrary lib;
    private final MemorySegment t;
    private final Fields f;

    GgmlTensor(LlamaLibrary lib, MemorySegment pointer) {
        this.lib = lib;
        this.f = lib.tensorFields();
        this.t = pointer.reinterpret(f.size());
    }

    public String name() { return t.getString(f.name()); }

    /** enum ggml_op values of the ops decodiff tells graph tensors apart by, in this release (ggml/include/ggml.h). */
    public static final int OP_ADD = 2, OP_MUL_MAT = 29, OP_RESHAPE = 36, OP_ROPE = 48, OP_FLASH_ATTN_EXT = 74;

    public int op() { return t.get(ValueLayout.JAVA_INT, f.op()); }

    public int type() { return t.get(ValueLayout.JAVA_INT, f.type()); }

    /** ne[0..3]: ne[0] is the fastest-varying dimension. */
    public long[] ne() { return t.asSlice(f.ne(), 32).toArray(ValueLayout.JAVA_LONG); }

    public long[] nb() { return t.asSlice(f.nb(), 32).toArray(ValueLayout.JAVA_LONG); }

    /** The i-th source of the op that made this tensor, or null. */
    public GgmlTensor src(int i) {
        var p = t.get(ValueLayout.ADDRESS, f.src() + (long) i * ValueLayout.ADDRESS.byteSize());
        return p.equals(MemorySegment.NULL) ? null : new GgmlTensor(lib, p);
    }

    /** Row-major shape (the reverse of ne), trailing size-1 ggml dimensions dropped; at least one dimension. */
    public int[] shape() {
        long[] ne = ne();
        int dims = 4;
        while (dims > 1 && ne[dims - 1] == 1) dims--;
        int[] s = new int[dims];
        for (int i = 0; i < dims; i++) s[i] = Math.toIntExact(ne[dims - 1 - i]);
        return s;
    }

    public long elements() {
        long n = 1;
        for (long e : ne()) n *= e;
        return n;
    }

    /** The values in row-major order of {@link #shape()} (element [i3][i2][i1][i0]), as fp32; q8_0/q4_0 dequantized. */
    public float[] toFloats() {
        int type = type();
        int size = switch (type) {
            case F32 -> 4;
            case F16, BF16 -> 2;
            case Q8_0 -> Q8_0_BYTES;
            case Q4_0 -> Q4_0_BYTES;
            default -> throw new LlamaCppException("tensor '" + name() + "' has ggml type " + type
                    + ", which decodiff does not decode (it reads f32, f16, bf16, q8_0 and q4_0 tensors)");
        };
        if (t.get(ValueLayout.ADDRESS, f.buffer()).equals(MemorySegment.NULL))
            throw new LlamaCppException("tensor '" + name() + "' has no backend buffer at the callback (not computed)");
        long[] ne = ne(), nb = nb();
        boolean blocks = type == Q8_0 || type == Q4_0;
        if (blocks && (nb[0] != size || ne[0] % QK != 0))
            throw new LlamaCppException("tensor '" + name() + "' is a strided view of quantized blocks, which decodiff does not decode");
        // ggml_nbytes: the bytes from the first element to the end of the last
        long span = blocks ? ne[0] / QK * size : size;
        for (int d = blocks ? 1 : 0; d < 4; d++) span += (ne[d] - 1) * nb[d];
        long n = elements();
        float[] out = new float[Math.toIntExact(n)];
        try (var arena = Arena.ofConfined()) {
            var buf = arena.allocate(span, 16);
            lib.tensorGet.invokeExact(t, buf, 0L, span);
            int k = 0;
            for (long i3 = 0; i3 < ne[3]; i3++)
                for (long i2 = 0; i2 < ne[2]; i2++)
                    for (long i1 = 0; i1 < ne[1]; i1++) {
                        long row = i3 * nb[3] + i2 * nb[2] + i1 * nb[1];
                        if (blocks) {
                            for (long b = 0; b < ne[0] / QK; b++) dequantize(buf, row + b * size, type, out, k + (int) b * QK);
                            k += (int) ne[0];
                        } else {
                            for (long i0 = 0; i0 < ne[0]; i0++) out[k++] = read(buf, row + i0 * nb[0], type);
                        }
                    }
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable e) {
            throw new LlamaCppException("cannot copy tensor '" + name() + "' out of llama.cpp: " + e, e);
        }
        return out;
    }

    /**
     * Replaces this tensor's values with {@code rowMajor} (element [i3][i2][i1][i0], as {@link #toFloats()} gives them)
     * through {@code ggml_backend_tensor_set}. Called from the eval callback after the node was computed, so every
     * node after it in the graph reads the new values. Only a whole, contiguous f32 tensor can be replaced: a view or
     * another type would need ggml's own conversion.
     */
    public void overwrite(float[] rowMajor) {
        if (type() != F32) throw new LlamaCppException("tensor '" + name() + "' has ggml type " + type() + "; decodiff replaces f32 tensors only");
        long[] ne = ne(), nb = nb();
        long stride = 4;
        for (int d = 0; d < 4; d++) {
            if (ne[d] > 1 && nb[d] != stride)
                throw new LlamaCppException("tensor '" + name() + "' is not contiguous (a strided view); decodiff replaces contiguous tensors only");
            stride *= ne[d];
        }
        if (rowMajor.length != elements())
            throw new LlamaCppException("cannot write " + rowMajor.length + " values into tensor '" + name() + "' of " + elements() + " elements");
        if (t.get(ValueLayout.ADDRESS, f.buffer()).equals(MemorySegment.NULL))
            throw new LlamaCppException("tensor '" + name() + "' has no backend buffer at the callback (not computed)");
        try (var arena = Arena.ofConfined()) {
            var buf = arena.allocateFrom(ValueLayout.JAVA_FLOAT, rowMajor);
            lib.tensorSet.invokeExact(t, buf, 0L, buf.byteSize());
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable e) {
            throw new LlamaCppException("cannot write tensor '" + name() + "' into llama.cpp: " + e, e);
        }
    }

    /** One block of 32: q8_0 is d·q (q signed bytes); q4_0 is d·(q−8), low nibbles the first 16, high the last 16. */
    private static void dequantize(MemorySegment buf, long at, int type, float[] out, int to) {
        float d = Float.float16ToFloat(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at));
        if (type == Q8_0) {
            for (int j = 0; j < QK; j++) out[to + j] = d * buf.get(ValueLayout.JAVA_BYTE, at + 2 + j);
        } else {
            for (int j = 0; j < QK / 2; j++) {
                int q = buf.get(ValueLayout.JAVA_BYTE, at + 2 + j) & 0xff;
                out[to + j] = d * ((q & 0x0f) - 8);
                out[to + j + QK / 2] = d * ((q >> 4) - 8);
            }
        }
    }

    private static float read(MemorySegment buf, long at, int type) {
        return switch (type) {
            case F32 -> buf.get(ValueLayout.JAVA_FLOAT_UNALIGNED, at);
            case F16 -> Float.float16ToFloat(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at));
            default -> Float.intBitsToFloat((buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at) & 0xffff) << 16);
        };
    }
}
