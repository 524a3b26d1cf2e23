package dev.decodiff.harness.selftest;

import dev.decodiff.harness.compare.detect.Finding;

/**
 * The op variant bisect must name for a catalog fault, fixed from the fault's definition (and, where the name carries a
 * number, the checkpoint's config) — never from running the engine; the family's plug-in resolves it. {@code name} is
 * matched as a prefix of the name found, so the detail a detector adds after it ("(d = 32)", the keys of a window) does
 * not have to be guessed.
 */
public record ExpectedVariant(String op, String name) {

    public boolean matches(Finding.Variant found) {
        return found != null && found.op().equals(op) && found.name().startsWith(name);
    }

    public String describe() { return op + " — " + name; }
}
