package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.TENSOR;
import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;

/**
 * A {@code struct ggml_tensor *} seen in the eval callback: its name, type, shape and strides, and its values copied
 * out through {@code ggml_backend_tensor_get} (strided views included) as fp32.
 */
public final class GgmlTensor {
    /** ggml_type values this reader converts (ggml/include/ggml.h). */
    public static final int F32 = 0, F16 = 1, BF16 = 30;
    private static final long NAME = offset(TENSOR, "name"), NE = offset(TENSOR, "ne"), NB = offset(TENSOR, "nb"),
            TYPE = offset(TENSOR, "type"), OP = offset(TENSOR, "op"), BUFFER = offset(TENSOR, "buffer"), SRC = offset(TENSOR, "src");

    private final LlamaLibrary lib;
    private final MemorySegment t;

    GgmlTensor(LlamaLibrary lib, MemorySegment pointer) {
        this.lib = lib;
        this.t = pointer.reinterpret(TENSOR.byteSize());
    }

    public String name() { return t.getString(NAME); }

    /** enum ggml_op value of GGML_OP_MUL_MAT in this release (ggml/include/ggml.h). */
    public static final int OP_MUL_MAT = 29;

    public int op() { return t.get(ValueLayout.JAVA_INT, OP); }

    public int type() { return t.get(ValueLayout.JAVA_INT, TYPE); }

    /** ne[0..3]: ne[0] is the fastest-varying dimension. */
    public long[] ne() { return t.asSlice(NE, 32).toArray(ValueLayout.JAVA_LONG); }

    public long[] nb() { return t.asSlice(NB, 32).toArray(ValueLayout.JAVA_LONG); }

    /** The i-th source of the op that made this tensor, or null. */
    public GgmlTensor src(int i) {
        var p = t.get(ValueLayout.ADDRESS, SRC + (long) i * ValueLayout.ADDRESS.byteSize());
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

    /** The values in row-major order of {@link #shape()} (element [i3][i2][i1][i0]), as fp32. */
    public float[] toFloats() {
        int type = type();
        int size = switch (type) {
            case F32 -> 4;
            case F16, BF16 -> 2;
            default -> throw new LlamaCppException("tensor '" + name() + "' has ggml type " + type
                    + ", which decodiff does not decode (it reads f32, f16 and bf16 tensors)");
        };
        if (t.get(ValueLayout.ADDRESS, BUFFER).equals(MemorySegment.NULL))
            throw new LlamaCppException("tensor '" + name() + "' has no backend buffer at the callback (not computed)");
        long[] ne = ne(), nb = nb();
        long span = size;
        for (int d = 0; d < 4; d++) span += (ne[d] - 1) * nb[d];
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
                        for (long i0 = 0; i0 < ne[0]; i0++) out[k++] = read(buf, row + i0 * nb[0], type);
                    }
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable e) {
            throw new LlamaCppException("cannot copy tensor '" + name() + "' out of llama.cpp: " + e, e);
        }
        return out;
    }

    private static float read(MemorySegment buf, long at, int type) {
        return switch (type) {
            case F32 -> buf.get(ValueLayout.JAVA_FLOAT_UNALIGNED, at);
            case F16 -> Float.float16ToFloat(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at));
            default -> Float.intBitsToFloat((buf.get(ValueLayout.JAVA_SHORT_UNALIGNED, at) & 0xffff) << 16);
        };
    }
}
