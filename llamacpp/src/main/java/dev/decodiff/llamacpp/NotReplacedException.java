package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.LlamaCppException;

import java.util.Set;

/** Points asked to be replaced whose graph tensors llama.cpp did not compute in the step (this build names them otherwise). */
public final class NotReplacedException extends LlamaCppException {
    private final Set<String> points;

    NotReplacedException(Set<String> points) {
        super("llama.cpp's graph computed no tensor for " + String.join(", ", new java.util.TreeSet<>(points)) + " in this step, so it was not replaced");
        this.points = Set.copyOf(points);
    }

    public Set<String> points() { return points; }
}
