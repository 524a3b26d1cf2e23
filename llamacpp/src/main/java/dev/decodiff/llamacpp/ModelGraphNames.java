package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.GgmlTensor;

import java.util.Set;

/**
 * How an architecture's llama.cpp graph reads as decodiff's capture points, where a plain name table
 * ({@link GraphNames}, Gemma 4's) is not enough: which graph tensor gives which point, its values in transformers'
 * layout, and the inverse for bisect's substitutions. k_read/v_read are rebuilt from the attention's cache views
 * by {@link StepCapture} for every architecture; {@link #keysRead} puts the keys in transformers' layout.
 */
sealed interface ModelGraphNames permits Qwen35GraphNames, LlamaGraphNames {
    /** The capture point a graph tensor gives, or null. */
    String point(GgmlTensor t);

    /** The tensor in the point's row-major shape, in transformers' layout. */
    LlamaCppRunner.Captured capture(String point, GgmlTensor t);

    /** Whether this graph tensor is the one that carries the point's value into what follows (the one to overwrite). */
    boolean carries(String point, GgmlTensor t);

    /** The inverse of {@link #capture}: the point's row-major values in the graph tensor's layout. */
    float[] toGraph(String point, GgmlTensor t, float[] value);

    /** The point kinds bisect can write into this graph (contiguous tensors the next ops read). */
    Set<String> replaceableKinds();

    /** An architecture's name, for messages. */
    String name();

    /** k_read rows [C, nkv, d] as read from llama.cpp's K cache, in transformers' layout (as they are, by default). */
    default float[] keysRead(float[] rows, int d) { return rows; }
}
