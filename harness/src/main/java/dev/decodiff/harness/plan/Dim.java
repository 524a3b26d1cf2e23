package dev.decodiff.harness.plan;

/**
 * One axis of a planned tensor shape. Axis 0 is the step's rows (T, the tokens the step fed) or, on a read-back point,
 * the positions read (C); every other axis is a property of the model: known when the plan was made from a checkpoint
 * or a reference, free (any size ≥ 1, the same at every step) when it was made from a manifest alone.
 */
public sealed interface Dim {
    /** The axis's name as the format writes it ("T", "C", "hidden", "kv_heads", …). */
    String label();

    /** The size, or -1 when the plan does not know it (a free axis, or T/C, which depend on the step). */
    default long size() { return -1; }

    /** T: the tokens the step fed. */
    record Rows() implements Dim {
        @Override public String label() { return "T"; }
    }

    /** C: the positions the step's last query reads (the read window). */
    record Read() implements Dim {
        @Override public String label() { return "C"; }
    }

    /** A model property of known size. */
    record Fixed(String label, long size) implements Dim {}

    /** A model property the plan does not know (made from a manifest alone): any size ≥ 1. */
    record Free(String label) implements Dim {}
}
