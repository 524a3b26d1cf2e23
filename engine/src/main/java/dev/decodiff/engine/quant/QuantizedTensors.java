package dev.decodiff.engine.quant;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.metal.AffineGroups;
import dev.decodiff.metal.DType;
import dev.decodiff.metal.HugePageMemory;
import dev.decodiff.metal.NativeKernels;
import dev.decodiff.metal.TensorView;
import dev.decodiff.metal.WeightMatrix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Resolves an MLX checkpoint's quantized tensors: every text module with {@code M.scales} (as MLX's loader decides)
 * has its packed {@code M.weight} read with {@code M.scales} and {@code M.biases}, at the bits and group size
 * config.json gives it (its override, else the defaults). 4- and 8-bit matrices stay packed where the native affine
 * kernels run ({@link Resolved#packed}: the codes as mapped, the scales and biases interleaved into one (scale, bias)
 * pair per group, in their own dtype), and the kernels dequantize them in registers; other bit widths (and every
 * width where those kernels cannot run) are dequantized once into fp32 ({@link Resolved#tensors}, {@code M.weight}
 * now fp32). Either way the scales and biases are gone from the map. Media towers are left as they are (text
 * decoding never reads them). Anything inconsistent is refused with the tensor's name: never a silent fallback.
 */
public final class QuantizedTensors {
    private QuantizedTensors() {}

    /** Top-level modules of the multimodal checkpoints that text decoding ignores. */
    private static final Set<String> MEDIA = Set.of("vision_tower", "audio_tower", "embed_vision", "embed_audio", "multi_modal_projector");

    /**
     * tensors: every tensor the engine reads as a float view (dequantized ones included); packed: the matrices kept as
     * codes, by weight name.
     */
    public record Resolved(Map<String, TensorView> tensors, Map<String, PackedTensor> packed, QuantizationSummary summary) {}

    /**
     * An affine matrix kept as its codes: {@code codes} the stored U32 tensor, {@code shape} the float tensor it stands
     * for, {@code groups} its scales and biases. {@link #rows()} × {@link #cols()} is that tensor as a matrix (leading
     * dimensions folded into rows).
     */
    public record PackedTensor(String name, long[] shape, TensorView codes, TensorView scales, TensorView biases, AffineGroups groups) {
        public long cols() { return shape[shape.length - 1]; }

        public long rows() { return codes.elementCount() * 32 / groups.bits() / cols(); }

        /** Bytes the blocked codes take (as many as stored). */
        public long codeBytes() { return rows() * groups.rowBytes((int) cols()); }

        /** Bytes a pass over the matrix reads: codes, scales and biases. */
        public long bytes() { return codeBytes() + rows() * groups.pairRowBytes((int) cols()); }

        /**
         * The matrix, its codes blocked into {@code into} ({@link #codeBytes()} bytes); a stack of matrices ([E, rows,
         * cols], MoE experts) is blocked per matrix, so that each slice of it is one.
         */
        public WeightMatrix matrix(MemorySegment into) {
            var g = shape.length >= 3 ? new AffineGroups(groups.bits(), groups.groupSize(), groups.pairType(), groups.pairs(), (int) shape[shape.length - 2])
                    : groups;
            return WeightMatrix.affine(name, (int) rows(), (int) cols(), codes.data(), g, into);
        }

        /** The fp32 tensor (a copy in {@code arena}), as the dequantizing loader makes it. */
        public TensorView dequantized(Arena arena) {
            return dequantize(codes, shape, scales, biases, new MlxQuantization.Spec(groups.bits(), groups.groupSize()), arena);
        }
    }

    /** What a quantized checkpoint's load will do with its matrices, in one line (for --version). */
    public static String policy() {
        if (keepsPacked()) return "MLX 4- and 8-bit matrices kept packed (prefill dequantizes them in the native kernels, decode sums each group exactly in integers); 2-, 3-, 5- and 6-bit dequantized to fp32 at load";
        String why = !NativeKernels.affineAvailable() ? "the native affine kernels are not in use here: " + NativeKernels.status() : "-Ddecodiff.quantized=dequantize";
        return "MLX matrices of every bit width dequantized to fp32 at load (" + why + ")";
    }

    /** Whether 4- and 8-bit matrices are kept packed here (-Ddecodiff.quantized=dequantize turns it off, for comparing the two). */
    public static boolean keepsPacked() {
        return NativeKernels.affineAvailable() && !"dequantize".equalsIgnoreCase(System.getProperty("decodiff.quantized", "packed"));
    }

    public static boolean isMedia(String name) {
        for (String part : name.split("\\.")) if (MEDIA.contains(part)) return true;
        return false;
    }

    /** Refuses packed tensors in a checkpoint whose config.json declares no quantization. */
    public static void requireNone(Path dir, Map<String, TensorView> stored) {
        for (var t : stored.values()) {
            if (isMedia(t.name())) continue;
            if (t.name().endsWith(".scales") || t.dtype() == DType.U32)
                throw new CheckpointException(dir + ": tensor '" + t.name() + "' is part of a quantized weight but config.json has no 'quantization' "
                        + "object; add the quantization the checkpoint was converted with ({\"bits\": …, \"group_size\": …}) to config.json");
        }
    }

    public static Resolved resolve(Path dir, Map<String, TensorView> stored, MlxQuantization q, Arena arena) {
        String where = dir + "/config.json";
        for (var k : q.overrides().keySet()) {
            if (!stored.containsKey(k + ".weight") && !stored.containsKey(k + ".scales"))
                throw new CheckpointException(where + ": quantization override '" + k + "' names no tensor (the checkpoint has no '" + k
                        + ".weight'); fix the module path (as the checkpoint names its tensors) or remove the key");
        }
        var out = new LinkedHashMap<String, TensorView>();
        var packed = new LinkedHashMap<String, PackedTensor>();
        var specs = new TreeMap<String, MlxQuantization.Spec>();
        boolean keep = keepsPacked();
        for (var t : stored.values()) {
            String name = t.name();
            if (isMedia(name)) {
                out.put(name, t);
                continue;
            }
            if (name.endsWith(".scales") || name.endsWith(".biases")) {
                String m = name.substring(0, name.length() - 7);
                if (!stored.containsKey(m + ".weight"))
                    throw new CheckpointException(dir + ": tensor '" + name + "' has no '" + m + ".weight' to dequantize; the checkpoint is incomplete — re-convert it");
                if (name.endsWith(".biases") && !stored.containsKey(m + ".scales"))
                    throw new CheckpointException(dir + ": tensor '" + m + ".weight' has biases but no '" + m + ".scales'; affine quantization needs both — re-convert the checkpoint");
                continue;
            }
            String m = name.endsWith(".weight") ? name.substring(0, name.length() - 7) : null;
            var scales = m == null ? null : stored.get(m + ".scales");
            var ov = m == null ? null : q.overrides().get(m);
            if (scales == null) {
                if (t.dtype() == DType.U32)
                    throw new CheckpointException(dir + ": tensor '" + name + "' is packed (U32) but '" + (m == null ? name : m) + ".scales' is missing; "
                            + "the checkpoint is incomplete — re-convert it or restore the scales and biases");
                if (ov != null && ov.quantized())
                    throw new CheckpointException(where + ": quantization override '" + m + "' gives it " + ov.describe() + ", but '" + name + "' is "
                            + t.dtype() + " with no '" + m + ".scales'; fix or remove the override");
                out.put(name, t);
                continue;
            }
            if (ov != null && !ov.quantized())
                throw new CheckpointException(where + ": quantization override '" + m + "' is false (not quantized), but the checkpoint has '" + m
                        + ".scales'; fix the override");
            var biases = stored.get(m + ".biases");
            if (biases == null)
                throw new CheckpointException(dir + ": tensor '" + name + "' is quantized ('" + m + ".scales') but '" + m + ".biases' is missing; "
                        + "affine quantization needs both — re-convert the checkpoint");
            var spec = ov != null ? ov.spec() : q.defaults();
            long[] shape = checkedShape(dir, t, scales, biases, spec, ov != null);
            if (keep && (spec.bits() == 4 || spec.bits() == 8)) packed.put(name, pack(t, shape, scales, biases, spec, arena));
            else {
                // kept packed, a matrix may be larger (E2B's per-layer table: 2.35 G elements); as fp32 it may not
                long elements = Arrays.stream(shape).reduce(1, Math::multiplyExact);
                if (elements > Integer.MAX_VALUE)
                    throw new CheckpointException(dir + ": tensor '" + name + "' has " + elements + " elements, more than one fp32 matrix may hold here; "
                            + "at 4 or 8 bits it loads kept packed, where the native affine kernels run (" + policy() + ")");
                out.put(name, dequantize(t, shape, scales, biases, spec, arena));
            }
            specs.put(name, spec);
        }
        return new Resolved(out, packed, new QuantizationSummary(q, specs, packed.keySet()));
    }

    /** The float shape the packed tensor stands for, after every check of it against its scales, biases and spec. */
    private static long[] checkedShape(Path dir, TensorView w, TensorView scales, TensorView biases, MlxQuantization.Spec spec, boolean overridden) {
        String name = w.name();
        String fix = overridden ? "fix its override in config.json's quantization" : "fix config.json's quantization or add a per-tensor override for it";
        if (w.dtype() != DType.U32)
            throw new CheckpointException(dir + ": tensor '" + name + "' has '" + scales.name() + "' but is " + w.dtype() + ", not packed U32; re-convert the checkpoint");
        if (!scales.dtype().isFloat() || !biases.dtype().isFloat())
            throw new CheckpointException(dir + ": '" + scales.name() + "'/'" + biases.name() + "' must be float (are " + scales.dtype() + "/" + biases.dtype() + "); re-convert the checkpoint");
        long[] ws = w.shape();
        if (ws.length < 2 || !Arrays.equals(scales.shape(), biases.shape()) || scales.rank() != ws.length
                || !Arrays.equals(Arrays.copyOf(ws, ws.length - 1), Arrays.copyOf(scales.shape(), ws.length - 1)))
            throw new CheckpointException(dir + ": tensor '" + name + "' " + w.shapeString() + " does not fit its scales " + scales.shapeString()
                    + " and biases " + biases.shapeString() + " (same leading dims, one group column each); re-convert the checkpoint");
        long packedWords = ws[ws.length - 1];
        long groups = scales.shape()[ws.length - 1];
        int bits = spec.bits(), g = spec.groupSize();
        if (packedWords * 32 % bits != 0)
            throw new CheckpointException(dir + ": tensor '" + name + "' " + w.shapeString() + ": " + packedWords + " uint32 per row do not hold whole "
                    + bits + "-bit codes, so the packed shape disagrees with config.json (" + spec.describe() + "); " + fix);
        long cols = packedWords * 32 / bits;
        if (cols % g != 0)
            throw new CheckpointException(dir + ": tensor '" + name + "': group size " + g + " does not divide its row of " + cols + " columns ("
                    + spec.describe() + "); " + fix);
        if (cols / g != groups)
            throw new CheckpointException(dir + ": tensor '" + name + "' " + w.shapeString() + " at " + spec.describe() + " has rows of " + cols
                    + " columns, so " + (cols / g) + " groups, but '" + scales.name() + "' " + scales.shapeString() + " has " + groups
                    + ": the packed shapes disagree with config.json; " + fix);
        long rows = 1;
        for (int i = 0; i < ws.length - 1; i++) rows *= ws[i];
        if (rows > Integer.MAX_VALUE)
            throw new CheckpointException(dir + ": tensor '" + name + "' has " + rows + " rows, more than one matrix may hold here");
        long[] shape = ws.clone();
        shape[shape.length - 1] = cols;
        return shape;
    }

    private static TensorView dequantize(TensorView w, long[] shape, TensorView scales, TensorView biases, MlxQuantization.Spec spec, Arena arena) {
        long cols = shape[shape.length - 1], rows = scales.elementCount() * spec.groupSize() / cols;
        long bytes = rows * cols * 4;
        // on huge pages where the machine has them: decode streams these as it would a resident copy (WeightResidency)
        var seg = bytes >= (2 << 20) && HugePageMemory.available() ? HugePageMemory.allocate(bytes, arena) : arena.allocate(bytes, 64);
        AffineDequantizer.dequantize(w.data(), scales, biases, spec.bits(), spec.groupSize(), (int) rows, (int) cols, seg);
        return new TensorView(w.name(), DType.F32, shape, seg);
    }

    /**
     * The codes left where they are (mapped; WeightResidency may copy them with the float matrices) and the scales and
     * biases interleaved into one pair per group in their dtype (bf16 and f16 widen exactly, so the pair is the
     * checkpoint's values): one small stream beside the codes instead of two.
     */
    private static PackedTensor pack(TensorView w, long[] shape, TensorView scales, TensorView biases, MlxQuantization.Spec spec, Arena arena) {
        DType type = scales.dtype() == biases.dtype() ? scales.dtype() : DType.F32;
        long n = scales.elementCount(), e = type.bytes();
        long bytes = Math.max(2 * n * e, 1);
        // beside the codes decode streams these too: on huge pages where the machine has them, as the codes will be
        var pairs = bytes >= (2 << 20) && HugePageMemory.available() ? HugePageMemory.allocate(bytes, arena) : arena.allocate(bytes, 64);
        if (type == DType.F32) {
            var f = java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (long i = 0; i < n; i++) {
                pairs.setAtIndex(f, 2 * i, scales.getFloat(i));
                pairs.setAtIndex(f, 2 * i + 1, biases.getFloat(i));
            }
        } else
            for (long i = 0; i < n; i++) {
                MemorySegment.copy(scales.data(), i * e, pairs, 2 * i * e, e);
                MemorySegment.copy(biases.data(), i * e, pairs, (2 * i + 1) * e, e);
            }
        return new PackedTensor(w.name(), shape, w, scales, biases, new AffineGroups(spec.bits(), spec.groupSize(), type, pairs));
    }
}
