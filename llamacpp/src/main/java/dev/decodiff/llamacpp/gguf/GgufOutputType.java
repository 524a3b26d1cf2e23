package dev.decodiff.llamacpp.gguf;

/**
 * The --type of a conversion: the ggml type of the weight matrices, and general.file_type (llama.cpp's
 * enum llama_ftype). Norms, 1-D tensors, the MoE router and the ".scale" tensors stay F32 whatever the type; with a
 * block type (Q8_0, Q4_0: blocks of 32 along a row) a matrix whose rows are no whole number of blocks is written F16,
 * as llama.cpp's converter falls back.
 */
public enum GgufOutputType {
    F32(0, GgmlType.F32), F16(1, GgmlType.F16), BF16(32, GgmlType.BF16), Q8_0(7, GgmlType.Q8_0), Q4_0(2, GgmlType.Q4_0);

    private final int fileType;
    private final GgmlType matrixType;

    GgufOutputType(int fileType, GgmlType matrixType) {
        this.fileType = fileType;
        this.matrixType = matrixType;
    }

    public int fileType() { return fileType; }

    public GgmlType matrixType() { return matrixType; }

    public static GgufOutputType parse(String s) {
        for (var t : values()) if (t.name().equalsIgnoreCase(s)) return t;
        throw new IllegalArgumentException("unknown --type '" + s + "' (use f32, bf16, f16, q8_0, q4_0, q4_k_m or q4_k_s)");
    }
}
