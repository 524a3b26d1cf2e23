package dev.decodiff.engine.ops;

import dev.decodiff.metal.WeightMatrix;

import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * How a GGUF stores a checkpoint's matrices, whatever the architecture, for the precision hypothesis "ggml's matmuls on
 * the GGUF's own matrices" ({@link Precision#storedMatrices()}): per matrix its values as stored (dequantized as ggml
 * does, in the checkpoint's order), the ggml type and the conversion ggml-cpu applies to a matmul's input for that type
 * (its vec_dot_type). The ops of an architecture read it where they multiply by a matrix or look a row up; what reads
 * the GGUF, checks each matrix against the checkpoint and names the matrices is the harness's (GgufStoredTensors and
 * each architecture's map of names). A matrix that is absent here is multiplied as the checkpoint holds it.
 * <p>{@link #rejected()} lists the GGUF tensors that were not taken because they are not the checkpoint's matrix
 * within their type's rounding (a wrong or corrupted matrix): their matrices are absent, so cells that need them stay
 * unexplained instead of being excused.
 */
public final class StoredMatrices {
    /** How ggml converts a matmul's input before its dot products with a matrix of some type (its vec_dot_type). */
    public enum InputConversion {
        NONE, BF16, F16, Q8_0, Q8_1, Q8_K;

        /**
         * ggml-cpu's vec_dot_type of a stored type: the input rounded to f16/bf16, or quantized to q8_0 blocks (Q8_0,
         * Q4_0, Q5_0), q8_1 blocks (Q4_1, Q5_1: q8_0's values plus an fp16 block sum that meets the weights' minimum)
         * or q8_K super-blocks (the K-quants); null where it is not modelled (the matrix is then left out, so its cells
         * stay unexplained rather than excused).
         */
        public static InputConversion of(String ggmlType) {
            return switch (ggmlType) {
                case "BF16" -> BF16;
                case "F16" -> F16;
                default -> switch (StoredTypes.VecDot.of(ggmlType)) {
                    case Q8_0 -> Q8_0;
                    case Q8_1 -> Q8_1;
                    case Q8_K -> Q8_K;
                    case NONE -> null;
                };
            };
        }

        /** The input rows [T, cols] as this conversion leaves them (a copy, or x itself under NONE). */
        public float[] convert(float[] x, int cols) {
            return switch (this) {
                case NONE -> x;
                case BF16 -> Format.BF16.round(x.clone());
                case F16 -> Format.F16.round(x.clone());
                case Q8_0, Q8_1 -> Gemma4Ops.q8Activations(x, cols);
                case Q8_K -> Gemma4Ops.q8KActivations(x, cols);
            };
        }
    }

    /** A matrix as a GGUF stores it: its weights dequantized to fp32 in the checkpoint's [rows, cols] order, the ggml type's name and its input conversion. */
    public record Stored(float[] weights, String type, InputConversion input) {
        /**
         * y = W·x for T rows of x [T, cols] (the unconverted input): the input converted to the type's vec-dot type,
         * the dot products in fp32 over the stored weights, and for Q4_1/Q5_1 the q8_1 input's fp16 block sum meeting
         * the weights' block minimum. Nothing rounds the output: the caller's precision does.
         */
        public float[] matmul(float[] x, int T, int rows, int cols) {
            float[] in = input.convert(x, cols);
            float[] y = new float[T * rows];
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows; r++) {
                    float acc = 0f;
                    for (int c = 0; c < cols; c++) acc += weights[r * cols + c] * in[t * cols + c];
                    y[t * rows + r] = acc;
                }
            if (input == InputConversion.Q8_1) Gemma4Ops.q8_1MinimumTerm(weights, rows, cols, x, T, y);
            return y;
        }

        /** Row r of the stored [rows, cols] matrix into out[o ..]: ggml's get_rows on it (an embedding lookup dequantizes the row). */
        public void row(int r, int cols, float[] out, int o) { System.arraycopy(weights, r * cols, out, o, cols); }
    }

    /** A GGUF tensor not taken: its name, type and why (which block leaves the type's rounding, by how much). */
    public record Rejected(String tensor, String type, String why) {
        public String describe() { return tensor + " (" + type + "): " + why; }
    }

    private final Map<WeightMatrix, Stored> byMatrix;
    private final List<Rejected> rejected;

    public StoredMatrices(Map<WeightMatrix, Stored> byMatrix, List<Rejected> rejected) {
        this.byMatrix = new IdentityHashMap<>(byMatrix);
        this.rejected = List.copyOf(rejected);
    }

    /** The matrix as stored; null where it is multiplied as the checkpoint holds it (F32, not in the GGUF, rejected, or a type not modelled). */
    public Stored get(WeightMatrix m) { return byMatrix.get(m); }

    public int size() { return byMatrix.size(); }

    public List<Rejected> rejected() { return rejected; }

    /**
     * What a report says about the rejected tensors (null when none was): each is left out of the hypothesis, so the
     * cells that need it are not excused by it.
     */
    public String note() {
        if (rejected.isEmpty()) return null;
        var parts = rejected.stream().map(Rejected::describe).toList();
        return "the GGUF's stored " + (rejected.size() == 1 ? "matrix " : "matrices ") + String.join("; ", parts)
                + " — not the checkpoint's matrix within its type's rounding, so not used to account for any cell";
    }

    /** {@link #note} of {@code s} as a report's notes: none where nothing is known or nothing was rejected. */
    public static List<String> notes(StoredMatrices s) {
        String n = s == null ? null : s.note();
        return n == null ? List.of() : List.of(n);
    }
}
