package dev.decodiff.harness.testing;

import dev.decodiff.harness.dump.DumpReader;

import java.nio.file.Path;

/** A reference dump opened for tests (what {@link DecodiffExtension} injects for {@link Reference}). */
public record ReferenceDump(DumpReader reader) {
    public static ReferenceDump open(Path dir) { return new ReferenceDump(DumpReader.open(dir)); }

    public Path dir() { return reader.dir(); }

    @Override
    public String toString() { return "reference " + reader.dir(); }
}
